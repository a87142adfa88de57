"""Secret masking on Spark columns: the error struct's ``message`` and ``stacktrace`` before they
reach the quarantine table (:mod:`quarantine.redaction`'s rules, as Spark expressions).

The rules themselves, and the text they apply to everywhere else, are
:mod:`quarantine.redaction`'s; this module is their Spark side, apart so that what imports
the rules (every error message, the ``quarantine`` command's start) imports no engine.
"""

from __future__ import annotations

from collections.abc import Iterable

# at module level so the pandas UDF's type hints resolve
import pandas as pd
from pyspark.sql import Column
from pyspark.sql import functions as F

from quarantine.columns import MESSAGE, STACKTRACE
from quarantine.redaction import JAVA_GUARD, JAVA_RULES, redact_text

__all__ = ["redact_column", "redact_error"]


def redact_column(text: Column, secrets: Iterable[str] = ()) -> Column:
    """A string column with :func:`redact_text` applied (pure; null stays null).

    Without configured secrets it is native: rules 2-4 as chained ``regexp_replace``
    calls with :data:`JAVA_RULES` (patterns of key names, no secret in them), run only
    on text that :data:`JAVA_GUARD` finds something in. With
    secrets it runs :func:`redact_text` in an Arrow-batched Python UDF whose closure
    holds them — deliberately not ``replace`` with literals: a literal puts the secret
    into the query plan, where the Spark UI, ``explain`` and Py4J debug logs would
    show it. Callers apply it to failed rows only (the quarantine path).
    """
    keep = tuple(sorted({s for s in secrets if s}, key=len, reverse=True))
    if not keep:
        out = text
        for regex, repl in JAVA_RULES:
            out = F.regexp_replace(out, F.lit(regex), F.lit(repl))
        # the seven regexes only where one could match (JAVA_GUARD): most messages ("field
        # 'amount': expected …") match none, and skipping them is most of the rows' redaction
        # cost (benchmarks/README.md, "The redaction guarded")
        return F.when(text.rlike(JAVA_GUARD), out).otherwise(text)

    @F.pandas_udf("string")  # type: ignore[attr-defined, untyped-decorator, misc]
    def _redacted(values: pd.Series) -> pd.Series:
        # Arrow hands nulls to pandas as None or NaN: both must stay null, not become 'nan'.
        return values.map(lambda t: None if pd.isna(t) else redact_text(str(t), keep))

    udf_out: Column = _redacted(text)
    return udf_out


def redact_error(error: Column, secrets: Iterable[str] = (), *, stacktrace: bool = True) -> Column:
    """The error struct with ``message`` and ``stacktrace`` redacted (null stays null).

    Args:
        error: the error struct column.
        secrets: configured secret values to mask.
        stacktrace: whether ``stacktrace`` can be non-null. Pass False only when the
            stages ran with stack traces off (every ``stacktrace`` is null then): it
            skips that field's redaction, one Python round trip per failed row.
    """
    keep = tuple(secrets)
    redacted = error.withField(MESSAGE, redact_column(error.getField(MESSAGE), keep))
    if stacktrace:
        redacted = redacted.withField(STACKTRACE, redact_column(error.getField(STACKTRACE), keep))
    return F.when(error.isNull(), error).otherwise(redacted)
