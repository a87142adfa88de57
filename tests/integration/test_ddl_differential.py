"""quarantine.ddl against Spark's own parser: the same type for every text, or both refuse.

``quarantine validate`` reads type DDL without Spark (quarantine.ddl); a run reads it
with ``DataType.fromDDL``. A config that validates must run, and one that is refused
must be refused by both, so the two are held to the same answers: for generated types
written every way a config may spell them (aliases, case, colons, backticks, NOT NULL,
COMMENT), and for hand-picked texts both must refuse. (One difference on purpose: Spark
reads an empty text as an empty struct; the stages refuse an empty type before parsing.)
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyspark.sql.types import DataType

from quarantine.ddl import DDLError, parse_ddl_type

_ATOMS = ["string", "int", "integer", "bigint", "long", "smallint", "short", "tinyint", "byte", "double",
          "float", "real", "boolean", "date", "timestamp", "timestamp_ltz", "timestamp_ntz", "binary",
          "decimal", "dec", "numeric", "variant"]

_name = st.one_of(
    st.from_regex(r"[a-z_][a-z0-9_]{0,8}", fullmatch=True),
    st.text(alphabet="ab `c-.1", min_size=1, max_size=6).map(lambda s: "`" + s.replace("`", "``") + "`"),
)


def _case(word: str, upper: bool) -> str:
    return word.upper() if upper else word


def _types() -> st.SearchStrategy[str]:
    atom = st.one_of(
        st.tuples(st.sampled_from(_ATOMS), st.booleans()).map(lambda t: _case(*t)),
        st.tuples(st.integers(1, 38), st.integers(0, 38)).filter(lambda ps: ps[1] <= ps[0])
        .map(lambda ps: f"DECIMAL({ps[0]}, {ps[1]})"),
        st.tuples(st.sampled_from(["char", "varchar"]), st.integers(1, 50)).map(lambda t: f"{t[0]}({t[1]})"),
    )

    def nest(inner: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
        field = st.tuples(_name, st.sampled_from([": ", ":", " "]), inner, st.booleans(), st.booleans()).map(
            lambda f: f"{f[0]}{f[1]}{f[2]}{' NOT NULL' if f[3] else ''}{' COMMENT ' + repr('c') if f[4] else ''}"
        )
        return st.one_of(
            inner.map(lambda t: f"ARRAY<{t}>"),
            st.tuples(inner, inner).map(lambda kv: f"map<{kv[0]}, {kv[1]}>"),
            st.lists(field, min_size=0, max_size=3).map(lambda fs: f"STRUCT<{', '.join(fs)}>"),
        )

    return st.recursive(atom, nest, max_leaves=6)


def _top() -> st.SearchStrategy[str]:
    """A type, or a top-level field list (a schema) with unique names."""
    return st.one_of(
        _types(),
        st.lists(st.tuples(_name, _types()), min_size=1, max_size=3, unique_by=lambda f: f[0].lower())
        .map(lambda fs: ", ".join(f"{n} {t}" for n, t in fs)),
    )


def _spark(text: str) -> Any:
    try:
        return DataType.fromDDL(text)
    except Exception:  # Spark's parse errors come in several types
        return "refused"


def _ours(text: str) -> Any:
    try:
        return parse_ddl_type(text)
    except DDLError:
        return "refused"


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=_top())
def test_generated_types_read_the_same_as_spark_reads_them(spark: Any, text: str) -> None:
    assert _ours(text) == _spark(text), text


@pytest.mark.parametrize("text", [
    "bool", "a INTT", "array<int", "map<string>", "decimal(40,2)", "decimal(5,6)", "a int,",
    "int not null", "struct<a int", "a INT; b INT", "varchar", "char(x)", "array<>", "map<int,int,int>",
])
def test_both_refuse_what_spark_refuses(spark: Any, text: str) -> None:
    assert _spark(text) == "refused"
    assert _ours(text) == "refused"
