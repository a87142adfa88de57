"""``quarantine forget``: a record's bytes and words erased on request, its settlement kept; ``--purge``.

An erasure request (GDPR article 17, CCPA) names records: ``--where`` over the quarantine
table's columns, ``--key`` (the record key as text, or ``hex:…``), or ``--all``. For each of
the pipeline's matching rows, open or closed, :func:`forget` sets NULL what the record carried
and what quotes it: ``key``, ``value``, ``headers``, ``message``, ``stacktrace``, each
``error_history`` entry's ``message`` (and ``encryption_key_id``, naming a key of bytes no longer
there). The row keeps the record's identity and settlement: coordinates, timestamp,
fingerprint (computed from the bytes first for a row written before the column existed),
status, stage, kind, error class, counts, times; so a batch re-run over a source that still
holds the record leaves it out (:func:`quarantine.identity.against_settled`), as for a row
``maintain`` stripped. An ``open`` row is closed as ``discarded`` with the resolution
``forgotten: <reason>``; a closed one keeps its status and resolution (a ``replayed`` record's
row in the target is the user's data, which the output names).

The erase is one MERGE on the rows' coordinates and fingerprints, selected from one version of
the table, under the write retry (a run or another forget committing first is retried, and the
erase applies to what they wrote). A ``--where`` that matches every row of the pipeline is
refused without ``--all``.

An UPDATE leaves the old bytes in files older versions read (time travel), in the Change Data
Feed's files of the update, and, with deletion vectors, in files the current version still
reads with rows marked deleted. :func:`purge` removes them: ``REORG TABLE … APPLY (PURGE)`` on a
table with the deletion vectors feature (it rewrites the files with deletion vectors), then ``VACUUM``, which
deletes a file only once it has been out of the table for the retention
(``errors.deadletterqueue.vacuum.retention.hours``, at least the table's
``delta.deletedFileRetentionDuration`` and Delta's 168 hours; shorter only with Delta's
documented override, ``spark.databricks.delta.retentionDurationCheck.enabled=false``). Its
result says when the bytes are gone from every file: now, or after which time (a VACUUM then:
``quarantine forget --purge`` again, or ``quarantine maintain``). The table's log keeps no
record content when Delta's statistics leave the content columns out
(:func:`quarantine.sinks.quarantine.stats_columns`, set on tables created since); on an older
table the property is set now, and the log files from before are deleted by Delta once
``delta.logRetentionDuration`` has passed (the result says when).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass, field

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from quarantine.batch.plan import Plan
from quarantine.columns import (
    ENCRYPTION_KEY_ID,
    ERROR_HISTORY,
    FINGERPRINT,
    KEY,
    MESSAGE,
    PIPELINE,
    QUARANTINE_FINGERPRINT,
    RESOLUTION,
    RESOLVED_AT,
    SOURCE_KEY,
    STATUS,
    QuarantineStatus,
)
from quarantine.errorhandling.retry import retried_write
from quarantine.errors import ConfigError, QuarantineError, QuarantineWriteError
from quarantine.ops.maintain import (
    COMMITTED_AT,
    DELTA_MIN_RETENTION_HOURS,
    retention_hours,
    table_properties,
    vacuum,
    vacuum_hours,
)
from quarantine.runners.replay import check_predicate, readable_records
from quarantine.sinks.quarantine import (
    STATS_PROPERTY,
    STRIPPED,
    read_quarantine,
    record_match,
    row_fingerprint,
    stats_columns,
    stored_fingerprint,
    stripped,
)
from quarantine.tables import read_table_pinned, table_column, table_exists, table_ref

__all__ = ["RETENTION_CHECK", "Forgotten", "Purge", "forget", "parse_key", "purge", "purge_retention"]

#: Delta's session setting that keeps a VACUUM from retaining less than the table's retention.
RETENTION_CHECK = "spark.databricks.delta.retentionDurationCheck.enabled"
#: Delta's default ``delta.logRetentionDuration``: how long the log keeps a commit's file.
_LOG_RETENTION_DEFAULT = "interval 30 days"
#: Operations whose commit leaves bytes of rows the current version no longer holds in files
#: (removed files, deletion-vector-marked rows, Change Data Feed files).
_REWRITES = frozenset({"MERGE", "UPDATE", "DELETE", "REORG", "OPTIMIZE", "RESTORE", "TRUNCATE",
                       "REPLACE TABLE", "CREATE OR REPLACE TABLE"})


def parse_key(text: str) -> bytes:
    """``--key``'s record key: ``hex:<hex digits>`` as those bytes, ``text:<text>`` or any other text as
    its UTF-8 bytes.

    Raises:
        ConfigError: ``hex:`` followed by anything but an even number of hex digits.
    """
    if text.startswith("hex:"):
        try:
            return bytes.fromhex(text[4:])
        except ValueError:
            raise ConfigError("--key", text, "hex:<an even number of hex digits> (or the key as text)") from None
    return text.removeprefix("text:").encode("utf-8")


@dataclass(frozen=True)
class Purge:
    """What :func:`purge` did, and when the old bytes are gone from every file.

    Attributes:
        table: the quarantine table.
        reorganized: data files ``REORG … APPLY (PURGE)`` rewrote (those with rows a deletion vector marks).
        deletion_vectors: whether the table has the deletion vectors feature (then REORG ran).
        vacuum_hours: the retention the VACUUM kept.
        gone_at: when files holding bytes no longer in the table are all past the retention (a
            VACUUM after that time deletes them); None: this VACUUM deleted them, nothing is left.
        log_until: the table's log files from before this time hold Delta's statistics of the
            content columns (an older table); None: the log holds none.
        log_gone_at: when Delta deletes those log files (its log retention after ``log_until``, at
            a checkpoint after it).
    """

    table: str
    reorganized: int
    deletion_vectors: bool
    vacuum_hours: float
    gone_at: dt.datetime | None
    log_until: dt.datetime | None = None
    log_gone_at: dt.datetime | None = None

    def render(self) -> str:
        """Two or three lines: the REORG, the VACUUM and when the bytes are gone, the log."""
        reorg = (f"REORG … APPLY (PURGE): {self.reorganized:,} file(s) with deletion vectors rewritten"
                 if self.deletion_vectors else "no deletion vectors: nothing to REORG")
        if self.gone_at is None:
            when = "the old bytes are gone from every data and change-data file of the table now"
        else:
            when = (f"files holding old bytes are deleted by a VACUUM after {self.gone_at:%Y-%m-%d %H:%M} UTC "
                    f"(retention {self.vacuum_hours:g} h): run `quarantine forget --purge` or `quarantine "
                    "maintain` then")
        lines = [f"purge {self.table}: {reorg}; VACUUM kept files removed in the last {self.vacuum_hours:g} h: "
                 f"{when}"]
        if self.log_until is not None and self.log_gone_at is not None:
            lines.append(
                f"  the log's files from before {self.log_until:%Y-%m-%d %H:%M} UTC hold Delta's statistics of "
                f"messages (their first 32 characters): Delta deletes them after {self.log_gone_at:%Y-%m-%d %H:%M} "
                "UTC (delta.logRetentionDuration), at its next checkpoint"
            )
        return "\n".join(lines)


@dataclass(frozen=True)
class Forgotten:
    """What :func:`forget` did, or would do (``dry_run``).

    Attributes:
        table: the quarantine table.
        pipeline: the pipeline whose rows were matched.
        matched: the rows the request matched, by status before the erase.
        erased_before: matched rows whose bytes and words were already gone (forgotten, or stripped
            by ``maintain``): left as they are.
        reason: the resolution an open row gets (``forgotten: <reason>``).
        dry_run: nothing was written.
        purge: what the purge did (None: no ``--purge``).
    """

    table: str
    pipeline: str
    matched: Mapping[str, int]
    erased_before: int
    reason: str
    dry_run: bool = False
    purge: Purge | None = None
    target: str = ""
    notes: tuple[str, ...] = field(default=())

    @property
    def total(self) -> int:
        """Every matched row."""
        return sum(self.matched.values())

    def render(self) -> str:
        """A few lines: what matched, what was erased and closed, what is left where."""
        statuses = ", ".join(f"{n:,} {s}" for s, n in sorted(self.matched.items())) or "none"
        erase = self.total - self.erased_before
        opened = self.matched.get(QuarantineStatus.OPEN.value, 0)
        if self.dry_run:
            head = (f"forget --dry-run (nothing written): {self.total:,} row(s) of pipeline {self.pipeline} in "
                    f"{self.table} match ({statuses}); {erase:,} would be erased, {opened:,} open would be closed "
                    f"as discarded; {self.erased_before:,} were erased before")
            return "\n".join([head, *self.notes])
        lines = [
            f"forget: {self.total:,} row(s) of pipeline {self.pipeline} in {self.table} matched ({statuses}): "
            f"{erase:,} erased (key, value, headers, message, stacktrace, history messages), {opened:,} open closed "
            f"as discarded ('forgotten: {self.reason}'); {self.erased_before:,} erased before",
            "  kept: coordinates, fingerprint, status, stage, error class, counts and times, so a re-run leaves "
            "these records out",
        ]
        replayed = self.matched.get(QuarantineStatus.REPLAYED.value, 0)
        if replayed:
            lines.append(f"  {replayed:,} of them were replayed: their records' rows are in the target {self.target} "
                         "(your data: erase them there)")
        lines += self.notes
        if self.purge is None:
            lines.append("  older versions of the table still hold the bytes (time travel, Change Data Feed, "
                         "deletion vectors): `quarantine forget --purge` removes them")
        else:
            lines.append(self.purge.render())
        return "\n".join(lines)


def _selection(plan: Plan, where: str | None, key: bytes | None, everything: bool) -> tuple[DataFrame, int]:
    """The pipeline's rows the request matches, at the table's current version, and how many rows it has.

    Raises:
        ConfigError: nothing names the rows (no ``--where``, ``--key`` or ``--all``), or ``--where``
            is not a condition over the quarantine table's columns, or matches every row without ``--all``.
        KeyUnavailableError: ``--key`` must be compared with keys encrypted under a key not readable here.
    """
    if where is None and key is None and not everything:
        raise ConfigError("--where", None, "the rows to forget: --where, --key, or --all for every row of the pipeline")
    if where:
        check_predicate(plan.spark, where)
    name = plan.quarantine_table
    if not table_exists(plan.spark, name):
        raise QuarantineError(f"quarantine table {name} does not exist yet: nothing to forget")
    read_quarantine(plan.spark, name)  # a quarantine table, or a ConfigError naming the key
    rows = read_table_pinned(plan.spark, name).where(F.col(PIPELINE) == F.lit(plan.config.pipeline))
    selected = rows.where(where) if where else rows
    if key is not None:
        selected = readable_records(plan, selected, "forget --key").where(F.col(KEY) == F.lit(key))
    total = rows.count() if where and not everything else 0  # reported and guarded; not a data-path decision
    return selected, total


def forget(
    plan: Plan,
    *,
    where: str | None = None,
    key: bytes | None = None,
    everything: bool = False,
    reason: str = "on request",
    dry_run: bool = False,
    now: dt.datetime | None = None,
) -> Forgotten:
    """Erase the bytes and words of ``plan``'s pipeline's rows that the request matches (see the module doc).

    Args:
        plan: the pipeline (its quarantine table, keys and write retry).
        where: a SQL condition over the quarantine table's columns (``--where``).
        key: the record key the rows must have (``--key``; compared with the plaintext of an
            encrypted key, which needs that key).
        everything: ``--all``: every row of the pipeline, or a ``where`` that matches them all.
        reason: kept in the resolution of the open rows it closes (``forgotten: <reason>``).
        dry_run: count only; write nothing.
        now: the resolution time (injected for tests).

    Raises:
        ConfigError: no rows named, a bad ``where``, or a ``where`` matching every row of the
            pipeline without ``everything`` (before anything is written).
        KeyUnavailableError: ``key`` must be compared with record keys encrypted under a key not readable here.
        QuarantineError: no quarantine table yet.
        TableWriteError: the erase still failed after its retries.
    """
    spark, name = plan.spark, plan.quarantine_table
    selected, total = _selection(plan, where, key, everything)
    counted = selected.groupBy(STATUS).agg(
        F.count(F.lit(1)).alias("n"), F.count(F.when(stripped(), 1)).alias("erased"),
    ).collect()
    matched = {r[STATUS]: int(r["n"]) for r in counted}
    erased_before = sum(int(r["erased"]) for r in counted)
    n = sum(matched.values())
    if where and not everything and key is None and n and n == total:
        raise ConfigError("--where", where, f"a condition matching some of pipeline {plan.config.pipeline}'s rows; "
                          f"it matches all {total:,} of them: add --all if every one is to be forgotten")
    notes = _stats_note(spark, name, dry_run=dry_run)
    result = Forgotten(table=name, pipeline=plan.config.pipeline, matched=matched, erased_before=erased_before,
                       reason=reason, dry_run=dry_run, target=plan.target_table, notes=notes)
    if dry_run or n == erased_before:
        return result
    keys = selected.select(*SOURCE_KEY, row_fingerprint(selected).alias(FINGERPRINT))
    at = now or plan.clock()
    retried_write(plan.write_operator, "forget", name, 0,
                  lambda: _erase(spark, name, keys, pipeline=plan.config.pipeline, reason=reason, now=at),
                  failure=QuarantineWriteError)
    return result


def _erase(spark: SparkSession, name: str, keys: DataFrame, *, pipeline: str, reason: str, now: dt.datetime) -> None:
    """One MERGE: the rows of ``keys`` (coordinates, fingerprint) erased, the open ones closed."""
    source = keys.select(F.lit(pipeline).alias(PIPELINE), *SOURCE_KEY, F.col(FINGERPRINT).alias(QUARANTINE_FINGERPRINT))

    def t(c: str) -> Column:
        return table_column(name, c)

    is_open = t(STATUS) == F.lit(QuarantineStatus.OPEN.value)
    update: dict[str, Column] = {c: F.lit(None) for c in STRIPPED}
    update[ERROR_HISTORY] = F.transform(t(ERROR_HISTORY), lambda h: h.withField(MESSAGE, F.lit(None).cast("string")))
    update[QUARANTINE_FINGERPRINT] = stored_fingerprint(t)
    update[ENCRYPTION_KEY_ID] = F.lit(None).cast("string")
    update[STATUS] = F.when(is_open, F.lit(QuarantineStatus.DISCARDED.value)).otherwise(t(STATUS))
    update[RESOLVED_AT] = F.when(is_open, F.lit(now).cast("timestamp")).otherwise(t(RESOLVED_AT))
    update[RESOLUTION] = F.when(is_open, F.lit(f"forgotten: {reason}")).otherwise(t(RESOLUTION))
    (
        source.alias("s").mergeInto(table_ref(name), record_match(name, pipeline))
        .whenMatched(is_open | ~stripped(t)).update(update)
        .merge()
    )


def _stats_note(spark: SparkSession, name: str, *, dry_run: bool) -> tuple[str, ...]:
    """Delta's statistics of the content columns left out of the table's log from now on (a table created
    before they were); a line saying so, or none."""
    properties = table_properties(spark, name)
    if STATS_PROPERTY in properties:
        return ()
    if not dry_run:
        columns = ",".join(stats_columns())
        spark.sql(f"ALTER TABLE {table_ref(name)} SET TBLPROPERTIES ('{STATS_PROPERTY}' = '{columns}')")
    return (f"  {'would set' if dry_run else 'set'} {STATS_PROPERTY} on the table: Delta's log keeps no statistics of "
            "messages from now on (an older table's log files keep them until its log retention: --purge says when)",)


def purge_retention(plan: Plan, hours: float | None = None) -> float:
    """The retention :func:`purge`'s VACUUM keeps: ``hours``, or :func:`~quarantine.ops.maintain.vacuum_hours`.

    Raises:
        ConfigError: ``hours`` is below the table's retention and Delta's check (:data:`RETENTION_CHECK`)
            is on: said before anything is erased or purged.
        QuarantineError: no quarantine table.
    """
    spark, name = plan.spark, plan.quarantine_table
    if not table_exists(spark, name):
        raise QuarantineError(f"quarantine table {name} does not exist: nothing to purge")
    properties = table_properties(spark, name)
    floor = max(retention_hours(properties.get("delta.deletedFileRetentionDuration")), DELTA_MIN_RETENTION_HOURS)
    keep = vacuum_hours(plan.config, properties) if hours is None else float(hours)
    if keep < floor and (spark.conf.get(RETENTION_CHECK, "true") or "true").lower() != "false":
        raise ConfigError(
            "--retain-hours", hours,
            f"at least {floor:g} (the table's retention, which Delta's VACUUM safety check holds); to purge sooner "
            f"set {RETENTION_CHECK}=false in the config's spark.conf (Delta's documented override: readers of "
            "older versions and running streams may fail)",
        )
    return keep


def purge(plan: Plan, *, hours: float | None = None, now: dt.datetime | None = None) -> Purge:
    """Remove the bytes older versions of ``plan``'s quarantine table hold (see the module doc).

    Args:
        plan: the pipeline (its quarantine table and ``errors.deadletterqueue.vacuum.retention.hours``).
        hours: the retention to VACUUM with (:func:`purge_retention`).
        now: the current time (injected for tests).

    Raises:
        ConfigError: ``hours`` is below the table's retention and Delta's check is on (nothing was done).
        QuarantineError: no quarantine table.
    """
    spark, name = plan.spark, plan.quarantine_table
    keep = purge_retention(plan, hours)
    properties = table_properties(spark, name)
    # the table feature, not the property: files keep their deletion vectors after the property is turned off
    detail = spark.sql(f"DESCRIBE DETAIL {table_ref(name)}").select("tableFeatures").first()
    dv = detail is not None and "deletionVectors" in (detail[0] or [])
    rewritten = 0
    if dv:
        metrics = spark.sql(f"REORG TABLE {table_ref(name)} APPLY (PURGE)").select("metrics.numFilesRemoved").first()
        rewritten = int(metrics[0] or 0) if metrics is not None else 0
    vacuum(spark, name, keep)
    at = now or dt.datetime.now(dt.UTC)
    latest = _last_rewrite(spark, name, since=at - dt.timedelta(hours=keep))
    log_until = _log_statistics_until(spark, name, properties, at)
    log_hours = retention_hours(properties.get("delta.logRetentionDuration", _LOG_RETENTION_DEFAULT))
    log_gone = None if log_until is None else log_until + dt.timedelta(hours=log_hours)
    if log_gone is not None and log_gone <= at:
        log_until = log_gone = None
    return Purge(
        table=name, reorganized=rewritten, deletion_vectors=dv, vacuum_hours=keep,
        gone_at=None if latest is None or keep == 0 else latest + dt.timedelta(hours=keep),
        log_until=log_until, log_gone_at=log_gone,
    )


@dataclass(frozen=True)
class _Commit:
    """One commit of the table's history (``DESCRIBE HISTORY``)."""

    version: int
    at: dt.datetime
    operation: str
    parameters: Mapping[str, str]


def _history(spark: SparkSession, name: str) -> list[_Commit]:
    """The table's commits, newest first."""
    rows = spark.sql(f"DESCRIBE HISTORY {table_ref(name)}").select(
        "version", COMMITTED_AT, "operation", "operationParameters").collect()
    commits = [_Commit(int(r[0]), r[1].astimezone(dt.UTC) if r[1].tzinfo else r[1].replace(tzinfo=dt.UTC),
                       str(r[2]), dict(r[3] or {})) for r in rows]
    return sorted(commits, key=lambda c: c.version, reverse=True)


def _last_rewrite(spark: SparkSession, name: str, *, since: dt.datetime) -> dt.datetime | None:
    """The latest commit after ``since`` that left bytes outside the current version (:data:`_REWRITES`,
    or a WRITE that overwrote), or None."""
    later = [
        c.at for c in _history(spark, name)
        if c.at > since and (c.operation in _REWRITES
                             or (c.operation == "WRITE" and c.parameters.get("mode", "").lower() == "overwrite"))
    ]
    return max(later) if later else None


def _log_statistics_until(spark: SparkSession, name: str, properties: Mapping[str, str],
                          now: dt.datetime) -> dt.datetime | None:
    """Until when the table's log took statistics of the content columns: ``now`` while it still does, the
    commit that set :data:`STATS_PROPERTY` when that was not the table's creation, else None (never, as
    far as the log's history goes)."""
    if STATS_PROPERTY not in properties:
        return now
    for c in _history(spark, name):
        if STATS_PROPERTY in c.parameters.get("properties", ""):
            return None if c.operation.startswith("CREATE") else c.at
    return None
