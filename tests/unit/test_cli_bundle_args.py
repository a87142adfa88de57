"""The ``quarantine`` arguments the bundle's jobs pass (issue 12), checked without Spark.

* ``replay --pipeline NAME`` (the replay job's ``pipeline`` parameter) refuses a config
  of another pipeline before anything is read, and an empty ``--where`` (the
  ``predicate`` parameter left empty) means every open record;
* ``init-demo --table NAME`` (the setup task) writes the sample source as a catalog
  table, and ``--if-missing`` leaves an existing one alone.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from quarantine.cli import _parser, main

REPO = Path(__file__).resolve().parents[2]


def test_replay_refuses_a_config_of_another_pipeline_before_any_work(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["replay", "--conf", str(REPO / "conf" / "orders_demo.yml"), "--pipeline", "orders_kafka"])
    assert code == 2
    err = capsys.readouterr().err
    assert "--pipeline" in err and "orders_demo" in err and "orders_kafka" in err


def test_an_empty_where_selects_every_open_record() -> None:
    from quarantine.commands.options import predicate

    assert predicate("") is None
    assert predicate("   ") is None
    assert predicate("stage = 'parse_order'") == "stage = 'parse_order'"


def test_init_demo_takes_a_catalog_table_and_if_missing() -> None:
    args = _parser().parse_args(["init-demo", "--table", "dev.quarantine_dev.orders_raw", "--if-missing"])
    assert args.table == "dev.quarantine_dev.orders_raw"
    assert args.if_missing is True
    args = _parser().parse_args(["init-demo"])
    assert args.table is None and args.if_missing is False


def test_init_demo_rejects_a_table_that_is_not_a_catalog_name(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["init-demo", "--table", "data/orders_raw"]) == 2
    assert "--table" in capsys.readouterr().err


def test_the_pipeline_guard_is_replays_and_maintains_not_the_filter_of_inspect_and_stats() -> None:
    """``replay``/``maintain --pipeline`` must name the config's pipeline; ``inspect``/``stats --pipeline``
    choose whose rows to show, any pipeline's."""
    from quarantine.commands.configured import load
    from quarantine.commands.invocation import Invocation
    from quarantine.errors import ConfigError

    conf = str(REPO / "conf" / "orders_demo.yml")
    for command in ("inspect", "stats"):
        assert load(Invocation(_parser().parse_args([command, "--conf", conf, "--pipeline", "another"]))).pipeline
    for command in ("replay", "maintain"):
        with pytest.raises(ConfigError, match="--pipeline"):
            load(Invocation(_parser().parse_args([command, "--conf", conf, "--pipeline", "another"])))
