"""The rules GX's validators check when an expectation is built, held by ``validate`` without GX (issue 53).

``quarantine/expectations/gx_catalog.py`` lists each type's rules (generated from its validators:
``tests.support.gx_catalog.VALIDATOR_RULES``). For each rule, an expectation that breaks it is
written in a suite file: :meth:`Suite.check` (no GX) refuses it with a message naming the file,
the expectation's type and the argument, and the installed GX refuses the same expectation when
it builds it. The same expectation with the rule kept is taken by both.

``unexpected_rows_expectation`` (its ``braces`` rule) is no ``expect_*`` type, which a suite
file cannot hold (the parser refuses its type first): its case is held to the check itself.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from quarantine.errors import ConfigError
from quarantine.expectations.gx_catalog import COMMON_RULES, RULES
from quarantine.expectations.suite import expectation_problem, load_suite

pytestmark = pytest.mark.unit

#: (rule, type, kwargs breaking it, the argument the message names, the same kwargs keeping it).
CASES: list[tuple[str, str, dict[str, Any], str, dict[str, Any]]] = [
    ("min-or-max", "expect_column_values_to_be_between", {"column": "a"}, "min_value",
     {"column": "a", "max_value": 3}),
    ("min-or-max", "expect_column_values_to_be_between", {"column": "a", "min_value": None, "max_value": None},
     "max_value", {"column": "a", "min_value": 0, "max_value": None}),
    ("min-or-max", "expect_column_value_lengths_to_be_between", {"column": "a"}, "min_value",
     {"column": "a", "min_value": 1}),
    ("bounds-not-empty", "expect_column_values_to_be_between", {"column": "a", "min_value": {}}, "min_value",
     {"column": "a", "min_value": {"$PARAMETER": "low"}}),
    ("bounds-not-empty", "expect_column_values_to_be_between", {"column": "a", "min_value": 1, "max_value": ""},
     "max_value", {"column": "a", "min_value": 1, "max_value": "5"}),
    ("min-le-max", "expect_table_row_count_to_be_between", {"min_value": 10, "max_value": 1}, "min_value",
     {"min_value": 1, "max_value": 10}),
    ("bounds-parameter", "expect_table_row_count_to_be_between", {"min_value": {"low": 1}}, "min_value",
     {"min_value": {"$PARAMETER": "low"}}),
    ("result-format-key", "expect_column_values_to_not_be_null", {"column": "a", "result_format": {"x": 1}},
     "result_format", {"column": "a", "result_format": {"result_format": "BASIC"}}),
    ("not-empty", "expect_column_distinct_values_to_be_in_set", {"column": "a", "value_set": []}, "value_set",
     {"column": "a", "value_set": [1]}),
    ("not-empty", "expect_column_values_to_match_regex_list", {"column": "a", "regex_list": []}, "regex_list",
     {"column": "a", "regex_list": ["^a"]}),
    ("not-empty", "expect_column_values_to_not_match_like_pattern_list", {"column": "a", "like_pattern_list": []},
     "like_pattern_list", {"column": "a", "like_pattern_list": ["a%"]}),
    ("one-char", "expect_column_values_to_match_like_pattern", {"column": "a", "like_pattern": "a%", "escape": "!!"},
     "escape", {"column": "a", "like_pattern": "a%", "escape": "!"}),
    ("min-items-2", "expect_compound_columns_to_be_unique", {"column_list": ["a"]}, "column_list",
     {"column_list": ["a", "b"]}),
    ("strftime", "expect_column_values_to_match_strftime_format", {"column": "a", "strftime_format": "%Q"},
     "strftime_format", {"column": "a", "strftime_format": "%Y-%m-%d"}),
    ("braces", "unexpected_rows_expectation", {"unexpected_rows_query": "SELECT * FROM {batch WHERE a"},
     "unexpected_rows_query", {"unexpected_rows_query": "SELECT * FROM {batch} WHERE a"}),
]


def _gx_refusal(etype: str, kwargs: dict[str, Any]) -> str | None:
    """Why the installed GX refuses to build the expectation; None when it builds it."""
    from great_expectations.expectations.expectation_configuration import ExpectationConfiguration

    try:
        ExpectationConfiguration(type=etype, kwargs=kwargs).to_domain_obj()
    except Exception as exc:  # GX raises pydantic's errors, InvalidExpectation… : any is a refusal
        return f"{type(exc).__name__}: {exc}"
    return None


def _suite_file(tmp_path: Path, etype: str, kwargs: dict[str, Any]) -> Path:
    path = tmp_path / "suite.json"
    expectations = [{"type": "expect_column_values_to_not_be_null", "kwargs": {"column": "id"}},
                    {"type": etype, "kwargs": kwargs}]
    path.write_text(json.dumps({"name": "s", "expectations": expectations}), encoding="utf-8")
    return path


@pytest.mark.parametrize(("rule", "etype", "broken", "argument", "kept"), CASES,
                         ids=[f"{c[0]}-{c[1]}-{i}" for i, c in enumerate(CASES)])
def test_a_broken_rule_is_refused_by_the_check_and_by_gx(
    tmp_path: Path, rule: str, etype: str, broken: dict[str, Any], argument: str, kept: dict[str, Any]
) -> None:
    assert any(r.split(":")[0] == rule for r in (*COMMON_RULES, *RULES.get(etype, ()))), (rule, etype)
    if etype.startswith("expect_"):
        path = _suite_file(tmp_path, etype, broken)
        with pytest.raises(ConfigError) as refused:
            load_suite(path).check()
        message = str(refused.value)
        assert str(path) in message and "expectations[1]" in message, message
    else:
        message = expectation_problem(etype, broken) or ""
    assert etype in message and argument in message, message
    assert _gx_refusal(etype, broken) is not None, f"GX builds {etype} {broken}, which the check refuses"

    assert expectation_problem(etype, kept) is None
    assert _gx_refusal(etype, kept) is None


def test_every_rule_in_the_catalog_has_a_case() -> None:
    """A rule the generator adds (a new GX validator named in VALIDATOR_RULES) needs a case here."""
    in_catalog = {r.split(":")[0] for rs in (COMMON_RULES, *RULES.values()) for r in rs}
    assert in_catalog == {c[0] for c in CASES}


def test_the_demo_suite_keeps_every_rule() -> None:
    load_suite("conf/expectations/orders.json").check()
