"""``quarantine maintain``'s retention rules, without Spark: the config keys and Delta's interval text."""

from __future__ import annotations

import pytest

from quarantine.config import parse_config
from quarantine.errors import ConfigError, QuarantineError
from quarantine.ops.maintain import DELTA_MIN_RETENTION_HOURS, retention_hours


def _errors(**keys: object) -> dict[str, object]:
    return {
        "pipeline": "p", "source": {"format": "delta", "path": "/s"}, "target": {"table": "/t"},
        "errors": {"deadletterqueue.table.name": "/q", **keys}, "stages": [{"name": "d", "type": "decode_utf8"}],
    }


def test_retention_keys_default_to_30_days_and_delta_s_168_hours() -> None:
    cfg = parse_config(_errors())
    assert (cfg.errors.dlq_retention_days, cfg.errors.dlq_vacuum_retention_hours) == (30, 168)
    cfg = parse_config(
        _errors(**{"deadletterqueue.retention.days": "-1", "deadletterqueue.vacuum.retention.hours": 720})
    )
    assert (cfg.errors.dlq_retention_days, cfg.errors.dlq_vacuum_retention_hours) == (-1, 720)


def test_a_vacuum_retention_below_delta_s_safety_check_fails_at_load_naming_the_key() -> None:
    with pytest.raises(ConfigError, match=r"errors\.deadletterqueue\.vacuum\.retention\.hours.*168"):
        parse_config(_errors(**{"deadletterqueue.vacuum.retention.hours": 24}))
    with pytest.raises(ConfigError, match=r"errors\.deadletterqueue\.retention\.days"):
        parse_config(_errors(**{"deadletterqueue.retention.days": -2}))


@pytest.mark.parametrize(
    ("text", "hours"),
    [(None, DELTA_MIN_RETENTION_HOURS), ("interval 7 days", 168.0), ("interval 1 weeks", 168.0),
     ("interval 240 hours", 240.0), ("10 days 12 hours", 252.0), ("interval 90 minutes", 1.5)],
)
def test_delta_s_retention_interval_is_read_in_hours(text: str | None, hours: float) -> None:
    assert retention_hours(text) == hours


def test_an_interval_delta_would_not_write_is_an_error_naming_it() -> None:
    with pytest.raises(QuarantineError, match="'forever'"):
        retention_hours("forever")
