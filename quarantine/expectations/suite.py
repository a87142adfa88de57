"""Great Expectations 1.x suites: JSON in, a frozen :class:`Suite` out.

A suite file is an ``ExpectationSuite`` saved as JSON by GX 1.x::

    {"name": "orders",
     "expectations": [
        {"type": "expect_column_values_to_not_be_null", "kwargs": {"column": "order_id"}},
        {"type": "expect_column_values_to_be_between",
         "kwargs": {"column": "amount", "min_value": 0, "max_value": 10000, "mostly": 0.99}}
     ],
     "meta": {}}

The legacy 0.x key ``expectation_type`` is accepted as a synonym of ``type``.
Loading is pure (no GX import); :meth:`Suite.to_gx` builds GX's own object,
which is also how unknown expectation types and bad arguments are found: the
expectation stage calls it when it is built, so a bad suite fails at config
time, before any data is read.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from quarantine.errors import ConfigError

__all__ = ["ExpectationSpec", "Suite", "load_suite", "parse_suite"]

#: kwargs that shape GX's output, not what the expectation checks.
_NON_ARGUMENT_KWARGS = frozenset(
    {"column", "mostly", "result_format", "catch_exceptions", "include_config", "meta"}
)


@dataclass(frozen=True)
class ExpectationSpec:
    """One expectation of a suite, as configured.

    Attributes:
        type: the GX expectation type (``expect_column_values_to_be_between``).
        kwargs: its arguments as in the JSON (``column``, ``min_value``, ``mostly``…).
        name: unique within the suite: ``type:column`` (``type`` for table-level
            expectations), with ``#2``, ``#3``… appended to repeats. Metric and
            breach names use it.
        id: GX's expectation id, when the JSON has one.
    """

    type: str
    kwargs: Mapping[str, Any]
    name: str
    id: str | None = None

    @property
    def column(self) -> str | None:
        """The column the expectation is about, or None for table-level ones."""
        col = self.kwargs.get("column")
        return col if isinstance(col, str) else None

    @property
    def mostly(self) -> float | None:
        """GX's tolerance: the fraction of non-null rows that must pass (None = all)."""
        m = self.kwargs.get("mostly")
        return float(m) if isinstance(m, int | float) and not isinstance(m, bool) else None

    @property
    def arguments(self) -> dict[str, Any]:
        """The kwargs that say what is checked (without column and output options)."""
        return {k: v for k, v in self.kwargs.items() if k not in _NON_ARGUMENT_KWARGS}

    def describe(self) -> str:
        """``type(column=c, arg=v, …)``: the label used in row messages and logs."""
        parts = [f"column={self.column}"] if self.column is not None else []
        parts += [f"{k}={_short(v)}" for k, v in self.arguments.items()]
        if self.mostly is not None:
            parts.append(f"mostly={self.mostly:g}")
        return f"{self.type}({', '.join(parts)})"


def _short(v: Any, limit: int = 80) -> str:
    text = json.dumps(v, ensure_ascii=False, default=str) if not isinstance(v, str) else v
    return text if len(text) <= limit else text[: limit - 1] + "…"


@dataclass(frozen=True)
class Suite:
    """A loaded expectation suite.

    Attributes:
        name: the suite's name.
        expectations: its expectations, in file order.
        source: where it was loaded from (for messages).
        raw: the JSON as loaded (what :meth:`to_gx` hands to GX).
    """

    name: str
    expectations: tuple[ExpectationSpec, ...]
    source: str = "<inline>"
    raw: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)

    def by_name(self, name: str) -> ExpectationSpec:
        """The expectation called ``name`` (see :attr:`ExpectationSpec.name`)."""
        for e in self.expectations:
            if e.name == name:
                return e
        raise KeyError(name)

    def to_gx(self) -> Any:
        """GX's ``ExpectationSuite`` for this suite (imports great_expectations).

        Raises:
            ConfigError: GX does not know an expectation type or rejects its arguments.
        """
        import great_expectations as gx
        from great_expectations.expectations.expectation_configuration import (
            ExpectationConfiguration,
        )

        expectations = []
        for i, e in enumerate(self.expectations):
            try:
                cfg = ExpectationConfiguration(type=e.type, kwargs=dict(e.kwargs))
                expectations.append(cfg.to_domain_obj())
            except Exception as exc:  # GX raises many types (pydantic, InvalidExpectation…)
                raise ConfigError(
                    f"{self.source}: expectations[{i}]", {"type": e.type, "kwargs": dict(e.kwargs)},
                    f"an expectation GX {gx.__version__} accepts ({type(exc).__name__}: "
                    f"{' '.join(str(exc).split())[:300]})",
                ) from None
        return gx.ExpectationSuite(name=self.name, expectations=expectations)


def parse_suite(raw: Mapping[str, Any], *, source: str = "<inline>") -> Suite:
    """Validate a suite mapping (GX 1.x JSON) into a :class:`Suite`.

    Raises:
        ConfigError: naming the bad key (``<source>: expectations[2].type``).
    """
    if not isinstance(raw, Mapping):
        raise ConfigError(source, raw, "a JSON object (a GX ExpectationSuite)")
    name = raw.get("name", raw.get("expectation_suite_name"))
    if not isinstance(name, str) or not name.strip():
        raise ConfigError(f"{source}: name", name, "the suite's name (a non-empty string)")
    items = raw.get("expectations")
    if not isinstance(items, list):
        raise ConfigError(f"{source}: expectations", items, "a list of expectations")
    specs: list[ExpectationSpec] = []
    seen: dict[str, int] = {}
    for i, item in enumerate(items):
        where = f"{source}: expectations[{i}]"
        if not isinstance(item, Mapping):
            raise ConfigError(where, item, "an object with 'type' and 'kwargs'")
        etype = item.get("type", item.get("expectation_type"))
        if not isinstance(etype, str) or not etype.startswith("expect_"):
            raise ConfigError(
                f"{where}.type", etype,
                "a GX expectation type such as expect_column_values_to_not_be_null",
            )
        kwargs = item.get("kwargs", {})
        if not isinstance(kwargs, Mapping):
            raise ConfigError(f"{where}.kwargs", kwargs, "an object of arguments")
        col = kwargs.get("column")
        base = f"{etype}:{col}" if isinstance(col, str) else etype
        seen[base] = seen.get(base, 0) + 1
        name_i = base if seen[base] == 1 else f"{base}#{seen[base]}"
        eid = item.get("id")
        specs.append(
            ExpectationSpec(
                type=etype, kwargs=MappingProxyType(dict(kwargs)), name=name_i,
                id=eid if isinstance(eid, str) else None,
            )
        )
    return Suite(name=name.strip(), expectations=tuple(specs), source=source, raw=dict(raw))


def load_suite(path: str | Path, *, base_dir: str | Path | None = None) -> Suite:
    """Load a GX 1.x suite JSON file.

    Args:
        path: the file; relative paths are tried against ``base_dir`` first, then
            the working directory.
        base_dir: the directory of the pipeline config (``PipelineConfig.base_dir``).

    Raises:
        ConfigError: the file is missing, not JSON, or not a suite.
    """
    p = Path(path)
    candidates = [p] if p.is_absolute() else [
        *([Path(base_dir) / p] if base_dir is not None else []), p
    ]
    found = next((c for c in candidates if c.is_file()), None)
    if found is None:
        looked = ", ".join(map(str, candidates))
        raise ConfigError("suite", str(path), f"an existing GX suite JSON (looked in {looked})")
    try:
        raw = json.loads(found.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError("suite", str(found), f"valid JSON ({exc})") from None
    return parse_suite(raw, source=str(path))
