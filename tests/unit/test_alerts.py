"""Alerts without Spark: the ``alerts:`` and ``fail_on:`` sections, the events found in reports,
the words and shapes each channel is sent, secret references, the rate limit on a fake clock.

Delivery to real servers (HTTP, SMTP) and whole runs are ``tests/integration/test_alerts.py``'s.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Sequence
from typing import Any

import pytest

from quarantine.alerts.events import (
    Alert,
    Counts,
    StuckRecord,
    breaches,
    error_rates,
    run_failed,
    stuck,
    tolerance_breach,
)
from quarantine.alerts.listener import AlertListener
from quarantine.alerts.messages import email_message, slack_body, teams_body, webhook_body
from quarantine.columns import RunKind
from quarantine.config import parse_config
from quarantine.config.alerts import AlertEvent, AlertsConfig, interval_seconds
from quarantine.errorhandling.breach import Breach
from quarantine.errorhandling.fail_on import FailOnConfig, conditions_held, topic_rates
from quarantine.errors import ConditionFailedError, ConfigError, ExpectationBreachError, ToleranceExceededError
from quarantine.listeners.events import BatchReport, RunInfo, RunStatus
from quarantine.metrics.cells import MetricNames, metric_key
from quarantine.secret_refs import MappingScopes, resolve, resolved_secrets
from quarantine.values.types import BreachAction

AT = dt.datetime(2026, 11, 29, 10, 14, 5, tzinfo=dt.UTC)
RUN = RunInfo("orders_demo", "6c1d0e2f", "data/demo/source", {}, dt.datetime(2026, 11, 29, 10, 13, tzinfo=dt.UTC))
CONF = "/work/demo/orders_demo.yml"
HOOK = "https://hooks.slack.com/services/T0001/B0002/tok3n-in-the-path"


def _config(**alerts: Any) -> dict[str, Any]:
    return {
        "pipeline": "orders", "source": {"path": "/data/in"}, "target": {"table": "/data/out"},
        "errors": {"deadletterqueue.table.name": "/data/q"}, "stages": [{"name": "d", "type": "decode_utf8"}],
        "alerts": alerts,
    }


def _report(breaches: tuple[Breach, ...] = (), *, topics: dict[str, tuple[int, int]] | None = None) -> BatchReport:
    topics = topics or {"orders": (10_000, 350)}
    metrics: dict[str, float] = {}
    for topic, (n, bad) in topics.items():
        metrics[metric_key(MetricNames.RECORDS_IN, topic=topic)] = n
        metrics[metric_key(MetricNames.RECORDS_QUARANTINED, stage="parse_order", topic=topic)] = bad
    n_in = sum(n for n, _ in topics.values())
    n_bad = sum(b for _, b in topics.values())
    return BatchReport(
        run=RUN, batch_id=0, records_in=n_in, records_ok=n_in - n_bad, records_quarantined=n_bad,
        quarantined_by_stage={"parse_order": n_bad}, metrics=metrics, breaches=breaches, finished_at=AT,
    )


REGEX = Breach(
    "expect_column_values_to_match_regex:customer_email", BreachAction.WARN,
    "found 23 unexpected of 9691 values (0.24% of the non-null values this batch checked)",
)


# --------------------------------------------------------------------------- the config


def test_a_channel_of_each_type_loads_and_hears_every_event_by_default() -> None:
    config = parse_config(_config(channels=[
        {"name": "hook", "type": "webhook", "webhook": "https://ops.example.com/alerts"},
        {"name": "oncall", "type": "slack", "webhook": HOOK, "events": ["breach", "run_failed"]},
        {"name": "teams", "type": "teams", "webhook": "{{secrets/alerts/teams}}"},
        {"name": "mail", "type": "email", "host": "smtp.example.com", "from": "q@example.com",
         "to": "a@example.com, b@example.com", "user": "q", "password": "pw-in-config"},
    ], rate_limit="15 minutes"))
    hook, oncall, teams, mail = config.alerts.channels
    assert hook.events == tuple(AlertEvent) and oncall.events == (AlertEvent.BREACH, AlertEvent.RUN_FAILED)
    assert teams.webhook == "{{secrets/alerts/teams}}"
    assert mail.to == ("a@example.com", "b@example.com") and mail.smtp_port == 587
    assert config.alerts.rate_limit_s == 900
    # secrets: the URL and the password are redacted wherever the config is shown
    shown = json.dumps(config.redacted())
    assert HOOK not in shown and "pw-in-config" not in shown and "{{secrets/alerts/teams}}" not in shown
    assert HOOK in config.secrets() and "pw-in-config" in config.secrets()
    assert HOOK not in repr(config) and "pw-in-config" not in repr(config)


@pytest.mark.parametrize(
    ("channel", "key", "allowed"),
    [
        ({"type": "slack"}, "alerts.channels[0].webhook", "the URL a slack channel POSTs to"),
        ({"type": "slack", "webhook": "http://hooks.slack.com/services/T/B/tok3n"}, "alerts.channels[0].webhook",
         "http:// only to a loopback host"),
        ({"type": "webhook", "webhook": "ftp://x/y"}, "alerts.channels[0].webhook", "an https:// URL"),
        ({"type": "email", "host": "smtp", "from": "q@x"}, "alerts.channels[0].to", "the recipients"),
        ({"type": "email", "host": "smtp", "to": ["a@x"]}, "alerts.channels[0].from", "the From address"),
        ({"type": "email", "host": "smtp", "from": "q@x", "to": ["a@x"], "user": "q"},
         "alerts.channels[0].password", "both user and password"),
        ({"type": "email", "host": "smtp.example.com", "from": "q@x", "to": ["a@x"], "user": "q", "password": "pw",
          "tls": "none"}, "alerts.channels[0].tls", "a password is never sent in clear"),
        ({"type": "email", "webhook": HOOK, "host": "s", "from": "q@x", "to": ["a@x"]},
         "alerts.channels[0].webhook", "an email channel is sent over SMTP"),
        ({"type": "slack", "webhook": HOOK, "host": "smtp"}, "alerts.channels[0].host", "an email channel's key"),
        ({"type": "slack", "webhook": HOOK, "events": ["breach", "stuk"]}, "alerts.channels[0].events",
         "events from breach | run_failed | stuck | error_rate"),
        ({"type": "pager", "webhook": HOOK}, "alerts.channels[0].type", "one of webhook | slack | teams | email"),
    ],
)
def test_a_channel_that_does_not_fit_its_type_is_a_config_error_naming_the_key(
    channel: dict[str, Any], key: str, allowed: str
) -> None:
    with pytest.raises(ConfigError) as info:
        parse_config(_config(channels=[{"name": "c", **channel}]))
    assert info.value.key == key, str(info.value)
    assert allowed in str(info.value)
    assert "tok3n" not in str(info.value)  # a webhook URL is never shown, even a refused one


def test_channel_names_are_unique_and_the_rate_limit_is_an_interval() -> None:
    hook = {"type": "slack", "webhook": HOOK}
    with pytest.raises(ConfigError, match=r"alerts\.channels\[1\]\.name"):
        parse_config(_config(channels=[{"name": "a", **hook}, {"name": "a", **hook}]))
    with pytest.raises(ConfigError, match=r"alerts\.rate_limit"):
        parse_config(_config(rate_limit="hourly"))
    assert [interval_seconds(v) for v in ("30 seconds", "1 minute", "2 hours", "1 day")] == [30, 60, 7200, 86400]


def test_no_alerts_section_means_no_channels_and_fail_on_nothing() -> None:
    raw = _config()
    del raw["alerts"]
    config = parse_config(raw)
    assert config.alerts == AlertsConfig() and config.alerts.channels == ()
    assert not config.fail_on.any


# --------------------------------------------------------------------------- fail_on


def test_fail_on_holds_over_open_records_and_a_topics_error_rate_each_said_by_key() -> None:
    cfg = FailOnConfig(open_records=100, error_rate_percent=10, error_rate_min_records=50)
    records = {"orders": 1000.0, "refunds": 40.0, "returns": 200.0}
    quarantined = {"orders": 101.0, "refunds": 40.0, "returns": 20.0}
    held = conditions_held(cfg, records, quarantined, open_records=101)
    assert held == [
        "fail_on.open_records: 101 records are open in quarantine, more than 100",
        "fail_on.error_rate_percent: topic orders quarantined 101 of 1,000 records (10.1%), more than 10%",
    ]  # refunds: fewer than 50 records, not judged; returns: exactly 10%, not more
    assert conditions_held(cfg, records, {"orders": 100.0}, open_records=100) == []
    assert conditions_held(FailOnConfig(), records, quarantined, open_records=10**9) == []
    error = ConditionFailedError(held)
    assert "fail_on.open_records" in str(error) and "writes are committed" in str(error)
    assert [r.topic for r in topic_rates(records, quarantined)] == ["refunds", "orders", "returns"]


# --------------------------------------------------------------------------- events


def test_a_batchs_breaches_are_one_alert_with_each_breach_and_the_command_to_run_next() -> None:
    fail = Breach("expect_table_row_count_to_be_between", BreachAction.FAIL, "found 3 rows, expected 5 to 10")
    alert = breaches(_report((REGEX, fail)), CONF)
    assert alert is not None and alert.event is AlertEvent.BREACH
    assert alert.headline == (
        "2 breaches [fail, warn]: expect_column_values_to_match_regex:customer_email, "
        "expect_table_row_count_to_be_between"
    )
    assert alert.details[1] == "[fail] expect_table_row_count_to_be_between: found 3 rows, expected 5 to 10"
    assert alert.counts == Counts(10_000, 9_650, 350)
    assert alert.next == f"quarantine inspect --conf {CONF} --stage parse_order"
    assert breaches(_report(), CONF) is None


def test_the_error_limit_that_ended_a_run_is_a_breach_but_an_expectations_fail_is_its_batchs() -> None:
    limit = ToleranceExceededError("errors.tolerance.limit=10 exceeded: 12 errors", limit="errors.tolerance.limit")
    alert = tolerance_breach(RUN, limit, AT, None)
    assert alert is not None and alert.headline == "breach [fail] errors.tolerance.limit"
    assert alert.next == "quarantine inspect --conf <your config> --since 2026-11-29T10:13"
    assert tolerance_breach(RUN, ExpectationBreachError("x"), AT, None) is None
    assert tolerance_breach(RUN, RuntimeError("x"), AT, None) is None


def test_error_rates_name_the_topics_over_the_threshold_with_enough_records() -> None:
    report = _report(topics={"orders": (10_000, 350), "refunds": (100, 50), "tiny": (5, 5)})
    alert = error_rates(report, percent=3, min_records=100, conf=CONF)
    assert alert is not None and alert.headline == "error rate over 3% on 2 topics: refunds, orders"
    assert alert.details[0] == "topic refunds: 50 of 100 records quarantined (50.0%, alerts.error_rate_percent 3)"
    assert error_rates(report, percent=50, min_records=100, conf=CONF) is None  # 50% is not over 50%


def test_stuck_records_list_the_first_and_count_the_rest_without_any_message() -> None:
    rows = [StuckRecord("orders", 0, 17, "parse_order", "MalformedJson", 4, 52.5)]
    alert = stuck(RUN, rows, 3, hours=24, failures=3, at=AT, conf=CONF)
    assert alert is not None
    assert alert.details == ("orders[0]@17: parse_order MalformedJson, failed 4x, open 52.5 h", "… and 2 more")
    assert alert.next == f"quarantine sql stuck_records --conf {CONF} --param hours=24 --param failures=3"
    assert stuck(RUN, [], 0, hours=24, failures=3, at=AT, conf=CONF) is None


# --------------------------------------------------------------------------- the words and the shapes

#: The Slack message of the demo's breach, exactly (docs/alerting.md shows it).
SLACK_TEXT = """\
*quarantine orders_demo: breach [warn] expect_column_values_to_match_regex:customer_email*
[warn] expect_column_values_to_match_regex:customer_email: found 23 unexpected of 9691 values (0.24% of the \
non-null values this batch checked)
run 6c1d0e2f (batch 0, 2026-11-29 10:14:05 UTC): 10,000 in, 9,650 ok -&gt; target, 350 quarantined
next: `quarantine inspect --conf /work/demo/orders_demo.yml --stage parse_order`"""


def test_the_slack_message_is_the_documented_text() -> None:
    alert = breaches(_report((REGEX,)), CONF)
    assert alert is not None
    assert slack_body(alert) == {"text": SLACK_TEXT}
    from tests.support.readme import manual_text

    assert SLACK_TEXT in manual_text(), "docs/alerting.md shows the Slack message's exact text"


def test_the_webhook_teams_and_email_shapes_carry_the_same_words() -> None:
    alert = breaches(_report((REGEX,)), CONF)
    assert alert is not None
    body = webhook_body(alert)
    assert body["event"] == "breach" and body["pipeline"] == "orders_demo" and body["run_id"] == "6c1d0e2f"
    assert body["counts"] == {"records_in": 10_000, "records_ok": 9_650, "records_quarantined": 350}
    assert body["at"] == "2026-11-29T10:14:05+00:00" and body["batch_id"] == 0
    assert body["text"].splitlines()[0] == "quarantine orders_demo: breach [warn] " + REGEX.name
    assert body["next"] == f"quarantine inspect --conf {CONF} --stage parse_order"
    card = teams_body(alert)["attachments"][0]
    assert card["contentType"] == "application/vnd.microsoft.card.adaptive"
    blocks = [b["text"] for b in card["content"]["body"]]
    assert blocks == body["text"].splitlines()
    mail = email_message(alert, "q@example.com", ["a@example.com"])
    assert mail["Subject"] == blocks[0] and mail["To"] == "a@example.com"
    assert mail.get_content().splitlines() == blocks[1:]


def test_every_shape_redacts_the_secrets_it_is_given_and_cuts_a_huge_line() -> None:
    leaky = Breach("expect_x", BreachAction.WARN, f"could not post to {HOOK}: password=pw-2 " + "x" * 5000)
    alert = run_failed(RUN, f"HandlerError: paging {HOOK} failed", Counts(3, 1, 2), 4, AT, CONF)
    with_breach = breaches(_report((leaky,)), CONF)
    assert with_breach is not None
    for a in (alert, with_breach):
        texts = [json.dumps(webhook_body(a, [HOOK])), json.dumps(slack_body(a, [HOOK])),
                 json.dumps(teams_body(a, [HOOK])), email_message(a, "q@x", ["a@x"], [HOOK]).as_string()]
        for text in texts:
            assert "tok3n" not in text and "pw-2" not in text, text
            assert "[redacted]" in text
    assert max(len(line) for line in webhook_body(with_breach)["details"]) == 1000


# --------------------------------------------------------------------------- secret references


def test_a_secret_reference_is_read_from_its_scope_only_when_there_is_one() -> None:
    scopes = MappingScopes({("alerts", "slack"): HOOK})
    assert resolve("{{secrets/alerts/slack}}", key="alerts.channels[0].webhook", scopes=scopes) == HOOK
    assert HOOK in resolved_secrets()
    assert resolve("https://plain.example.com/x", key="k", scopes=MappingScopes({})) == "https://plain.example.com/x"
    with pytest.raises(ConfigError) as info:
        resolve("{{ secrets/alerts/missing }}", key="alerts.channels[1].password", scopes=scopes)
    message = str(info.value)
    assert "alerts.channels[1].password" in message and "{{secrets/alerts/missing}} could not be read" in message
    assert "KeyError" in message and HOOK not in message


def test_a_secret_reference_without_a_workspace_is_a_config_error_naming_the_key(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    for name in ("DATABRICKS_HOST", "DATABRICKS_TOKEN", "DATABRICKS_CLIENT_ID", "DATABRICKS_CONFIG_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("DATABRICKS_CONFIG_FILE", str(tmp_path / "no-such-databrickscfg"))
    with pytest.raises(ConfigError) as info:
        resolve("{{secrets/alerts/slack}}", key="alerts.channels[0].webhook")
    assert info.value.key == "alerts.channels[0].webhook"
    assert "DATABRICKS_HOST" in str(info.value) and "${env:NAME}" in str(info.value)


# --------------------------------------------------------------------------- the rate limit


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


class Recording:
    """A channel that records what it is sent (delivery itself: the integration tests' servers)."""

    def __init__(self, name: str, events: frozenset[AlertEvent] = frozenset(AlertEvent)) -> None:
        self.name = name
        self.events = events
        self.sent: list[Alert] = []

    def send(self, alert: Alert, timeout_s: float) -> None:
        self.sent.append(alert)

    def describe(self) -> str:
        return f"webhook channel {self.name}"


def _listener(channels: Sequence[Recording], clock: FakeClock, rows: list[Any]) -> AlertListener:
    settings = AlertsConfig(rate_limit="1 hour", error_rate_percent=1, error_rate_min_records=1)
    return AlertListener(settings, channels, conf=CONF, streaming=True, clock=clock,
                         record=lambda run, values: rows.append(list(values)))


def test_a_stream_breaching_every_micro_batch_sends_one_message_per_event_and_window() -> None:
    clock, rows = FakeClock(), []
    a, b = Recording("a"), Recording("b", frozenset({AlertEvent.ERROR_RATE}))
    listener = _listener([a, b], clock, rows)
    listener.on_run_start(RUN)
    for _ in range(10):  # ten micro-batches a minute apart, each breaching and over the error rate
        listener.on_batch(_report((REGEX,)))
        clock.now += 60
    assert [x.event for x in a.sent] == [AlertEvent.BREACH, AlertEvent.ERROR_RATE]
    assert [x.event for x in b.sent] == [AlertEvent.ERROR_RATE]
    clock.now += 3600  # the window is over: the next breach is sent, telling the ones held back
    listener.on_batch(_report((REGEX,)))
    assert [x.held for x in a.sent] == [0, 0, 9, 9] and b.sent[-1].held == 9
    assert rows[0] == [(MetricNames.ALERTS_SENT, 3.0)] and rows[1] == [(MetricNames.ALERTS_HELD, 3.0)]
    listener.on_run_end(RUN, RunStatus.SUCCEEDED, None)
    (line,) = listener.summary_lines()
    assert line == (
        "alerts: 6 sent (a: breach x2, error_rate x2; b: error_rate x2), "
        "27 held back by alerts.rate_limit (1 hour)"
    )


def test_a_failed_run_is_told_once_with_the_commands_reason_and_the_runs_counts() -> None:
    clock, rows = FakeClock(), []
    a = Recording("a")
    listener = _listener([a], clock, rows)
    listener.on_run_start(RUN)
    listener.on_batch(_report(topics={"orders": (10, 0)}))
    error = ToleranceExceededError("errors.tolerance=none: 1 record(s) failed", limit="errors.tolerance")
    listener.on_run_end(RUN, RunStatus.FAILED, error)
    assert [x.event for x in a.sent] == [AlertEvent.BREACH, AlertEvent.RUN_FAILED]
    failed = a.sent[1]
    assert failed.details == ("ToleranceExceededError: errors.tolerance=none: 1 record(s) failed",)
    assert failed.counts == Counts(10, 10, 0) and failed.batch_id == 0 and failed.kind is RunKind.RUN
