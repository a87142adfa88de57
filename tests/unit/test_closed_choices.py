"""A closed choice reads the same at every key: any case, spaces around ignored, the choices named.

Every key whose value is one of a closed vocabulary (``errors.tolerance``, ``source.format``,
an avro or protobuf stage's ``wire_format``, a json stage's ``strings``, a python stage's
``mode``, a regex rule's ``match``, an expectation stage's ``on_breach``) is checked by one
helper (:func:`quarantine.values.types.choice`; ``on_breach``'s mapping asks it per entry).
"""

from __future__ import annotations

from enum import StrEnum

import pytest
from pydantic_core import PydanticCustomError

from quarantine.config.choices import SourceFormat, Tolerance
from quarantine.stages.checks.rules import RegexMatch
from quarantine.stages.json import Strings
from quarantine.stages.python.arrow_batch import PythonMode
from quarantine.values import options
from quarantine.values.options import ON_BREACH, WIRE_FORMAT, WireFormat
from quarantine.values.types import BreachAction, Check, choice

pytestmark = pytest.mark.unit

#: Each closed choice's check as its key uses it.
CHECKS: dict[str, tuple[Check, type[StrEnum]]] = {
    "errors.tolerance": (choice(Tolerance), Tolerance),
    "source.format": (choice(SourceFormat), SourceFormat),
    "wire_format": (WIRE_FORMAT, WireFormat),
    "strings": (choice(Strings), Strings),
    "mode": (choice(PythonMode), PythonMode),
    "match": (choice(RegexMatch), RegexMatch),
}


@pytest.mark.parametrize("key", CHECKS)
def test_every_choice_takes_any_case_and_spaces_around(key: str) -> None:
    check, vocabulary = CHECKS[key]
    for member in vocabulary:
        assert check.fn(f"  {member.value.upper()} ") is member
        assert check.fn(member) is member


@pytest.mark.parametrize("key", CHECKS)
def test_every_choice_names_the_choices_alike(key: str) -> None:
    check, vocabulary = CHECKS[key]
    with pytest.raises(PydanticCustomError) as info:
        check.fn("no such value")
    assert info.value.message_template == "one of " + " | ".join(m.value for m in vocabulary)


def test_on_breach_asks_the_same_helper_for_each_action() -> None:
    assert ON_BREACH.fn(" FAIL ") == {"default": " FAIL "}
    assert ON_BREACH.fn({"default": "Warn", "expect_x": " QUARANTINE_BATCH"})
    for bad in ("stop", {"expect_x": "stop"}):
        with pytest.raises(PydanticCustomError) as info:
            ON_BREACH.fn(bad)
        assert " | ".join(a.value for a in BreachAction) in info.value.message_template


def test_there_is_one_choice_helper() -> None:
    assert not hasattr(options, "choice_of")


