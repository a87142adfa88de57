"""``replay --dry-run``'s lines (:meth:`quarantine.runners.replay.Preview.render`), no JVM."""

from __future__ import annotations

from quarantine.dry_run import ErrorGroup
from quarantine.runners.replay import Preview


def test_a_dry_runs_example_message_keeps_the_value_found_and_whole_words() -> None:
    message = ("field 'amount': expected between 0 and 100 (the range the pipeline's check_order stage "
               "was configured with when this record was last run), found 250.0")
    preview = Preview(3, 1, (ErrorGroup("check_order", "range", 2, message),))
    line = preview.render().splitlines()[1]
    assert line.startswith("           2  check_order / range: field 'amount': expected between")
    assert line.endswith("… found 250.0")
    shown = line.split(": ", 1)[1]
    assert all(word in message.split() for word in shown.replace("…", " ").split()), shown
