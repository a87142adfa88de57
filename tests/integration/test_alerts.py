"""Alerts reach their channels: real runs (local Spark, Delta, GX) send to servers the tests start on 127.0.0.1.

A recording HTTP server stands for a generic webhook, Slack's incoming webhook and a Teams
workflow; aiosmtpd is the SMTP server; the Databricks SDK reads ``{{secrets/…}}`` from a
local server speaking the workspace's secrets API. The tests assert what the servers
received, the retries on a 500 and on a refused connection, the budget, the rate limit of a
stream breaching every micro-batch, ``fail_on``'s exit code, and that no webhook URL or SMTP
password is anywhere a person or another alert can read.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from quarantine.alerts.channels import HttpChannel
from quarantine.alerts.listener import AlertListener
from quarantine.cli import main
from quarantine.config import BreachAction, load_config, parse_config
from quarantine.config.alerts import AlertsConfig, ChannelKind
from quarantine.errors import ToleranceExceededError
from quarantine.listeners.events import RunInfo, RunStatus
from quarantine.pipeline import Pipeline
from quarantine.schema import KAFKA_SOURCE_SCHEMA
from quarantine.stages import build_stages
from tests.canary import all_logs, log_texts, mlflow_texts
from tests.helpers import kafka_df, kafka_rows, orders_config
from tests.integration.test_batch_verdicts import AtLeastRows
from tests.support.alert_servers import RecordingHttp, RecordingSmtp, SecretsApi, closed_port

pytestmark = pytest.mark.filterwarnings("ignore:Requiring AUTH while not requiring TLS:UserWarning")


# the secrets: each a canary that must never be read anywhere but by its server
C_HOOK = "cnry-hook-tok-71c4"  # in the generic webhook's URL (from the environment)
C_SLACK = "cnry-slack-tok-2b9e"  # in the Slack webhook's URL (from the environment)
C_TEAMS = "cnry-teams-sig-5f03"  # in the Teams workflow's URL (from a secret scope)
C_SMTP = "cnry-smtp-pw-8d61"  # the SMTP password (from a secret scope)
CANARIES = (C_HOOK, C_SLACK, C_TEAMS, C_SMTP)

#: 6 orders: 3 poison (invalid UTF-8, malformed JSON, no order_id)
VALUES = [b'{"order_id":"a","amount":1}', b"\xff\xfe", b"{", b'{"order_id":"d","amount":4}', b'{"amount":5}',
          b'{"order_id":"f","amount":6}']


class LeakyHandler:
    """An error handler whose failure echoes every alert secret it can find (as drivers' errors do)."""

    def handle(self, context: Any) -> Any:
        raise RuntimeError(
            f"could not page on-call via {os.environ['QT_ALERT_HOOK']} or {os.environ['QT_SLACK_HOOK']}; "
            f"teams {os.environ.get('QT_TEAMS_URL')}; smtp password={C_SMTP}"
        )


def _hits(text: str | bytes) -> list[str]:
    data = text if isinstance(text, bytes) else text.encode()
    return [c for c in CANARIES if c.encode() in data]


def _failure_line(err: str) -> str:
    """What the command printed after ``quarantine: run failed:`` (stderr holds log lines too)."""
    (line,) = [x for x in err.splitlines() if x.startswith("quarantine: run failed: ")]
    return line.split("run failed: ", 1)[1]


def _metrics(spark: Any, d: Path) -> list[Any]:
    return spark.read.format("delta").load(str(d / "metrics")).where("metric LIKE 'alerts-%'").collect()


def test_every_event_reaches_a_webhook_slack_teams_and_email_and_no_secret_is_anywhere_else(
    spark: Any, table_dir: Path, mlflow_store: str, caplog: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
) -> None:
    kafka_df(spark, VALUES).write.format("delta").save(str(table_dir / "source"))
    kafka_df(spark, VALUES, start_offset=100).write.format("delta").save(str(table_dir / "source2"))
    with (
        RecordingHttp() as http,
        RecordingSmtp(("alerts", C_SMTP)) as smtp,
        SecretsApi({("alerts", "teams"): http.url(f"/teams/{C_TEAMS}"), ("alerts", "smtp"): C_SMTP}) as scope,
    ):
        environment = {**scope.environment(), "QT_ALERT_HOOK": http.url(f"/hook/T0/{C_HOOK}"),
                       "QT_SLACK_HOOK": http.url(f"/slack/{C_SLACK}"), "QT_TEAMS_URL": http.url(f"/teams/{C_TEAMS}")}
        for k, v in environment.items():
            monkeypatch.setenv(k, v)
        raw = orders_config(table_dir, "orders_alerts")
        raw.update({  # paths relative to the config's folder (a name without a / is a catalog table's)
            "source": {"format": "delta", "path": "./source"}, "target": {"table": "./target"},
            "metrics": {"table": "./metrics"},
            "mlflow": {"enabled": True, "tracking_uri": mlflow_store, "experiment": "canary"},
            "alerts": {
                "channels": [
                    {"name": "hook", "type": "webhook", "webhook": "${env:QT_ALERT_HOOK}"},
                    {"name": "oncall", "type": "slack", "webhook": "${env:QT_SLACK_HOOK}"},
                    {"name": "teams", "type": "teams", "webhook": "{{secrets/alerts/teams}}"},
                    {"name": "mail", "type": "email", "host": "127.0.0.1", "port": smtp.port, "tls": "none",
                     "user": "alerts", "password": "{{secrets/alerts/smtp}}", "from": "quarantine@example.com",
                     "to": ["oncall@example.com"]},
                ],
                "error_rate_percent": 10, "error_rate_min_records": 1,
            },
        })
        raw["errors"]["deadletterqueue.table.name"] = "./quarantine"
        conf = table_dir / "orders.yml"
        conf.write_text(yaml.safe_dump(raw), encoding="utf-8")

        with all_logs(caplog):
            # run 1, two days ago (the run's clock): an error limit breached (after its batch's error rate)
            pipe = Pipeline.from_config(load_config(conf, {"errors.tolerance.limit": 1}), spark)
            pipe.clock = lambda: dt.datetime.now(dt.UTC) - dt.timedelta(days=2)
            with pytest.raises(ToleranceExceededError) as breached:
                pipe.run()
            # run 2, now: the good records are written, the three open ones fail again and are stuck
            assert main(["run", "--conf", str(conf)]) == 0
            second = capsys.readouterr()
            # run 3, over new records: a handler fails the run with a message echoing every secret it finds
            leaky = f"errors.handler.deserialize={__name__}.LeakyHandler"
            source2 = str(table_dir / "source2")
            assert main(["run", "--conf", str(conf), "--set", leaky, "--set", f"source.path={source2}"]) == 1
            third = capsys.readouterr()

        # ---- what each channel received: every event, in each shape
        hooks = http.bodies(f"/hook/T0/{C_HOOK}")
        said = json.dumps(hooks, indent=1)
        assert [b["event"] for b in hooks] == [
            "error_rate", "breach", "run_failed", "stuck",  # run 1: after its batch, then at its end
            "error_rate", "stuck",  # run 2
            "error_rate", "run_failed", "stuck",  # run 3
        ], said
        rate, breach, limit_failed, stuck, _, _, _, failed, _ = hooks
        assert rate["pipeline"] == "orders_alerts" and rate["run_kind"] == "run" and rate["batch_id"] == 0
        assert rate["counts"]["records_in"] == 6 and rate["counts"]["records_quarantined"] == 3, said
        assert rate["details"] == ["topic orders: 3 of 6 records quarantined (50.0%, alerts.error_rate_percent 10)"]
        assert rate["next"].startswith(f"quarantine inspect --conf {conf} --since ")
        assert breach["title"] == "quarantine orders_alerts: breach [fail] errors.tolerance.limit"
        assert breach["details"] == [f"[fail] errors.tolerance.limit: {breached.value}"]
        assert limit_failed["details"] == [f"ToleranceExceededError: {breached.value}"]
        assert stuck["title"] == (
            "quarantine orders_alerts: 3 stuck record(s): open 24 h or more, or failed more than 3 times"
        )
        assert len(stuck["details"]) == 3 and all(", failed 1x, open 48" in d for d in stuck["details"]), said
        assert stuck["next"] == f"quarantine sql stuck_records --conf {conf} --param hours=24 --param failures=3"
        assert failed["title"] == "quarantine orders_alerts: run failed" and failed["batch_id"] == 0
        (reason,) = failed["details"]
        assert reason.startswith("HandlerError: ") and "[redacted]" in reason, reason
        assert _failure_line(third.err) == reason  # the line the command printed, word for word
        slack = http.bodies(f"/slack/{C_SLACK}")
        assert [b["text"].splitlines()[0] for b in slack] == [f"*{b['title']}*" for b in hooks]
        assert slack[0]["text"].splitlines()[-1].startswith("next: `quarantine inspect --conf ")
        teams = http.bodies(f"/teams/{C_TEAMS}")
        cards = [t["attachments"][0]["content"] for t in teams]
        assert [c["body"][0]["text"] for c in cards] == [b["title"] for b in hooks]
        assert all(c["type"] == "AdaptiveCard" for c in cards)
        assert [m["Subject"] for m in smtp.messages] == [b["title"] for b in hooks]
        assert smtp.messages[0]["To"] == "oncall@example.com"
        assert smtp.messages[7].get_content().startswith(reason)
        assert smtp.logins and all(ok for _, ok in smtp.logins)
        assert sorted(set(scope.asked)) == [("alerts", "smtp"), ("alerts", "teams")]

        # ---- the run's summary says it in one line; the metrics table has the run's rows
        assert "  alerts: 8 sent (hook: error_rate, stuck; oncall: error_rate, stuck; teams: error_rate, stuck; " \
               "mail: error_rate, stuck)" in second.out, second.out
        rows = _metrics(spark, table_dir)
        assert {(r["metric"], r["batch_id"], r["stage"], r["topic"]) for r in rows} == {
            ("alerts-sent", None, None, None)}
        assert sum(r["value"] for r in rows) == 4 * len(hooks)

        # ---- no secret anywhere a person, MLflow, a table or another alert can read
        bodies = {f"{r.path.split('/')[1]} {i}": r.body for i, r in enumerate(http.received)}
        bodies.update({f"mail {i}": m.as_bytes() for i, m in enumerate(smtp.messages)})
        files = {str(p): p.read_bytes() for p in table_dir.parent.rglob("*") if p.is_file()}
        texts: dict[str, str | bytes] = {
            "the error": str(breached.value), "stdout": second.out + third.out, "stderr": second.err + third.err,
            **log_texts(caplog), **mlflow_texts(mlflow_store), **bodies, **files,
        }
        leaks = {where: _hits(text) for where, text in texts.items() if _hits(text)}
        assert not leaks, f"secrets leaked: {leaks}"
        assert any(b"[redacted]" in body for body in bodies.values())


def test_a_channel_down_or_slow_never_fails_the_run_and_costs_at_most_its_budget(
    spark: Any, table_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    kafka_df(spark, [b'{"order_id":"a","amount":1}', b"{", b'{"order_id":"c","amount":3}']).write.format(
        "delta").save(str(table_dir / "source"))
    with RecordingHttp([500, 503, 200]) as flaky, RecordingHttp([200], delay_s=20) as slow:
        raw = orders_config(table_dir, "orders_down")
        raw["metrics"] = {"table": str(table_dir / "metrics")}
        raw["errors"].update({"retry.initial.backoff.ms": 100, "retry.delay.max.ms": 400})
        raw["alerts"] = {
            "timeout_s": 2, "error_rate_percent": 10, "error_rate_min_records": 1,
            "channels": [
                {"name": "flaky", "type": "webhook", "webhook": flaky.url(), "events": ["error_rate"]},
                {"name": "refused", "type": "slack", "webhook": f"http://127.0.0.1:{closed_port()}/x",
                 "events": ["error_rate"]},
                {"name": "slow", "type": "teams", "webhook": slow.url(), "events": ["error_rate"]},
            ],
        }
        conf = table_dir / "down.yml"
        conf.write_text(yaml.safe_dump(raw), encoding="utf-8")
        assert main(["run", "--conf", str(conf)]) == 0
        out = capsys.readouterr().out

        # the 500 and the 503 were retried with the backoff; the third attempt was delivered
        assert len(flaky.received) == 3 and flaky.bodies()[-1]["event"] == "error_rate"
        gaps = [b.at - a.at for a, b in zip(flaky.received, flaky.received[1:], strict=False)]
        assert all(0.05 <= g <= 1.0 for g in gaps), gaps
        (line,) = [x.strip() for x in out.splitlines() if x.strip().startswith("alerts: ")]
        assert line.startswith("alerts: 1 sent (flaky: error_rate), 2 not delivered (refused error_rate: "
                               "ConnectionRefusedError after ")
        assert "slow error_rate: timed out (TimeoutError) after 1 attempt(s) in " in line
        for spent in [float(x.split(" s")[0]) for x in line.split(" in ")[1:]]:
            assert spent <= 2.5, line  # each channel's round within alerts.timeout_s (2 s)
        assert "the run went on" in line
        assert spark.read.format("delta").load(str(table_dir / "target")).count() == 2  # the data path untouched
        rows = {r["metric"]: r["value"] for r in _metrics(spark, table_dir)}
        assert rows == {"alerts-sent": 1.0, "alerts-undelivered": 2.0}

        # the listener alone, on the slow server: the round's wall time is the budget, not the server's 20 s
        run = RunInfo("p", "r", "s", {}, dt.datetime.now(dt.UTC))
        listener = AlertListener(AlertsConfig(timeout_s=1), [HttpChannel("slow", ChannelKind.SLACK, slow.url())])
        listener.on_run_start(run)
        start = time.monotonic()
        listener.on_run_end(run, RunStatus.FAILED, RuntimeError("boom"))
        assert time.monotonic() - start < 1.5
        assert "1 not delivered" in listener.summary_lines()[0]


def test_a_stream_breaching_every_micro_batch_sends_one_message_per_event_and_window(
    spark: Any, table_dir: Path
) -> None:
    source = str(table_dir / "source")
    for i in range(4):  # four files, each one micro-batch (maxFilesPerTrigger 1), half of each poison
        values = [b'{"order_id":"ok","amount":1}', b"{"] * 3
        rows = kafka_rows(values, start_offset=10 * i)
        spark.createDataFrame(rows, KAFKA_SOURCE_SCHEMA).coalesce(1).write.format("delta").mode("append").save(source)
    with RecordingHttp() as http:
        raw = orders_config(table_dir, "orders_stream")
        raw["source"].update({"streaming": True, "options": {"maxFilesPerTrigger": "1"}})
        raw["target"]["checkpoint"] = str(table_dir / "checkpoint")
        raw["metrics"] = {"table": str(table_dir / "metrics")}
        raw["alerts"] = {"rate_limit": "1 hour", "error_rate_percent": 10, "error_rate_min_records": 1,
                         "channels": [{"name": "hook", "type": "webhook", "webhook": http.url()}]}
        config = parse_config(raw)
        # a stage that judges every micro-batch too small (warn): a breach in each of the four
        size = AtLeastRows(rows=10, action=BreachAction.WARN)
        summary = Pipeline.from_config(config, spark, stages=[*build_stages(config.stages), size]).run()
        assert len(summary.batches) == 4 and all(b.records_quarantined == 3 for b in summary.batches)
        assert all(len(b.breaches) == 1 for b in summary.batches)
        bodies = http.bodies()
        assert [b["event"] for b in bodies] == ["breach", "error_rate"], bodies  # one of each, not four
        assert {b["batch_id"] for b in bodies} == {0} and {b["held"] for b in bodies} == {0}
        assert summary.notes == (
            "alerts: 2 sent (hook: breach, error_rate), 6 held back by alerts.rate_limit (1 hour)",)
        rows = _metrics(spark, table_dir)
        assert sum(r["value"] for r in rows if r["metric"] == "alerts-sent") == 2
        assert sum(r["value"] for r in rows if r["metric"] == "alerts-held") == 6


def test_fail_on_ends_a_run_with_exit_code_4_after_its_writes_and_tells_the_channel(
    spark: Any, table_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    values = [b'{"order_id":"a","amount":1}', b"{", b"\xff", b'{"order_id":"d","amount":4}']
    kafka_df(spark, values).write.format("delta").save(str(table_dir / "source"))
    with RecordingHttp() as http:
        raw = orders_config(table_dir, "orders_fail_on")
        raw["alerts"] = {"channels": [{"name": "hook", "type": "webhook", "webhook": http.url(),
                                       "events": ["run_failed"]}]}
        raw["fail_on"] = {"open_records": 1}
        conf = table_dir / "fail_on.yml"
        conf.write_text(yaml.safe_dump(raw), encoding="utf-8")

        assert main(["run", "--conf", str(conf)]) == 4
        reason = _failure_line(capsys.readouterr().err)
        assert reason == (
            "ConditionFailedError: fail_on.open_records: 2 records are open in "
            "quarantine, more than 1 (the run's writes are committed)"
        )
        # the writes were committed: the good rows in the target, the failures in quarantine
        assert spark.read.format("delta").load(str(table_dir / "target")).count() == 2
        assert spark.read.format("delta").load(str(table_dir / "quarantine")).count() == 2
        (failed,) = http.bodies()
        assert failed["event"] == "run_failed" and failed["details"] == [reason]

        # a topic's error rate, over the run: 2 of 4 records is 50 %
        rate = ["--set", "fail_on.open_records=null", "--set", "fail_on.error_rate_percent=40",
                "--set", "fail_on.error_rate_min_records=1"]
        assert main(["run", "--conf", str(conf), *rate]) == 4  # a re-run: the two open records fail again
        assert "fail_on.error_rate_percent: topic orders quarantined 2 of 2 records (100.0%), more than 40%" in (
            _failure_line(capsys.readouterr().err))
        # without a condition that holds, the same data is a success
        assert main(["run", "--conf", str(conf), "--set", "fail_on.open_records=5"]) == 0
