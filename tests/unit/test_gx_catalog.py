"""``quarantine/expectations/gx_catalog.py`` is what the installed Great Expectations registers, and the
check that reads it (:func:`~quarantine.expectations.suite.expectation_problem`) never refuses what GX
accepts (issue 53: ``validate`` checks a suite without importing GX).

GX is imported here, in the test, to be compared with: the catalog cannot go stale while this passes.
"""

from __future__ import annotations

from typing import Any

import pytest

from quarantine.expectations.gx_catalog import COMMON_ARGUMENTS, EXPECTATION_TYPES
from quarantine.expectations.suite import expectation_problem
from tests.support.gx_catalog import CATALOG_FILE, render

#: Values of every JSON kind, and strings GX's fields convert (a numeric string, an enum's value).
VALUES: tuple[Any, ...] = (None, "a", "0.5", "2", 5, 0.5, 1.0, 2, -1, True, False, [1, 2], ["a"],
                           {"$PARAMETER": "p"}, {"a": 1}, "COMPLETE", "critical", "spark", "all", "")


def _gx_accepts(etype: str, kwargs: dict[str, Any]) -> bool:
    from great_expectations.expectations.expectation_configuration import ExpectationConfiguration

    try:
        ExpectationConfiguration(type=etype, kwargs=kwargs).to_domain_obj()
    except Exception:  # GX raises pydantic's errors, InvalidExpectation… : any is a refusal
        return False
    return True


def _required(etype: str) -> dict[str, Any]:
    """A value GX takes for each required argument of ``etype``."""
    out: dict[str, Any] = {}
    for arg, spec in {**COMMON_ARGUMENTS, **EXPECTATION_TYPES[etype]}.items():
        if spec.startswith("!"):
            out[arg] = "c" if "string" in spec else ["a", "b"] if "array" in spec else {"$PARAMETER": "p"}
    return out


def test_the_catalog_is_what_the_installed_great_expectations_registers() -> None:
    assert CATALOG_FILE.read_text(encoding="utf-8") == render(), (
        "quarantine/expectations/gx_catalog.py is stale: run `python -m tests.support.gx_catalog`"
    )


@pytest.mark.parametrize("etype", sorted(EXPECTATION_TYPES))
def test_the_check_refuses_nothing_gx_accepts(etype: str) -> None:
    """Each argument of the type (and one it does not take) with each kind of value: where GX takes
    the expectation, the check does too; where the check refuses, GX refuses."""
    wrong = []
    for arg in [*EXPECTATION_TYPES[etype], "catch_exceptions", "severity", "mostly_not"]:
        for value in VALUES:
            kwargs = {**_required(etype), arg: value}
            if expectation_problem(etype, kwargs) is not None and _gx_accepts(etype, kwargs):
                wrong.append((arg, value, expectation_problem(etype, kwargs)))
    assert not wrong, f"refused, though GX {etype} accepts them: {wrong}"


@pytest.mark.parametrize(
    ("etype", "kwargs"),
    [
        ("expect_the_moon", {"column": "a"}),
        ("expect_column_values_to_not_be_null", {}),
        ("expect_column_values_to_not_be_null", {"column": "a", "bogus": 1}),
        ("expect_column_values_to_not_be_null", {"column": 5}),
        ("expect_column_values_to_be_between", {"column": "a", "min_value": 1, "mostly": 2}),
        ("expect_column_values_to_be_between", {"column": "a", "min_value": 1, "mostly": "most"}),
        ("expect_column_values_to_be_in_set", {"column": "a", "value_set": "x"}),
        ("expect_column_values_to_be_in_set", {"column": "a"}),
        ("expect_column_values_to_be_unique", {"column": "a", "severity": "fatal"}),
        ("expect_table_row_count_to_be_between", {"min_value": [1]}),
    ],
)
def test_what_the_check_refuses_gx_refuses_too(etype: str, kwargs: dict[str, Any]) -> None:
    assert expectation_problem(etype, kwargs) is not None
    assert not _gx_accepts(etype, kwargs)
