"""The one home of secret masking: configs, free text and Spark columns.

(moved here as-is; the rules are documented below once they are extended)
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import Column

__all__ = [
    "REDACTED",
    "collect_secrets",
    "is_secret_key",
    "redact",
    "redact_column",
    "redact_error",
    "redact_text",
]

REDACTED = "[redacted]"

_SECRET_KEY = re.compile(
    r"(password|passwd|secret|token|sasl\.jaas\.config|credential|api[._-]?key|"
    r"private[._-]?key|access[._-]?key|auth)",
    re.IGNORECASE,
)
# key=value / key: value / key="value" pairs whose key looks like a secret, inside free text
# (a JAAS line, a JDBC URL, an exception message that echoed a config).
_SECRET_PAIR = re.compile(
    r"""(?P<k>[\w.\-]*(?:password|passwd|secret|token|credential|api[._-]?key|"""
    r"""private[._-]?key|access[._-]?key)[\w.\-]*)(?P<sep>\s*[=:]\s*)"""
    r"""(?P<v>"[^"]*"|'[^']*'|[^\s;,&"']+)""",
    re.IGNORECASE,
)
#: :data:`_SECRET_PAIR` for ``java.util.regex`` (Spark's ``regexp_replace``): the same
#: groups, case-insensitive, ``\w``/``\s`` Unicode-aware as in Python's ``re``.
SECRET_PAIR_JAVA = "(?iU)" + _SECRET_PAIR.pattern.replace("(?P<", "(?<")
#: The Java replacement that masks a :data:`SECRET_PAIR_JAVA` match's value.
SECRET_PAIR_JAVA_REPLACEMENT = "${k}${sep}" + REDACTED




def is_secret_key(key: str) -> bool:
    """Whether a config key names a credential (password, token, JAAS config…)."""
    return bool(_SECRET_KEY.search(key))


def redact_text(text: str, secrets: tuple[str, ...] = ()) -> str:
    """Redact ``key=value`` secrets and every known secret value inside free text."""
    out = text
    # Longest first, so a whole JAAS line is masked before the password inside it.
    for s in sorted({s for s in secrets if s}, key=len, reverse=True):
        out = out.replace(s, REDACTED)
    return _SECRET_PAIR.sub(lambda m: f"{m.group('k')}{m.group('sep')}{REDACTED}", out)


def redact(value: Any, key: str = "") -> Any:
    """Return a copy of a config value with credentials replaced by ``[redacted]``.

    Mappings are walked recursively; a value under a secret-looking key is
    replaced whole; strings elsewhere have embedded ``password=…`` pairs masked.
    """
    if key and is_secret_key(key) and not isinstance(value, Mapping):
        return REDACTED
    if isinstance(value, Mapping):
        return {str(k): redact(v, str(k)) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [redact(v, key) for v in value]
    if isinstance(value, str):
        return redact_text(value)
    return value


def collect_secrets(value: Any, key: str = "") -> tuple[str, ...]:
    """Every string value held under a secret-looking key (to scrub from any text)."""
    found: list[str] = []
    if isinstance(value, Mapping):
        for k, v in value.items():
            found.extend(collect_secrets(v, str(k)))
    elif isinstance(value, list | tuple):
        for v in value:
            found.extend(collect_secrets(v, key))
    else:
        if key and is_secret_key(key) and value is not None and str(value):
            found.append(str(value))
        if isinstance(value, str):
            # values of password=… pairs inside any string (a JAAS line, a JDBC URL), so a
            # bare occurrence of the password alone in an exception message is masked too
            for m in _SECRET_PAIR.finditer(value):
                inner = m.group("v").strip("\"'")
                if inner and inner != REDACTED:
                    found.append(inner)
    return tuple(found)


def redact_column(text: Column, secrets: Iterable[str] = ()) -> Column:
    """A string column with every secret value and ``password=…`` pair masked (pure).

    The same masking as :func:`quarantine.config.redact_text`. Without configured
    secrets it is native (``regexp_replace`` with :data:`~quarantine.config.SECRET_PAIR_JAVA`,
    a pattern of key names, no secret in it). With secrets it runs ``redact_text``
    in an Arrow-batched Python UDF whose closure holds them — deliberately not
    ``replace`` with literals: a literal puts the secret into the query plan, where
    the Spark UI, ``explain`` and Py4J debug logs would show it. Either way it is
    applied to failed rows only (the quarantine path).
    """
    from pyspark.sql import functions as F

    keep = tuple(sorted({s for s in secrets if s}, key=len, reverse=True))
    if not keep:
        return F.regexp_replace(text, F.lit(SECRET_PAIR_JAVA), F.lit(SECRET_PAIR_JAVA_REPLACEMENT))

    import pandas as pd

    @F.pandas_udf("string")  # type: ignore[attr-defined, untyped-decorator, misc]
    def _redacted(values: pd.Series) -> pd.Series:
        # Arrow hands nulls to pandas as None or NaN: both must stay null, not become 'nan'.
        return values.map(lambda t: None if pd.isna(t) else redact_text(str(t), keep))

    out: Column = _redacted(text)
    return out


def redact_error(error: Column, secrets: Iterable[str] = (), *, stacktrace: bool = True) -> Column:
    """The error struct with ``message`` and ``stacktrace`` redacted (null stays null).

    Args:
        error: the error struct column.
        secrets: configured secret values to mask.
        stacktrace: whether ``stacktrace`` can be non-null. Pass False only when the
            stages ran with stack traces off (every ``stacktrace`` is null then): it
            skips that field's redaction UDF, one Python round trip per failed row.
    """
    from pyspark.sql import functions as F

    keep = tuple(secrets)
    redacted = error.withField("message", redact_column(error.getField("message"), keep))
    if stacktrace:
        redacted = redacted.withField("stacktrace", redact_column(error.getField("stacktrace"), keep))
    return F.when(error.isNull(), error).otherwise(redacted)


