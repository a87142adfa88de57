"""Length bounds are read as GX 1.x reads them (its own model is the oracle, no Spark)."""

from __future__ import annotations

from typing import Any

import pytest

from quarantine.expectations import parse_suite, untranslated_reason
from quarantine.expectations.translate import gx_length_bound

_LENGTHS = "expect_column_value_lengths_to_be_between"


def _gx_model(**kw: Any) -> Any:
    from great_expectations.expectations.expectation_configuration import ExpectationConfiguration

    return ExpectationConfiguration(type=_LENGTHS, kwargs={"column": "s", **kw}).to_domain_obj()


@pytest.mark.parametrize("bound", [3, 0, -2, 1.9, 2.0, -1.5, 3.0000001, "3", " 7 ", 1e30, True])
def test_a_length_bound_is_the_integer_gx_holds(bound: Any) -> None:
    assert gx_length_bound(bound) == _gx_model(min_value=bound).min_value
    assert type(gx_length_bound(bound)) is type(_gx_model(min_value=bound).min_value)


@pytest.mark.parametrize("bound", ["2.5", "quack", float("nan"), float("inf"), [1]])
def test_a_length_bound_gx_rejects_is_rejected(bound: Any) -> None:
    with pytest.raises(ValueError, match="not an integer"):
        gx_length_bound(bound)
    with pytest.raises(Exception, match="not a valid integer"):
        _gx_model(min_value=bound)


@pytest.mark.parametrize(
    ("kwargs", "reason"),
    [
        ({"min_value": 5, "max_value": 1}, None),  # GX: every value fails (negative_test_with_max_lt_min)
        ({"min_value": 1.9, "max_value": 3.5}, None),
        ({"min_value": "2"}, None),
        ({"min_value": "quack", "max_value": 0}, "not an integer"),
    ],
)
def test_length_bounds_gx_accepts_are_translated(kwargs: dict[str, Any], reason: str | None) -> None:
    spec = parse_suite({"name": "s", "expectations": [{"type": _LENGTHS, "kwargs": {"column": "s", **kwargs}}]})
    got = untranslated_reason(spec.expectations[0])
    assert (got is None) if reason is None else (got is not None and reason in got)
