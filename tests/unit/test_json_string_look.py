"""The json stage's strict-strings look: its first-character gate never hides a match of the regex.

A STRING field's text is looked at (``_NOT_STRING_LOOK``) only when its first character is one of
``NOT_STRING_FIRST``; the gate is only sound if every text the regex matches starts with one of
them. Java's and Python's regex engines agree on this pattern (anchors, classes, alternation).
"""

from __future__ import annotations

import re

from hypothesis import given
from hypothesis import strategies as st

from quarantine.stages.json import _NOT_STRING_LOOK, NOT_STRING_FIRST

LOOK = re.compile(_NOT_STRING_LOOK)


@given(st.from_regex(LOOK))
def test_every_text_the_look_matches_starts_with_a_gated_character(text: str) -> None:
    assert text[:1] in NOT_STRING_FIRST, text


@given(st.text(max_size=40))
def test_a_text_outside_the_gate_never_matches_the_look(text: str) -> None:
    if text[:1] not in NOT_STRING_FIRST:
        assert LOOK.match(text) is None, text


def test_the_gate_holds_each_token_kinds_first_character() -> None:
    # an object, an array, a quoted NaN, a signed or bare non-numeric number, a number, true, false
    for token in ('{"a":1}', "[1]", '"NaN"', "+Infinity", "-INF", "NaN", "Infinity", "12", "-3.5e2", "true", "false"):
        assert LOOK.match(token), token
        assert token[0] in NOT_STRING_FIRST, token
    for string in ("o-17", "tomato", "2026-11-27", "", " 12"):
        assert string[:1] not in NOT_STRING_FIRST or not LOOK.match(string), string
