"""GX's own validation of a suite on a batch: the aggregate result and its breaches.

GX is the source of truth for the aggregate: counts, observed values, success,
``mostly``. :func:`validate_batch` runs GX 1.x on a Spark DataFrame (an
ephemeral context, a Spark datasource that does not persist, a dataframe asset,
a whole-dataframe batch definition) and turns every failed expectation into a
:class:`~quarantine.listeners.events.Breach` whose action comes from the
:class:`BreachPolicy`:

* ``warn`` — log it and go on;
* ``fail`` — fail the run after the batch's quarantine write;
* ``quarantine_batch`` — send the whole batch to quarantine.

(The runner applies the actions; this module only decides them.)

GX is asked for ``BASIC`` results with ``partial_unexpected_count: 0`` and no
unexpected rows or index queries: counts come back, unexpected values and
index lists are never collected to the driver.

Checked with great-expectations 1.24.1 on pyspark 4.1.1 (Spark Connect not
used): the Spark datasource, dataframe assets and every expectation in the
demo suite work unchanged.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from quarantine.errorhandling.breach import Breach
from quarantine.expectations.suite import ExpectationSpec, Suite
from quarantine.log_lines import BREACH_ATTR
from quarantine.redaction import redact_text
from quarantine.values.types import BreachAction

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

__all__ = [
    "RESULT_FORMAT",
    "BreachPolicy",
    "GxValidator",
    "ValidationOutcome",
    "breach_message",
    "validate_batch",
]

log = logging.getLogger("quarantine.expectations")

#: What GX returns per expectation: counts and observed values, no row values.
RESULT_FORMAT: dict[str, Any] = {
    "result_format": "BASIC",
    "partial_unexpected_count": 0,
    "include_unexpected_rows": False,
    "return_unexpected_index_query": False,
}

_NAME_META = "quarantine_name"


@dataclass(frozen=True)
class BreachPolicy:
    """What a failed expectation does, per expectation.

    Attributes:
        default: the action for expectations without an override.
        overrides: action per expectation type (``expect_column_mean_to_be_between``)
            or per expectation name (``expect_column_mean_to_be_between:amount``);
            a name wins over a type.
    """

    default: BreachAction = BreachAction.WARN
    overrides: Mapping[str, BreachAction] = field(default_factory=dict)

    def action_for(self, spec: ExpectationSpec) -> BreachAction:
        """The action for ``spec``."""
        return self.overrides.get(spec.name, self.overrides.get(spec.type, self.default))


@dataclass(frozen=True)
class ValidationOutcome:
    """GX's verdict on one batch.

    Attributes:
        success: GX's suite-level success.
        breaches: one per failed expectation, in suite order.
        unexpected_counts: GX's ``unexpected_count`` per expectation name (map
            expectations only).
        untranslated: names of the suite's expectations that were not checked
            per row (validated here only).
        result_json: GX's whole validation result, as JSON-ready dicts.
    """

    success: bool
    breaches: tuple[Breach, ...]
    unexpected_counts: Mapping[str, int]
    untranslated: tuple[str, ...]
    result_json: Mapping[str, Any]


def breach_message(spec: ExpectationSpec, result: Mapping[str, Any], exception: str | None) -> str:
    """A sentence about a failed expectation: what was expected, what GX found."""
    head = spec.describe()
    if exception:
        return f"{head}: GX could not evaluate it: {exception}"
    if "unexpected_count" in result:
        n, total = result.get("unexpected_count"), result.get("element_count")
        pct = result.get("unexpected_percent")
        # the base is this batch's records (a re-run's: the records it ran again), not the table's
        pct_s = f" ({pct:.2f}% of the non-null values this batch checked)" if isinstance(pct, int | float) else ""
        need = (
            f"expected at least {spec.mostly:.2%} of non-null values to pass"
            if spec.mostly is not None else "expected every non-null value to pass"
        )
        return f"{head}: {need}; found {n} unexpected of {total} values{pct_s}"
    observed = json.dumps(result.get("observed_value"), default=str)
    return f"{head}: found observed_value={observed}"


class GxValidator:
    """A GX ephemeral context with one Spark dataframe asset, reused across batches.

    Building the context costs seconds; one validator serves every batch of a
    run. Not thread safe (one ``foreachBatch`` runs at a time).
    """

    def __init__(self) -> None:
        self._batch_definition: Any = None
        self._suites: dict[int, Any] = {}

    def _definition(self) -> Any:
        if self._batch_definition is None:
            import great_expectations as gx
            from great_expectations.data_context.types.base import ProgressBarsConfig

            ctx = gx.get_context(mode="ephemeral")
            ctx.variables.progress_bars = ProgressBarsConfig(globally=False)
            # persist=False: the runner hands us an already-persisted batch.
            source = ctx.data_sources.add_spark(name="quarantine", persist=False)
            asset = source.add_dataframe_asset(name="batch")
            self._batch_definition = asset.add_batch_definition_whole_dataframe("whole_batch")
        return self._batch_definition

    def _gx_suite(self, suite: Suite) -> Any:
        key = id(suite)
        if key not in self._suites:
            gx_suite = suite.to_gx()
            for spec, exp in zip(suite.expectations, gx_suite.expectations, strict=True):
                exp.meta = {**(exp.meta or {}), _NAME_META: spec.name}
            self._suites[key] = (suite, gx_suite)
        return self._suites[key][1]

    def validate(
        self,
        df: DataFrame,
        suite: Suite,
        on_breach: BreachPolicy,
        *,
        untranslated: tuple[str, ...] = (),
    ) -> ValidationOutcome:
        """Validate ``suite`` on ``df`` with GX (see :func:`validate_batch`)."""
        batch = self._definition().get_batch(batch_parameters={"dataframe": df})
        result = batch.validate(self._gx_suite(suite), result_format=RESULT_FORMAT)
        breaches: list[tuple[int, Breach]] = []
        counts: dict[str, int] = {}
        order = {e.name: i for i, e in enumerate(suite.expectations)}
        for r in result.results:
            name = (r.expectation_config.meta or {}).get(_NAME_META)
            spec = suite.by_name(name) if name in order else None
            if spec is None:
                continue
            res: Mapping[str, Any] = r.result or {}
            if isinstance(res.get("unexpected_count"), int):
                counts[spec.name] = int(res["unexpected_count"])
            if r.success:
                continue
            info = r.exception_info or {}
            exc = info.get("exception_message") if info.get("raised_exception") else None
            breaches.append(
                (
                    order[spec.name],
                    Breach(
                        name=spec.name,
                        action=on_breach.action_for(spec),
                        message=breach_message(spec, res, exc),
                        details=_jsonable(r.to_json_dict()),
                    ),
                )
            )
        outcome = ValidationOutcome(
            success=bool(result.success),
            breaches=tuple(b for _, b in sorted(breaches, key=lambda t: t[0])),
            unexpected_counts=counts,
            untranslated=untranslated,
            result_json=_jsonable(result.to_json_dict()),
        )
        for b in outcome.breaches:
            log.warning("expectation breach [%s] %s", b.action.value, redact_text(b.message), extra={BREACH_ATTR: b})
        return outcome


def _jsonable(d: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = json.loads(json.dumps(d, default=str))
    return out


_DEFAULT: GxValidator | None = None


def validate_batch(
    df: DataFrame,
    suite: Suite,
    on_breach: BreachPolicy | None = None,
    *,
    untranslated: tuple[str, ...] = (),
    validator: GxValidator | None = None,
) -> ValidationOutcome:
    """Run GX's validation of ``suite`` on the batch ``df`` and decide the breaches.

    Args:
        df: the batch's records as flat columns named as in the suite
            (for the expectation stage: the fields of its input struct, for the
            rows that reached the stage). Persist it first if it is read again.
        suite: the suite.
        on_breach: the action per expectation (default: warn for all).
        untranslated: names to report as validated by GX only (the stage's
            :meth:`~quarantine.expectations.stage.ExpectationStage.untranslated`).
        validator: the GX context to use; default a process-wide one.

    Returns:
        GX's success, one breach per failed expectation, GX's unexpected counts
        and its result JSON. Never collects unexpected values or row indexes.
    """
    global _DEFAULT
    if validator is None:
        if _DEFAULT is None:
            _DEFAULT = GxValidator()
        validator = _DEFAULT
    return validator.validate(df, suite, on_breach or BreachPolicy(), untranslated=untranslated)
