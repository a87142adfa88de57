"""GX column-map expectations as native Spark predicates (pure Column functions).

:func:`translate` turns one expectation into a :class:`RowCheck`: a non-null
boolean ``unexpected`` column and a ``found`` column that says what the row
held. :func:`combine` folds the checks of a suite into one verdict per row:
``failed``, ``error_class`` (the type of the first failing expectation, in
suite order) and ``message`` (every failing expectation, ``"; "``-separated,
each as ``type(column=…, args…): found <value>``).

The predicates reproduce GX 1.x's Spark semantics exactly (the differential
test in ``tests/integration/test_expectations_differential.py`` holds them to
GX's ``unexpected_count``):

* Map expectations ignore NULLs (GX filters ``column IS NOT NULL`` out of the
  domain), except ``..._to_not_be_null`` (NULL is the failure) and
  ``..._to_be_null`` (every non-NULL value is a failure).
* A predicate that evaluates to NULL (``isin`` against a set holding ``null``)
  is not unexpected, as in GX (it counts ``unexpected == True``).
* Every predicate is total (given the record's type, see :func:`translate`):
  no value fails the job. Where GX's own query would abort (a STRING ``'abc'``
  against numeric bounds under ANSI mode, an ARRAY against any bound, a set of
  mixed types) the value that cannot be compared fails its row, with a message
  naming its type (``found 'abc' (a string that is not a number)``); set
  members that cannot equal a value of the column's type are skipped.
  Non-text atomic values are matched against regexes and measured for length
  as their STRING form; ARRAY, MAP and STRUCT have no length (the row fails).
* ``expect_column_value_lengths_to_be_between`` takes its bounds as GX 1.x's
  model holds them, as integers (``1.9`` → 1, ``"3"`` → 3, see
  :func:`gx_length_bound`), and ``min_value > max_value`` is translated like
  any bounds: no length is within them, so every non-NULL value fails (GX's
  own test ``negative_test_with_max_lt_min``).
* Regexes are Java regexes and *search* (``rlike``), they do not have to match
  the whole value: anchor them with ``^…$`` for a full match.
* ``mostly`` does not change routing: every unexpected row fails here;
  ``mostly`` is the tolerance of the aggregate result (:mod:`.validate`).
* ``expect_column_values_to_be_of_type`` is schema-level: the column's type is
  the same in every row, so it fails all rows or none (``typeof`` of the
  column against the Spark type class named by ``type_``; abstract classes such
  as ``NumericType`` match their subclasses, as GX's ``isinstance`` does).
* ``expect_column_values_to_be_unique`` is within the batch: how many rows hold
  the value comes from the ``count`` given to :func:`translate`
  (:meth:`quarantine.stage.StageContext.batch_count`: the value alone is
  aggregated and the repeated values joined back), the one translated check
  that is not a per-row expression.

Expectations this module does not translate (other types, ``row_condition``,
``$PARAMETER`` arguments, unknown ``type_``) get :func:`untranslated_reason`;
the stage lists them and GX still validates them on the batch.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from quarantine.errors import ConfigError
from quarantine.expectations.suite import ExpectationSpec, Suite
from quarantine.values.spark import (
    as_text,
    compare,
    contains_map,
    incomparable,
    java_regex_problem,
    member_of,
    text_length,
)

if TYPE_CHECKING:
    from pyspark.sql import Column
    from pyspark.sql.types import DataType

__all__ = [
    "TRANSLATED_TYPES",
    "RowCheck",
    "RowVerdict",
    "check_regexes",
    "combine",
    "gx_length_bound",
    "translate",
    "untranslated_reason",
]

_SNIPPET = 64


@dataclass(frozen=True)
class RowCheck:
    """One translated expectation, evaluated per row.

    Attributes:
        spec: the expectation.
        unexpected: non-null boolean: true where the row fails the expectation.
        found: what the row held, as text (only read where ``unexpected``).
    """

    spec: ExpectationSpec
    unexpected: Column
    found: Column

    @property
    def message(self) -> Column:
        """``type(column=…, args…): found <value>``."""
        from pyspark.sql import functions as F

        return F.concat(F.lit(f"{self.spec.describe()}: found "), self.found)


@dataclass(frozen=True)
class RowVerdict:
    """A suite's outcome for a row.

    Attributes:
        failed: non-null boolean: some translated expectation failed.
        error_class: the first failing expectation's type (suite order), else NULL.
        message: every failing expectation's message joined by ``"; "``, else NULL.
    """

    failed: Column
    error_class: Column
    message: Column


def _shown(v: Column) -> Column:
    from pyspark.sql import functions as F

    text = v.cast("string")
    cut = F.when(F.length(text) > _SNIPPET, F.concat(F.substring(text, 1, _SNIPPET), F.lit("…")))
    return F.when(v.isNull(), F.lit("NULL")).otherwise(
        F.concat(F.lit("'"), F.coalesce(cut, text), F.lit("'"))
    )


def _not_null_and(v: Column, unexpected: Column) -> Column:
    """GX's map rule: NULL values are out of the domain; a NULL predicate is not a failure."""
    from pyspark.sql import functions as F

    return v.isNotNull() & F.coalesce(unexpected, F.lit(False))


def _range(x: Column, dtype: DataType | None, lo: Any, hi: Any, kw: Mapping[str, Any]) -> Column | None:
    """GX's between: the *expected* condition (inclusive unless strict_min/strict_max).

    NULL where ``x`` cannot be compared with the bounds; None when no value of
    ``dtype`` can (see :func:`quarantine.values.spark.compare`).
    """
    parts: list[Column | None] = []
    if lo is not None:
        parts.append(compare(x, dtype, operator.gt if kw.get("strict_min") else operator.ge, lo))
    if hi is not None:
        parts.append(compare(x, dtype, operator.lt if kw.get("strict_max") else operator.le, hi))
    if any(p is None for p in parts):
        return None
    ok = [p for p in parts if p is not None]
    out = ok[0]
    for p in ok[1:]:
        out = out & p
    return out


def _bounded(spec: ExpectationSpec, x: Column, dtype: DataType | None, lo: Any, hi: Any, v: Column,
             shown: Column) -> RowCheck:
    """A between check of ``x`` (``v`` or its length): a value that cannot be compared fails."""
    from pyspark.sql import functions as F

    why = F.lit(f" ({incomparable(dtype, [b for b in (lo, hi) if b is not None])})")
    expected = _range(x, dtype, lo, hi, spec.kwargs)
    if expected is None:  # no value of this type compares with the bounds: every value fails
        return RowCheck(spec, v.isNotNull(), F.concat(shown, why))
    # a value that cannot be compared (NULL) fails, unlike GX's NULL-predicate rule
    unexpected = v.isNotNull() & ~F.coalesce(expected, F.lit(False))
    return RowCheck(spec, unexpected, F.concat(shown, F.when(expected.isNull(), why).otherwise(F.lit(""))))


# Spark type class name (GX's ``type_``) -> typeof() strings it accepts; abstract
# classes list every concrete subclass, as GX's isinstance check does.
_INTEGRAL = ("tinyint", "smallint", "int", "bigint")
_FRACTIONAL = ("float", "double", "decimal")
_TYPEOF: dict[str, tuple[str, ...]] = {
    "StringType": ("string",),
    "BinaryType": ("binary",),
    "BooleanType": ("boolean",),
    "ByteType": ("tinyint",),
    "ShortType": ("smallint",),
    "IntegerType": ("int",),
    "LongType": ("bigint",),
    "FloatType": ("float",),
    "DoubleType": ("double",),
    "DecimalType": ("decimal",),
    "DateType": ("date",),
    "TimestampType": ("timestamp",),
    "TimestampNTZType": ("timestamp_ntz",),
    "ArrayType": ("array",),
    "MapType": ("map",),
    "StructType": ("struct",),
    "IntegralType": _INTEGRAL,
    "FractionalType": _FRACTIONAL,
    "NumericType": _INTEGRAL + _FRACTIONAL,
}


def _type_matches(v: Column, type_name: str) -> Column:
    # typeof gives e.g. "decimal(10,2)", "array<int>", "string collate UTF8_LCASE": compare the head
    from pyspark.sql import functions as F

    head = F.regexp_extract(F.typeof(v), r"^([a-z_]+)", 1)
    return head.isin(list(_TYPEOF[type_name]))


def _not_null(spec: ExpectationSpec, v: Column, dtype: DataType | None) -> RowCheck:
    from pyspark.sql import functions as F

    return RowCheck(spec, v.isNull(), F.lit("NULL"))


def _null(spec: ExpectationSpec, v: Column, dtype: DataType | None) -> RowCheck:
    return RowCheck(spec, v.isNotNull(), _shown(v))


def _between(spec: ExpectationSpec, v: Column, dtype: DataType | None) -> RowCheck:
    kw = spec.kwargs
    return _bounded(spec, v, dtype, kw.get("min_value"), kw.get("max_value"), v, _shown(v))


def _in_set(spec: ExpectationSpec, v: Column, dtype: DataType | None) -> RowCheck:
    from pyspark.sql import functions as F

    values = spec.kwargs.get("value_set")
    if values is None:  # GX: vacuously true
        return RowCheck(spec, F.lit(False), _shown(v))
    return RowCheck(spec, _not_null_and(v, ~member_of(v, dtype, list(values))), _shown(v))


def _not_in_set(spec: ExpectationSpec, v: Column, dtype: DataType | None) -> RowCheck:
    values = list(spec.kwargs["value_set"])
    return RowCheck(spec, _not_null_and(v, member_of(v, dtype, values)), _shown(v))


def _regex(spec: ExpectationSpec, v: Column, dtype: DataType | None) -> RowCheck:
    return RowCheck(spec, _not_null_and(v, ~as_text(v, dtype).rlike(spec.kwargs["regex"])), _shown(v))


def _not_regex(spec: ExpectationSpec, v: Column, dtype: DataType | None) -> RowCheck:
    return RowCheck(spec, _not_null_and(v, as_text(v, dtype).rlike(spec.kwargs["regex"])), _shown(v))


def gx_length_bound(v: Any) -> Any:
    """A length bound as GX 1.x holds it: its model types ``min_value``/``max_value`` as ``int``.

    GX validates the expectation with pydantic (v1 semantics, ``smart_union``):
    an int (or a bool) is kept, anything else goes through ``int()``, so ``1.9``
    becomes 1, ``-1.5`` becomes -1 and ``" 3 "`` becomes 3; ``"2.5"``, NaN and
    infinities are rejected (a config error when the suite loads).

    Raises:
        ValueError: GX rejects the value.
    """
    if v is None or isinstance(v, int):
        return v
    try:
        return int(v)
    except (TypeError, ValueError, OverflowError):
        raise ValueError(f"{v!r} is not an integer") from None


def _lengths(spec: ExpectationSpec, v: Column, dtype: DataType | None) -> RowCheck:
    from pyspark.sql import functions as F
    from pyspark.sql.types import IntegerType

    kw = spec.kwargs
    lo, hi = gx_length_bound(kw.get("min_value")), gx_length_bound(kw.get("max_value"))
    n = text_length(v, dtype)
    if n is None:
        return RowCheck(spec, v.isNotNull(), F.concat(_shown(v), F.lit(f" ({_type(dtype)}: no length)")))
    found = F.concat(_shown(v), F.lit(" (length "), n.cast("string"), F.lit(")"))
    # min > max is not special: as in GX, no length is within, every value fails
    return _bounded(spec, n, IntegerType(), lo, hi, v, found)


def _length_equal(spec: ExpectationSpec, v: Column, dtype: DataType | None) -> RowCheck:
    from pyspark.sql import functions as F
    from pyspark.sql.types import IntegerType

    value = spec.kwargs["value"]
    n = text_length(v, dtype)
    if n is None:
        return RowCheck(spec, v.isNotNull(), F.concat(_shown(v), F.lit(f" ({_type(dtype)}: no length)")))
    found = F.concat(_shown(v), F.lit(" (length "), n.cast("string"), F.lit(")"))
    # GX's model types ``value`` as float: True is 1.0, "3" is 3.0
    target = float(value) if isinstance(value, bool | str) else value
    return _bounded(spec, n, IntegerType(), target, target, v, found)


def _type(dtype: DataType | None) -> str:
    return dtype.simpleString() if dtype is not None else "value"


def _of_type(spec: ExpectationSpec, v: Column, dtype: DataType | None) -> RowCheck:
    from pyspark.sql import functions as F

    type_name = str(spec.kwargs["type_"])
    return RowCheck(spec, ~_type_matches(v, type_name), F.concat(F.lit("type "), F.typeof(v)))


#: How many rows of the batch hold a value (1 for NULL): ``StageContext.batch_count``.
BatchCount = Callable[["Column"], "Column"]


def _window_count(key: Column) -> Column:
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    return F.when(key.isNotNull(), F.count(F.lit(1)).over(Window.partitionBy(key))).otherwise(F.lit(1))


def _unique(spec: ExpectationSpec, v: Column, dtype: DataType | None, count: BatchCount = _window_count) -> RowCheck:
    # Within the batch. Spark cannot group or join by a MAP, so a value holding one is
    # compared by its JSON text.
    from pyspark.sql import functions as F

    key = F.to_json(v) if contains_map(dtype) else v
    n = count(key)
    found = F.concat(_shown(v), F.lit(" ("), n.cast("string"), F.lit(" times in the batch)"))
    return RowCheck(spec, v.isNotNull() & (n > 1), found)


_TRANSLATORS: dict[str, Callable[[ExpectationSpec, Column, DataType | None], RowCheck]] = {
    "expect_column_values_to_not_be_null": _not_null,
    "expect_column_values_to_be_null": _null,
    "expect_column_values_to_be_between": _between,
    "expect_column_values_to_be_in_set": _in_set,
    "expect_column_values_to_not_be_in_set": _not_in_set,
    "expect_column_values_to_match_regex": _regex,
    "expect_column_values_to_not_match_regex": _not_regex,
    "expect_column_value_lengths_to_be_between": _lengths,
    "expect_column_value_lengths_to_equal": _length_equal,
    "expect_column_values_to_be_of_type": _of_type,
    "expect_column_values_to_be_unique": _unique,
}

#: The expectation types :func:`translate` turns into row predicates.
TRANSLATED_TYPES: frozenset[str] = frozenset(_TRANSLATORS)

_REQUIRED: dict[str, tuple[str, ...]] = {
    "expect_column_values_to_not_be_in_set": ("value_set",),
    "expect_column_values_to_match_regex": ("regex",),
    "expect_column_values_to_not_match_regex": ("regex",),
    "expect_column_value_lengths_to_equal": ("value",),
    "expect_column_values_to_be_of_type": ("type_",),
}


def _has_parameter(v: Any) -> bool:
    if isinstance(v, Mapping):
        return "$PARAMETER" in v or any(_has_parameter(x) for x in v.values())
    if isinstance(v, list | tuple):
        return any(_has_parameter(x) for x in v)
    return False


def untranslated_reason(spec: ExpectationSpec) -> str | None:
    """Why ``spec`` is not translated to a row predicate, or None if it is.

    An untranslated expectation is validated by GX on the whole batch only.
    """
    kw = spec.kwargs
    if spec.type not in _TRANSLATORS:
        return "not a translated row-level expectation type"
    if spec.column is None:
        return "no 'column' argument"
    if kw.get("row_condition"):
        return "has a row_condition (conditional expectations are validated by GX only)"
    if _has_parameter(dict(kw)):
        return "uses $PARAMETER arguments (resolved by GX at validation time)"
    for req in _REQUIRED.get(spec.type, ()):
        if kw.get(req) is None:
            return f"missing argument '{req}'"
    if spec.type in (
        "expect_column_values_to_be_between", "expect_column_value_lengths_to_be_between"
    ):
        lo, hi = kw.get("min_value"), kw.get("max_value")
        if lo is None and hi is None:
            return "neither min_value nor max_value is set"
        if spec.type == "expect_column_values_to_be_between":
            if lo is not None and hi is not None and _gt(lo, hi):
                return "min_value > max_value (GX reports this as an error)"
        else:  # GX holds length bounds as integers and checks min > max like any other bounds
            for k in ("min_value", "max_value"):
                try:
                    gx_length_bound(kw.get(k))
                except ValueError:
                    return f"{k} {kw.get(k)!r} is not an integer (GX rejects it)"
    if spec.type == "expect_column_value_lengths_to_equal":
        value = kw["value"]
        try:
            float(value)
        except (TypeError, ValueError):
            return f"value {value!r} is not a number (GX rejects it)"
    if spec.type == "expect_column_values_to_be_of_type" and str(kw["type_"]) not in _TYPEOF:
        return f"type_ '{kw['type_']}' is not one of {', '.join(sorted(_TYPEOF))}"
    if spec.type in ("expect_column_values_to_be_in_set", "expect_column_values_to_not_be_in_set"):
        vs = kw.get("value_set")
        if vs is not None and not isinstance(vs, list | tuple):
            return "value_set is not a list"
    return None


def _gt(a: Any, b: Any) -> bool:
    try:
        return bool(a > b)
    except TypeError:
        return False


def translate(
    spec: ExpectationSpec, record: Column, record_type: DataType | None = None, *, count: BatchCount | None = None
) -> RowCheck | None:
    """The row predicate of ``spec`` over the struct ``record``, or None if untranslated.

    Args:
        spec: one expectation of a suite.
        record: a struct column whose fields are the suite's columns (the
            expectation stage's input).
        record_type: the type of ``record`` (``StageContext.type_of``). With it the
            predicate is total: a value that cannot be compared with the
            expectation's arguments fails its row instead of the job. Without it
            Spark's implicit coercion decides, which is not total.
        count: how many rows of the batch hold a value (``StageContext.batch_count``),
            for ``unique``; default a window count partitioned by the value.

    Returns:
        A :class:`RowCheck`, or None when :func:`untranslated_reason` gives a reason.
    """
    from pyspark.sql.types import StructType

    if untranslated_reason(spec) is not None:
        return None
    assert spec.column is not None
    dtype: DataType | None = None
    if isinstance(record_type, StructType) and spec.column in record_type.fieldNames():
        dtype = record_type[spec.column].dataType
    value = record.getField(spec.column)
    if spec.type == "expect_column_values_to_be_unique":
        return _unique(spec, value, dtype, count or _window_count)
    return _TRANSLATORS[spec.type](spec, value, dtype)


def check_regexes(suite: Suite) -> None:
    """Compile every ``regex`` argument of ``suite`` the way Spark will (``java.util.regex``).

    Raises:
        ConfigError: naming the expectation (``<source>: expectations[i].kwargs.regex``),
            its type and column, the pattern, and why it does not compile.
    """
    for i, e in enumerate(suite.expectations):
        pattern = e.kwargs.get("regex")
        if not isinstance(pattern, str):
            continue
        problem = java_regex_problem(pattern)
        if problem is not None:
            raise ConfigError(
                f"{suite.source}: expectations[{i}].kwargs.regex", pattern,
                f"a regular expression java.util.regex compiles, for {e.type} on column "
                f"'{e.column}' ({problem})",
            )


def combine(checks: Sequence[RowCheck]) -> RowVerdict:
    """Fold translated checks into one verdict per row (see :class:`RowVerdict`)."""
    from pyspark.sql import functions as F

    if not checks:
        return RowVerdict(F.lit(False), F.lit(None).cast("string"), F.lit(None).cast("string"))
    failed = checks[0].unexpected
    for c in checks[1:]:
        failed = failed | c.unexpected
    error_class = F.coalesce(*[F.when(c.unexpected, F.lit(c.spec.type)) for c in checks])
    message = F.concat_ws("; ", *[F.when(c.unexpected, c.message) for c in checks])
    return RowVerdict(failed, error_class, F.when(failed, message))
