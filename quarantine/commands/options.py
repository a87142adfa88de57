"""What the commands share, parsed without an engine: the options they declare alike and their values
(``--conf``/``--set``, ``--pipeline``, ``--json``; ``--set`` pairs, ``--where``, ``--since``/``--until``)."""

from __future__ import annotations

import argparse
import datetime as dt
import re
from collections.abc import Sequence
from typing import Any

import yaml

from quarantine.errors import ConfigError

__all__ = ["add_config", "add_json", "add_pipeline_guard", "overrides", "parse_time", "predicate"]

_AGE = re.compile(r"^(\d+)([mhd])$")
_UNITS = {"m": "minutes", "h": "hours", "d": "days"}


def add_config(parser: argparse.ArgumentParser, conf: str = "the pipeline config (YAML)", *,
               required: bool = True) -> None:
    """``--conf FILE`` (described as ``conf``) and ``--set KEY=VALUE`` (repeatable)."""
    parser.add_argument("--conf", required=required, help=conf)
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="override a config key, e.g. --set source.path=/data/x (repeatable)")


def add_pipeline_guard(parser: argparse.ArgumentParser) -> None:
    """``--pipeline NAME``: the pipeline the config must be (``args.pipeline_guard``, which
    :func:`quarantine.commands.configured.load` checks); not the filter of the read commands."""
    parser.add_argument("--pipeline", dest="pipeline_guard", default=None,
                        help="the pipeline the config must be (a guard for jobs that take the name as a parameter)")


def add_json(parser: argparse.ArgumentParser) -> None:
    """``--json``: JSON for scripts instead of tables."""
    parser.add_argument("--json", action="store_true", help="print JSON for scripts instead of tables")


def overrides(pairs: Sequence[str]) -> dict[str, Any]:
    """``--set KEY=VALUE`` pairs as config overrides, each value read as YAML (``--set a=1`` is the int 1).

    Raises:
        ConfigError: a pair has no ``=``.
    """
    out: dict[str, Any] = {}
    for p in pairs:
        if "=" not in p:
            raise ConfigError("--set", p, "key=value")
        k, v = p.split("=", 1)
        out[k.strip()] = yaml.safe_load(v)
    return out


def predicate(where: str | None) -> str | None:
    """A ``--where`` as given, or None (every open record) when it is empty: a job parameter left blank."""
    return where if where and where.strip() else None


def parse_time(text: str, option: str, *, now: dt.datetime | None = None) -> dt.datetime:
    """A ``--since``/``--until`` value (``option``) as an aware datetime: every command's one time parser.

    ``2026-11-25``, ``2026-11-25T10:00``, ``2026-11-25 10:00:00`` (UTC unless an offset is
    given), or an age: ``30m``, ``24h``, ``7d`` (that long before ``now``).

    Raises:
        ConfigError: anything else, naming ``option``.
    """
    m = _AGE.match(text.strip())
    if m:
        return (now or dt.datetime.now(dt.UTC)) - dt.timedelta(**{_UNITS[m[2]]: int(m[1])})
    try:
        when = dt.datetime.fromisoformat(text.strip())
    except ValueError:
        raise ConfigError(option, text, "an ISO date/time (2026-11-25, 2026-11-25T10:00) or an age (30m, 24h, 7d)") \
            from None
    return when if when.tzinfo else when.replace(tzinfo=dt.UTC)
