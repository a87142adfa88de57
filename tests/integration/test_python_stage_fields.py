"""A python stage keeps every field or says so: what a struct result leaves out, adds, and keeps of its input.

Issue 60, A and B. A dict (or DataFrame) that leaves out a field ``returns:`` declares fails
that record naming the fields (``MissingResultField``), unless ``missing_fields: as_null``; an
explicit None is a NULL. A returned field ``returns:`` does not declare is named per record
(the stage reports it as schema drift: the run's summary names it). ``output: extend``, the
default, makes the result the input struct plus the returned fields, so a stage that adds
fields declares only those.
"""

from __future__ import annotations

from typing import Any

from pyspark.sql import functions as F

from quarantine.batch.chain import apply_stages
from quarantine.columns import ITEM_SEP
from quarantine.config import StageSpec
from quarantine.stage import Stage, drift_column
from quarantine.stages import build_stage
from tests.helpers import kafka_df

SCHEMA = "event_id STRING, page STRING, tags ARRAY<STRING>"
EVENTS = [
    '{"event_id": "e1", "page": "/shop/x", "tags": ["a", "b"]}',
    '{"event_id": "e2", "page": "/blog/y", "tags": []}',
    '{"event_id": "e3", "page": null}',
]
FIELDS = "section STRING, tag_count INT"
EVERY_FIELD = f"{SCHEMA}, {FIELDS}"


def _stage(name: str, type_: str, options: dict[str, Any], input_: str | None = None) -> Stage:
    return build_stage(StageSpec(name, type_, input_, options, 2))


def _enrich(function: str, returns: str, name: str = "enrich", **options: Any) -> Stage:
    return _stage(name, "python", {"function": f"tests.fixtures_py_stage.{function}", "returns": returns, **options})


def _run(spark: Any, last: Stage, values: list[str] = EVENTS) -> tuple[list[Any], list[str | None], Any]:
    """The last stage's column per record, its per-record undeclared fields, and its result type."""
    stages = [_stage("decode", "decode_utf8", {}), _stage("parse", "json", {"schema": SCHEMA}), last]
    out = apply_stages(kafka_df(spark, [v.encode() for v in values]), stages).orderBy("offset")
    drift = drift_column(last.name)
    rows = out.select(last.name, F.col(drift) if drift in out.columns else F.lit(None).alias(drift)).collect()
    result_type = out.schema[last.name].dataType["result"].dataType
    assert last.produces(stages[1].produces(None)) == result_type  # lineage's type is the run's
    return [r[0] for r in rows], [r[1] for r in rows], result_type


def _failures(rows: list[Any]) -> list[tuple[str, str]]:
    assert all(r.result is None for r in rows)
    return [(r.error.error_class, r.error.message) for r in rows]


MISSING = (
    "MissingResultField",
    "the function's result has no 'event_id', 'page', 'tags' (returns: declares them; return None for a NULL, "
    "or set missing_fields: as_null)",
)


def test_a_dict_that_leaves_out_declared_fields_fails_each_record_naming_them(spark: Any) -> None:
    for output in ("replace", "extend"):
        rows, _, _ = _run(spark, _enrich("enrich_forgetting_the_event", EVERY_FIELD, output=output))
        assert _failures(rows) == [MISSING] * 3, output
        assert {r.error.stage for r in rows} == {"enrich"} and {r.error.kind for r in rows} == {"transform"}


def test_an_explicit_none_is_a_null_and_the_opt_out_fills_nulls(spark: Any) -> None:
    rows, _, _ = _run(spark, _enrich("enrich_new_fields", FIELDS, output="replace"))
    assert [r.result.asDict() for r in rows] == [
        {"section": "shop", "tag_count": 2}, {"section": "blog", "tag_count": 0}, {"section": None, "tag_count": 0}
    ]
    rows, _, _ = _run(spark, _enrich("enrich_forgetting_the_event", EVERY_FIELD, output="replace",
                                     missing_fields="as_null"))
    assert [r.error for r in rows] == [None] * 3
    assert rows[0].result.asDict() == {"event_id": None, "page": None, "tags": None, "section": "shop", "tag_count": 2}


def test_a_dataframe_without_a_declared_column_fails_each_record_naming_it(spark: Any) -> None:
    rows, _, _ = _run(spark, _enrich("enrich_without_a_column_batch", FIELDS, mode="vectorized"))
    assert _failures(rows) == [(
        "MissingResultField",
        "the function's result has no 'tag_count' (returns: declares it; return None for a NULL, or set "
        "missing_fields: as_null)",
    )] * 3


def test_extend_is_the_default_the_result_is_the_input_plus_the_returned_fields(spark: Any) -> None:
    want = [
        {"event_id": "e1", "page": "/shop/x", "tags": ["a", "b"], "section": "shop", "tag_count": 2},
        {"event_id": "e2", "page": "/blog/y", "tags": [], "section": "blog", "tag_count": 0},
        {"event_id": "e3", "page": None, "tags": None, "section": None, "tag_count": 0},
    ]
    for stage in (_enrich("enrich_new_fields", FIELDS),
                  _enrich("enrich_new_fields_batch", FIELDS, mode="vectorized")):
        rows, undeclared, result_type = _run(spark, stage)
        assert [r.result.asDict() for r in rows] == want
        assert result_type.fieldNames() == ["event_id", "page", "tags", "section", "tag_count"]
        # DataFrame.assign hands the input's columns back unchanged: nothing undeclared, nothing said
        assert undeclared == [None] * 3


def test_a_scalar_result_extends_its_input_by_a_field_named_after_the_stage(spark: Any) -> None:
    rows, _, result_type = _run(spark, _enrich("event_area", "INT", name="tag_total"))
    assert result_type.fieldNames() == ["event_id", "page", "tags", "tag_total"]
    assert [(r.result.event_id, r.result.tag_total) for r in rows] == [("e1", 2), ("e2", 0), ("e3", 0)]


def test_returned_fields_returns_does_not_declare_are_named_per_record(spark: Any) -> None:
    # extend: the input's fields handed back unchanged are not news; page changed on e1 is, and is dropped
    rows, undeclared, _ = _run(spark, _enrich("enrich_restating_the_event", FIELDS))
    assert [r.result.page for r in rows] == ["/shop/x", "/blog/y", None]
    assert undeclared == ["page", None, None]
    # replace: every field of the input the function hands back is left out of the result, and named
    rows, undeclared, _ = _run(spark, _enrich("enrich_restating_the_event", FIELDS, output="replace"))
    assert rows[0].result.asDict() == {"section": "shop", "tag_count": 2}
    assert undeclared == [ITEM_SEP.join(["event_id", "page", "tags"])] * 3
