"""MLflow tracking as a :class:`~quarantine.listeners.events.RunListener`, buffered through outages.

One MLflow run per pipeline run (per run of a streaming query), with:

* **params** — the redacted config, flattened to dotted keys (``errors.tolerance``,
  ``stages.2.options.schema``), keys cut to 250 and values to 6000 characters;
* **metrics** per batch, ``step`` = batch id (names in :func:`mlflow_metrics`);
* **tags** — ``pipeline``, ``source``, ``quarantine.run_id``, ``quarantine.run_kind``
  (run / replay / discard), ``status`` (running / succeeded / failed),
  ``untranslated_expectations``;
* **artifacts** — ``breaches/batch-<id>/<name>.json`` (GX's validation result
  for each breach) and ``samples/batch-<id>.json`` (a few quarantined records;
  key/value only when ``errors.log.include.messages``).

Outages never stop the data. The tracker sets MLflow's HTTP timeout and retries
from :class:`~quarantine.config.MlflowConfig` (``MLFLOW_HTTP_REQUEST_TIMEOUT``,
``MLFLOW_HTTP_REQUEST_MAX_RETRIES``, a small backoff), so one failed call costs
at most about ``http_timeout_s * (http_max_retries + 1)`` plus backoff. After a
failure it does not call MLflow again for ``reconnect_interval_s``: batches in
between pay nothing. Everything that could not be sent (run creation, params,
tags, metric points, artifacts) is kept and sent, in order, by the next call
that finds the server back. Metric points are bounded by ``buffer_max``
(oldest dropped first), artifacts by :data:`ARTIFACT_BUFFER`; drops are counted
(:attr:`MlflowTracker.dropped_points`), logged as a warning, and reported as
the ``mlflow-dropped-points`` metric once the server is back. Points still
buffered when the run ends and MLflow is still down are dropped and counted.
"""

from __future__ import annotations

import json
import logging
import os
import re
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from quarantine.columns import SOURCE_PAYLOAD, RunKind
from quarantine.config import MlflowConfig, PipelineConfig
from quarantine.errorhandling.breach import Breach
from quarantine.listeners.events import BatchReport, RunInfo, RunListener, RunStatus
from quarantine.redaction import redact, redact_text
from quarantine.spark.runtime import on_databricks

__all__ = [
    "ARTIFACT_BUFFER",
    "LOCAL_TRACKING_URI",
    "MlflowTracker",
    "NoopTracker",
    "flatten_params",
    "mlflow_metrics",
    "resolve_tracking_uri",
    "tracker_for",
]

log = logging.getLogger("quarantine.listeners.mlflow")

#: The local default: a SQLite store in the working (project) directory.
LOCAL_TRACKING_URI = "sqlite:///mlflow.db"
#: Artifacts kept while MLflow is down (beyond that they are dropped and counted).
ARTIFACT_BUFFER = 100

_MAX_KEY = 250
_MAX_PARAM_VALUE = 6000
_PARAMS_PER_CALL = 100
_METRICS_PER_CALL = 1000
_BAD_NAME_CHARS = re.compile(r"[^A-Za-z0-9_\-. /]")


#: A SQLite store's URI: ``sqlite:///`` and the file's path (absolute: a fourth ``/``).
_SQLITE = "sqlite:///"


def resolve_tracking_uri(config: MlflowConfig) -> str:
    """The configured URI, else ``databricks`` on Databricks, else :data:`LOCAL_TRACKING_URI`;
    a SQLite store named relative to the working folder as that folder's file, now (absolute).

    A relative ``sqlite:///mlflow.db`` is the folder a run starts in, as MLflow reads it; the
    URI is made absolute here because MLflow keeps one database engine per URI string for the
    life of the process, opened in the folder of its first use: a process that runs in a second
    folder (a notebook, a test worker) would otherwise write the first folder's store.
    """
    uri = config.tracking_uri or ("databricks" if on_databricks() else LOCAL_TRACKING_URI)
    path = uri[len(_SQLITE):]
    if uri.startswith(_SQLITE) and path and not path.startswith(("/", ":memory:")):
        return _SQLITE + str(Path.cwd() / path)
    return uri


def _name(key: str) -> str:
    """An MLflow-safe metric/param name (``:`` becomes ``.``, other odd characters ``_``)."""
    return _BAD_NAME_CHARS.sub("_", key.replace(":", "."))[:_MAX_KEY]


def flatten_params(config: Mapping[str, Any], prefix: str = "") -> dict[str, str]:
    """Flatten a (redacted) config to MLflow params: dotted keys, string values, MLflow limits."""
    out: dict[str, str] = {}

    def walk(value: Any, key: str) -> None:
        if isinstance(value, Mapping):
            if not value and key:
                out[_name(key)] = "{}"
            for k, v in value.items():
                walk(v, f"{key}.{k}" if key else str(k))
        elif isinstance(value, list | tuple):
            if not value and key:
                out[_name(key)] = "[]"
            for i, v in enumerate(value):
                walk(v, f"{key}.{i}")
        else:
            text = value if isinstance(value, str) else json.dumps(value, default=str)
            out[_name(key)] = text[:_MAX_PARAM_VALUE]

    walk(config, prefix)
    return out


def mlflow_metrics(report: BatchReport) -> dict[str, float]:
    """The MLflow metrics logged for one batch (step = batch id).

    ``records_in`` / ``records_ok`` / ``records_quarantined``; ``quarantined.stage.<stage>``,
    ``quarantined.topic.<topic>``, ``quarantined.expectation.<type>.<column>``;
    every key of :attr:`BatchReport.metrics` as is (Kafka's names); ``tolerance_breaches``
    and ``tolerance_breaches.<action>``; ``untranslated_expectations``.
    """
    m: dict[str, float] = {
        "records_in": float(report.records_in),
        "records_ok": float(report.records_ok),
        "records_quarantined": float(report.records_quarantined),
        "tolerance_breaches": float(len(report.breaches)),
        "untranslated_expectations": float(len(report.untranslated_expectations)),
    }
    for stage, n in report.quarantined_by_stage.items():
        m[_name(f"quarantined.stage.{stage}")] = float(n)
    for topic, n in report.quarantined_by_topic.items():
        m[_name(f"quarantined.topic.{topic}")] = float(n)
    for exp, n in report.quarantined_by_expectation.items():
        m[_name(f"quarantined.expectation.{exp}")] = float(n)
    for b in report.breaches:
        key = _name(f"tolerance_breaches.{b.action.value}")
        m[key] = m.get(key, 0.0) + 1.0
    for k, v in report.metrics.items():
        m[_name(k)] = float(v)
    return m


class NoopTracker:
    """The listener for ``mlflow.enabled: false``: does nothing (data is unaffected)."""

    def on_run_start(self, run: RunInfo) -> None:
        """Nothing."""

    def on_batch(self, report: BatchReport) -> None:
        """Nothing."""

    def on_run_end(self, run: RunInfo, status: RunStatus, error: BaseException | None) -> None:
        """Nothing."""


@dataclass(frozen=True)
class _Artifact:
    path: str
    content: Any


class MlflowTracker:
    """Logs a pipeline run to MLflow; never raises for MLflow outages (see module doc).

    Args:
        config: the ``mlflow:`` config (timeout, retries, buffer size, sample size).
        include_messages: keep record key/value in sampled messages
            (``errors.log.include.messages``).
        secrets: secret values to scrub from any text sent to MLflow.
        reconnect_interval_s: after a failed call, skip MLflow for this long.
        clock: monotonic seconds (injected for tests).

    Not thread safe: one run, batches in order.
    """

    def __init__(
        self,
        config: MlflowConfig,
        *,
        include_messages: bool = False,
        secrets: tuple[str, ...] = (),
        reconnect_interval_s: float = 2.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.config = config
        self.tracking_uri = resolve_tracking_uri(config)
        self.include_messages = include_messages
        self.secrets = secrets
        #: the tracking URI as logged: a password in its user-info is masked
        self.shown_uri = redact_text(self.tracking_uri, secrets)
        self.reconnect_interval_s = reconnect_interval_s
        self.clock = clock
        # Read by MLflow at request time: bounded delay per call, never minutes.
        os.environ["MLFLOW_HTTP_REQUEST_TIMEOUT"] = str(config.http_timeout_s)
        os.environ["MLFLOW_HTTP_REQUEST_MAX_RETRIES"] = str(config.http_max_retries)
        os.environ["MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR"] = "1"  # an int for MLflow
        os.environ["MLFLOW_HTTP_REQUEST_BACKOFF_JITTER"] = "0.5"
        from mlflow.tracking import MlflowClient

        self._client = MlflowClient(tracking_uri=self.tracking_uri)
        self.mlflow_run_id: str | None = None
        self._pending_run: RunInfo | None = None
        self._params: dict[str, str] = {}
        self._tags: dict[str, str] = {}
        self._points: deque[tuple[str, float, int, int]] = deque()
        self._artifacts: deque[_Artifact] = deque()
        self._end: RunStatus | None = None
        self._down_since: float | None = None
        self._retry_at = 0.0
        self.dropped_points = 0
        self.dropped_artifacts = 0
        self._reported_drops = 0
        self._last_step = 0

    # ------------------------------------------------------------------ RunListener

    def on_run_start(self, run: RunInfo) -> None:
        """Queue the run's creation, params and tags; send them if MLflow is up."""
        self._pending_run = run
        # the config is redacted already; a configured secret repeated under an ordinary key is not
        self._params.update({k: self._scrub(v) for k, v in flatten_params(run.config).items()})
        self._tags.update(
            {"pipeline": run.pipeline, "source": self._scrub(run.source), "quarantine.run_id": run.run_id,
             "quarantine.run_kind": run.kind.value, "status": RunStatus.RUNNING.value}
        )
        self.flush()

    def on_batch(self, report: BatchReport) -> None:
        """Queue the batch's metrics and artifacts; send everything queued if MLflow is up."""
        if self._points or self._artifacts:
            # send the backlog before this batch's points can push the oldest out
            self.flush()
        ts = int(report.finished_at.timestamp() * 1000)
        self._last_step = report.batch_id
        for key, value in mlflow_metrics(report).items():
            self._add_point((key, value, ts, report.batch_id))
        if report.untranslated_expectations:
            self._tags["untranslated_expectations"] = ", ".join(report.untranslated_expectations)[:5000]
        batch = f"batch-{report.batch_id:06d}"
        for b in report.breaches:
            self._add_artifact(self._breach_artifact(batch, b))
        if report.sample_messages and self.config.sample_messages:
            sample = [self._sample(m) for m in report.sample_messages[: self.config.sample_messages]]
            self._add_artifact(_Artifact(f"samples/{batch}.json", sample))
        self.flush()

    def on_run_end(self, run: RunInfo, status: RunStatus, error: BaseException | None) -> None:
        """Tag the status (and error), end the run; drop and count what MLflow never took."""
        self._tags["status"] = status.value
        if error is not None:
            self._tags["error"] = self._scrub(f"{type(error).__name__}: {error}")[:5000]
        # a breach that failed the run (ExpectationBreachError) never reached on_batch
        for b in getattr(error, "breaches", ()):
            if isinstance(b, Breach):
                self._add_artifact(self._breach_artifact("run-end", b))
        self._end = status
        self.flush(force=True)
        if self._points or self._artifacts or self._end is not None:
            self.dropped_points += len(self._points)
            self.dropped_artifacts += len(self._artifacts)
            log.warning(
                "MLflow (%s) unreachable at run end: dropped %d metric point(s) and %d artifact(s) "
                "of run %s; the data itself is written",
                self.shown_uri, len(self._points), len(self._artifacts), run.run_id,
            )
            self._points.clear()
            self._artifacts.clear()

    # ------------------------------------------------------------------ buffering

    @property
    def buffered_points(self) -> int:
        """Metric points waiting for MLflow."""
        return len(self._points)

    @property
    def available(self) -> bool:
        """Whether the last MLflow call succeeded."""
        return self._down_since is None

    def _add_point(self, point: tuple[str, float, int, int]) -> None:
        self._points.append(point)
        if self._down_since is not None:
            self._trim()

    def _trim(self) -> None:
        """While MLflow is down, keep at most ``buffer_max`` points (drop the oldest, counted)."""
        excess = len(self._points) - self.config.buffer_max
        for _ in range(max(excess, 0)):
            self._points.popleft()
        if excess > 0:
            self._drop_points(excess)

    def _drop_points(self, n: int) -> None:
        if self.dropped_points == self._reported_drops:
            log.warning(
                "MLflow (%s) down: metric buffer full (mlflow.buffer_max=%d); dropping the oldest points",
                self.shown_uri, self.config.buffer_max,
            )
        self.dropped_points += n

    def _add_artifact(self, artifact: _Artifact) -> None:
        if len(self._artifacts) >= ARTIFACT_BUFFER:
            self._artifacts.popleft()
            self.dropped_artifacts += 1
        self._artifacts.append(artifact)

    def _breach_artifact(self, folder: str, b: Breach) -> _Artifact:
        return _Artifact(
            f"breaches/{folder}/{_name(b.name).replace('/', '_')}.json",
            {"name": b.name, "action": b.action.value, "message": self._scrub(b.message),
             "result": redact(b.details, secrets=self.secrets)},
        )

    def _scrub(self, text: str) -> str:
        return redact_text(text, self.secrets)

    def _sample(self, m: Mapping[str, Any]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for k, v in m.items():
            if k in SOURCE_PAYLOAD and not self.include_messages:
                continue
            if isinstance(v, bytes | bytearray):
                v = bytes(v).decode("utf-8", errors="replace")
            out[k] = self._scrub(v) if isinstance(v, str) else v
        return out

    # ------------------------------------------------------------------ sending

    def flush(self, *, force: bool = False) -> bool:
        """Send everything queued, in order; False (and nothing raised) if MLflow is down.

        Args:
            force: try even within ``reconnect_interval_s`` of the last failure.
        """
        if not force and self._down_since is not None and self.clock() < self._retry_at:
            return False
        try:
            self._send()
        except Exception as exc:  # any MLflow/network failure: buffer, never fail the data
            if self._down_since is None:
                log.warning(
                    "MLflow (%s) unreachable, buffering (up to %d metric points): %s",
                    self.shown_uri, self.config.buffer_max, self._scrub(_first_line(exc)),
                )
                self._down_since = self.clock()
            self._retry_at = self.clock() + self.reconnect_interval_s
            self._trim()
            return False
        if self._down_since is not None:
            log.warning("MLflow (%s) reachable again; buffered data sent", self.shown_uri)
        self._down_since = None
        return True

    def _send(self) -> None:
        from mlflow.entities import Metric, Param, RunTag

        client = self._client
        if self.mlflow_run_id is None:
            if self._pending_run is None:
                return
            self.mlflow_run_id = self._create_run(self._pending_run)
        run_id = self.mlflow_run_id
        if self._params:
            items = list(self._params.items())
            for i in range(0, len(items), _PARAMS_PER_CALL):
                chunk = items[i : i + _PARAMS_PER_CALL]
                client.log_batch(run_id, params=[Param(k, v) for k, v in chunk], synchronous=True)
                for k, _ in chunk:
                    del self._params[k]
        if self._tags:
            tags = dict(self._tags)
            client.log_batch(run_id, tags=[RunTag(k, v) for k, v in tags.items()], synchronous=True)
            for k, v in tags.items():
                if self._tags.get(k) == v:
                    del self._tags[k]
        if self.dropped_points > self._reported_drops:
            self._points.append(
                ("mlflow-dropped-points", float(self.dropped_points), int(time.time() * 1000), self._last_step)
            )
            self._reported_drops = self.dropped_points
        while self._points:
            n = min(_METRICS_PER_CALL, len(self._points))
            points = [self._points[i] for i in range(n)]
            client.log_batch(
                run_id, metrics=[Metric(k, v, ts, step) for k, v, ts, step in points], synchronous=True
            )
            for _ in range(n):
                self._points.popleft()
        while self._artifacts:
            a = self._artifacts[0]
            client.log_dict(run_id, a.content, a.path)
            self._artifacts.popleft()
        if self._end is not None:
            status = "FINISHED" if self._end is RunStatus.SUCCEEDED else "FAILED"
            client.set_terminated(run_id, status=status)
            self._end = None

    def _create_run(self, run: RunInfo) -> str:
        client = self._client
        exp = client.get_experiment_by_name(self.config.experiment)
        if exp is None:
            try:
                exp_id = client.create_experiment(self.config.experiment)
            except Exception:  # created concurrently by another run
                exp = client.get_experiment_by_name(self.config.experiment)
                if exp is None:
                    raise
                exp_id = exp.experiment_id
        else:
            exp_id = exp.experiment_id
        # a replay's or a discard's run says so in its name: orders-replay-1a2b3c4d
        kind = [] if run.kind is RunKind.RUN else [run.kind.value]
        created = client.create_run(
            exp_id,
            start_time=int(run.started_at.timestamp() * 1000),
            tags={"pipeline": run.pipeline, "quarantine.run_id": run.run_id, "quarantine.run_kind": run.kind.value},
            run_name="-".join([run.pipeline, *kind, run.run_id[:8]]),
        )
        run_id: str = created.info.run_id
        return run_id


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def tracker_for(config: PipelineConfig) -> RunListener:
    """The MLflow listener a pipeline config asks for: :class:`MlflowTracker` or :class:`NoopTracker`."""
    if not config.mlflow.enabled:
        return NoopTracker()
    return MlflowTracker(
        config.mlflow,
        include_messages=config.errors.log_include_messages,
        secrets=config.secrets(),
    )
