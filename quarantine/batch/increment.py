"""What a batch run reads of a Delta source: what was committed since the last run, or all of it, and why.

A batch run over a Delta source records, once all its writes committed, how far it read: the
table property ``quarantine.read.<pipeline>`` on its target (where the pipeline's other state,
its topic claims, lives: :mod:`quarantine.sinks.ownership`), a JSON :class:`ReadMark` holding the
source's version and table id, the quarantine table's id, the target's version and a
fingerprint of the stages. The next run reads only the data files the source's commits after
that version added (:func:`new_files`), as long as nothing says it must read the whole source
(:func:`plan_read`):

* no mark on the target (the first run, a new or rebuilt target), or a mark of another source;
* the source was recreated (another table id), or its log no longer holds the commits since
  (log retention), or a commit since removed or rewrote records (an overwrite, a DELETE, an
  UPDATE, a MERGE, a RESTORE), or changed its schema or protocol;
* the source maps its columns (``delta.columnMapping.mode``: its files do not hold the names);
* the target changed since by other means than appends (a DELETE, an UPDATE, a RESTORE, an
  overwrite), or the quarantine table is not the one the mark names (dropped, recreated);
* the stages changed (their config, and the code of a user's Python stage): records open in
  quarantine run again under the new stages;
* a record is open in quarantine with a retriable error (a timeout, a service down): it runs again;
* the source is a catalog table (its files are its catalog's to read: Unity Catalog refuses path
  access to a managed table's location), or its log cannot be read by path;
* the user asked (``quarantine run --full``).

A Parquet directory has no log: its mark holds the names of the files the run read
(:func:`encode_files`), and the next run reads the files not among them (:func:`files_not_read`),
or the whole directory when a file it read is gone (removed, or rewritten under another name), the
mark holds no names (more files than :data:`MAX_FILES_BYTES` records) or for any reason above
that applies to it. A file is known by its name: Parquet files are written once, and one rewritten
under the same name is not read again (``quarantine run --full`` reads everything).

The summary says which, and why (:attr:`SourceRead.note`). Whichever way, the records read are
compared with what the tables settled, as before (:func:`quarantine.batch.settle.prepare`):
reading less never makes a record settled twice.

The pure half (:func:`new_files`, :func:`target_changed`, :class:`ReadMark`) takes parsed commits
and history rows; the I/O half reads them.
"""

from __future__ import annotations

import base64
import hashlib
import inspect
import json
import logging
import zlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, fields, is_dataclass
from enum import Enum
from typing import Any
from urllib.parse import unquote

from pyspark.errors import AnalysisException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import DataType, StructType

from quarantine.batch.plan import Plan
from quarantine.columns import PIPELINE, RETRIABLE, STATUS, QuarantineStatus
from quarantine.errors import SourceError, describe_failure
from quarantine.table_names import is_path, sql_literal, table_ref
from quarantine.tables import read_table, table_exists

__all__ = ["MARK_PREFIX", "MAX_FILES_BYTES", "NewFile", "ReadFacts", "ReadMark", "SourceRead", "decode_files",
           "encode_files", "files_not_read", "new_files", "plan_parquet_read", "plan_read", "record_read",
           "stages_fingerprint", "target_changed", "whole_read_reason"]

log = logging.getLogger("quarantine")

#: The target's table property holding a pipeline's :class:`ReadMark`: ``quarantine.read.<pipeline>``.
MARK_PREFIX = "quarantine.read."
#: The most a Parquet source's mark holds of the names of the files read (compressed, base64):
#: a directory with more files than fit is read whole each run, and its summary says so.
MAX_FILES_BYTES = 256 * 1024
#: A Parquet directory's stand-in for a Delta table id (it has none).
PARQUET_ID = "parquet directory"
#: Characters Spark's file reader takes as a glob: a data file named with one is read with the whole source.
_GLOB = frozenset("*?[]{}\\")
#: Target operations that only add records or leave them as they are.
_APPENDING = frozenset({
    "WRITE", "STREAMING UPDATE", "MERGE", "OPTIMIZE", "SET TBLPROPERTIES", "UNSET TBLPROPERTIES", "ADD COLUMNS",
    "CHANGE COLUMN", "VACUUM START", "VACUUM END", "CREATE TABLE", "UPGRADE PROTOCOL",
})


@dataclass(frozen=True)
class ReadMark:
    """How far a pipeline's last batch run read its source, kept on its target (see the module doc)."""

    source: str
    source_id: str
    version: int
    stages: str
    quarantine_id: str | None
    target_version: int
    #: a Parquet source's files read (:func:`encode_files`); None for a Delta source, or too many
    files: str | None = None

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str | None) -> ReadMark | None:
        """The mark ``text`` holds; None for no text or one this version does not read."""
        if not text:
            return None
        try:
            return cls(**json.loads(text))
        except (TypeError, ValueError):
            return None


@dataclass(frozen=True)
class NewFile:
    """A data file a source commit added: its path (relative to the table, as the log has it) and
    its partition values."""

    path: str
    partition: tuple[tuple[str, str | None], ...] = ()


@dataclass(frozen=True)
class SourceRead:
    """What a batch run reads, and why.

    Attributes:
        df: the records to run (Kafka-shaped).
        version: the source's version they were read as of.
        since: the version after which the records were committed; None: the whole source.
        note: the summary's line: what was read, and why the whole source when it was.
        empty: nothing was committed since (no batch to run).
        source_id: the source's Delta table id (None: not looked up).
        mark: the mark the read started from (None: none).
        stages: the stages' fingerprint before the run (:func:`stages_fingerprint`; None: not taken).
        files: a Parquet source's files as listed by this run (:func:`encode_files`), for the mark.
    """

    df: DataFrame
    version: int
    since: int | None
    note: str
    empty: bool = False
    source_id: str | None = None
    mark: ReadMark | None = None
    stages: str | None = None
    files: str | None = None


def encode_files(names: Iterable[str]) -> str | None:
    """``names`` (a Parquet directory's files) as a mark holds them: sorted, compressed, base64;
    None when that is longer than :data:`MAX_FILES_BYTES` (the next run then reads the whole
    directory). Spark's file names share long prefixes and a job's id, so a name costs a few bytes."""
    text = "\n".join(sorted(set(names))).encode()
    encoded = base64.b64encode(zlib.compress(text, 9)).decode("ascii")
    return encoded if len(encoded) <= MAX_FILES_BYTES else None


def decode_files(encoded: str) -> frozenset[str]:
    """The names :func:`encode_files` encoded (an empty set for no names).

    Raises:
        ValueError: ``encoded`` is not what :func:`encode_files` writes.
    """
    try:
        text = zlib.decompress(base64.b64decode(encoded.encode("ascii"), validate=True)).decode()
    except (zlib.error, UnicodeError, ValueError) as exc:
        raise ValueError(f"not a list of files read: {type(exc).__name__}") from exc
    return frozenset(text.split("\n")) if text else frozenset()


def files_not_read(read: str | None, listed: Iterable[str]) -> list[str] | str:
    """The files of ``listed`` (a Parquet directory now) that the mark's ``read`` (:func:`encode_files`)
    does not hold, sorted; or why the whole directory must be read: the mark holds no names, or a
    file it read is gone (removed, or rewritten under another name)."""
    if read is None:
        return (f"the last run read more files than a read mark records ({MAX_FILES_BYTES // 1024} KiB of "
                "names): a Parquet directory that large is read whole")
    try:
        before = decode_files(read)
    except ValueError:
        return "the last run's list of files read could not be decoded"
    now = set(listed)
    gone = before - now
    if gone:
        return f"{len(gone)} file(s) the last run read are gone from the directory (removed or rewritten)"
    return sorted(now - before)


def new_files(commits: Mapping[int, Sequence[Mapping[str, Any]]]) -> list[NewFile] | str:
    """The data files ``commits`` (version -> its actions, in any order) added, or why they do not say.

    Only appends are read this way: a commit that removed or rewrote records (``remove`` with
    ``dataChange``), changed the schema or protocol, or added a file with a deletion vector
    makes the answer a reason (a string) to read the whole source. A compaction's files
    (``dataChange: false``) hold records read before and are left out; a compaction that
    removed a file added since is a reason too (it may be gone by the time it is read).
    """
    added: list[NewFile] = []
    compacted: set[str] = set()
    for version in sorted(commits):
        actions = commits[version]
        operation = next((a["commitInfo"].get("operation", "?") for a in actions if "commitInfo" in a), "a commit")
        for action in actions:
            if "metaData" in action or "protocol" in action:
                return f"version {version} of the source ({operation}) changed its schema, settings or protocol"
            if "remove" in action:
                if action["remove"].get("dataChange", True):
                    return f"version {version} of the source ({operation}) removed or rewrote records"
                compacted.add(action["remove"]["path"])
            if "add" in action and action["add"].get("dataChange", True):
                add = action["add"]
                if add.get("deletionVector"):
                    return f"version {version} of the source ({operation}) added a file with deleted rows"
                values = add.get("partitionValues") or {}
                added.append(NewFile(add["path"], tuple(sorted(values.items()))))
    if compacted & {f.path for f in added}:
        return "a compaction (OPTIMIZE) since the last run rewrote files it added"
    return added


def target_changed(history: Iterable[Mapping[str, Any]]) -> str | None:
    """Why the target's commits (``DESCRIBE HISTORY`` rows) since the mark need the whole source, if
    they do: any that may have removed or changed records (None: only appends and compactions)."""
    for row in history:
        op = str(row.get("operation"))
        params = row.get("operationParameters") or {}
        metrics = row.get("operationMetrics") or {}
        removed = any(int(metrics.get(k) or 0) for k in ("numTargetRowsDeleted", "numTargetRowsUpdated"))
        overwrite = op == "WRITE" and str(params.get("mode", "")).lower() not in ("append", "")
        if op not in _APPENDING or removed or overwrite:
            return f"the target changed since the last run (version {row.get('version')}: {op})"
    return None


def stages_fingerprint(stages: Sequence[Any], target: Any) -> str:
    """A fingerprint of what decides a record's outcome: each stage as built (its type and every
    field, the source of a user's Python function's module) and the target's config.

    Stable across processes (no object address, no set order, no hash seed): a run in a new
    process over unchanged stages gets the same fingerprint, so it reads only what is new.
    """
    digest = hashlib.sha256(json.dumps(_described(target), sort_keys=True).encode())
    for stage in stages:
        digest.update(json.dumps(_described(stage), sort_keys=True).encode())
    return digest.hexdigest()[:32]


def _described(value: Any, depth: int = 0) -> Any:
    """``value`` as JSON-able data that is the same in every process (see :func:`stages_fingerprint`)."""
    if depth > 12:
        return type(value).__qualname__
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, Enum):
        return str(value.value)
    if isinstance(value, bytes):
        return value.hex()
    if isinstance(value, Mapping):
        return sorted(([str(k), _described(v, depth + 1)] for k, v in value.items()), key=lambda kv: kv[0])
    if isinstance(value, set | frozenset):
        return sorted(json.dumps(_described(v, depth + 1), sort_keys=True) for v in value)
    if isinstance(value, list | tuple):
        return [_described(v, depth + 1) for v in value]
    if isinstance(value, DataType):
        return value.json()
    if is_dataclass(value) and not isinstance(value, type):
        named = {f.name: _described(getattr(value, f.name), depth + 1) for f in fields(value)}
        return [type(value).__qualname__, named]
    if callable(value) and hasattr(value, "__code__"):
        try:
            module = inspect.getmodule(value)
            return [getattr(value, "__qualname__", "?"), inspect.getsource(module if module is not None else value)]
        except (OSError, TypeError):  # no source to read (a notebook's closure): its code's bytes
            return [getattr(value, "__qualname__", "?"), value.__code__.co_code.hex()]
    if hasattr(value, "__dict__"):
        return [type(value).__qualname__, _described(vars(value), depth + 1)]
    return type(value).__qualname__


def _fingerprint(plan: Plan) -> str:
    return stages_fingerprint(plan.stages, plan.config.redacted().get("target"))


def _detail(spark: SparkSession, name: str) -> Any:
    row = spark.sql(f"DESCRIBE DETAIL {table_ref(name)}").first()
    assert row is not None
    return row


def plan_read(plan: Plan, *, full: bool = False) -> SourceRead:
    """What this batch run reads of its Delta source (see the module doc).

    Raises:
        SourceError: the source cannot be read (naming the key to check). A failure to read the
            target or the quarantine table is raised as Spark raised it (the caller's storage
            fault line names the table).
    """
    spark, config = plan.spark, plan.config
    name = config.source.path or config.source.table or ""
    try:
        detail = _detail(spark, name)
        version = _version(spark, name)
        whole = _read_version(spark, name, version)
    except AnalysisException as exc:
        key = "source.path" if config.source.path else "source.table"
        raise SourceError(
            f"source {config.source.location} could not be read: {describe_failure(exc)} — check {key} "
            "(an existing Delta table the job may read)"
        ) from exc

    source_id, stages = str(detail["id"]), _fingerprint(plan)
    mark = None if full else _mark(plan)

    def everything(why: str) -> SourceRead:
        return SourceRead(
            whole, version, None, f"source: read whole (version {version}): {why}",
            source_id=source_id, mark=mark, stages=stages,
        )

    if full:
        return everything("quarantine run --full")
    mapping = (detail["properties"] or {}).get("delta.columnMapping.mode", "none")
    reason = whole_read_reason(
        mark, _facts(plan, mark, source_id, mapping, stages) if mark is not None else _NO_FACTS,
        lambda: _open_retriable(spark, plan.quarantine_table, config.pipeline),
    )
    if reason is not None:
        return everything(reason)
    assert mark is not None
    if version == mark.version:
        return SourceRead(
            whole.limit(0), version, version, f"source: nothing new since version {version}", empty=True,
            source_id=source_id, mark=mark, stages=stages,
        )
    if not is_path(name):
        # a catalog table's files are its catalog's to read (Unity Catalog refuses path access to a
        # managed table's location): Spark reads it whole, as before, and compares
        return everything("a catalog table is read whole (its data files are read by path only for a "
                          "source given as source.path)")
    files = _files_since(spark, str(detail["location"]), mark.version, version)
    if isinstance(files, str):
        return everything(files)
    if not files:
        return SourceRead(
            whole.limit(0), version, mark.version,
            f"source: nothing new since version {mark.version} (version {version}: no records added)", empty=True,
            source_id=source_id, mark=mark, stages=stages,
        )
    location = str(detail["location"])
    if any(_absolute(location, f.path) is None for f in files):
        return everything("a new file's name holds a character Spark reads as a pattern")
    df = _read_files(spark, location, files, whole.schema, list(detail["partitionColumns"] or []))
    return SourceRead(
        df, version, mark.version,
        f"source: read what versions {mark.version + 1}..{version} added ({len(files)} file(s)); "
        "records before were settled by earlier runs", source_id=source_id, mark=mark, stages=stages,
    )


def plan_parquet_read(plan: Plan, whole: DataFrame, *, full: bool = False) -> SourceRead:
    """What this batch run reads of its Parquet directory, ``whole`` being all of it as Spark
    listed it: the files the last run did not read, or all of them, and why (see the module doc).

    The files listed are ``whole``'s own (:meth:`DataFrame.inputFiles`): the mark records exactly
    the files this run's whole read would read, so a file written while the run runs is read by
    the next one. ``SourceRead.version`` is the count of files listed.
    """
    spark, config = plan.spark, plan.config
    listed = whole.inputFiles()
    stages, encoded = _fingerprint(plan), encode_files(listed)
    mark = None if full else _mark(plan)

    def everything(why: str) -> SourceRead:
        return SourceRead(whole, len(listed), None, f"source: read whole ({len(listed)} file(s)): {why}",
                          source_id=PARQUET_ID, mark=mark, stages=stages, files=encoded)

    if full:
        return everything("quarantine run --full")
    reason = whole_read_reason(
        mark, _facts(plan, mark, PARQUET_ID, "none", stages) if mark is not None else _NO_FACTS,
        lambda: _open_retriable(spark, plan.quarantine_table, config.pipeline),
    )
    if reason is not None:
        return everything(reason)
    assert mark is not None
    new = files_not_read(mark.files, listed)
    if isinstance(new, str):
        return everything(new)
    if not new:
        return SourceRead(whole.limit(0), len(listed), len(listed),
                          f"source: nothing new ({len(listed)} file(s), each read by an earlier run)", empty=True,
                          source_id=PARQUET_ID, mark=mark, stages=stages, files=encoded)
    paths = [_absolute("", name) for name in new]
    if any(path is None for path in paths):
        return everything("a new file's name holds a character Spark reads as a pattern")
    df = spark.read.schema(whole.schema).option("basePath", config.source.path or "").parquet(*map(str, paths))
    return SourceRead(
        df, len(listed), len(listed) - len(new),
        f"source: read the {len(new)} file(s) not read before (of {len(listed)}); records before were settled "
        "by earlier runs", source_id=PARQUET_ID, mark=mark, stages=stages, files=encoded,
    )


@dataclass(frozen=True)
class ReadFacts:
    """What decides whether a run reads only what is new, as either engine finds it (Spark's
    ``DESCRIBE``, or delta-rs without a JVM: :mod:`quarantine.ops.nothing_new`).

    Attributes:
        source: the configured source (``source.location``).
        source_id: the source's Delta table id.
        column_mapping: the source's ``delta.columnMapping.mode``.
        stages: the stages' fingerprint (:func:`stages_fingerprint`).
        quarantine_id: the quarantine table's id; None: there is none.
        target_history: the target's commits since the mark's target version (history rows).
    """

    source: str
    source_id: str
    column_mapping: str
    stages: str
    quarantine_id: str | None
    target_history: tuple[Mapping[str, Any], ...]


#: facts never read (no mark: the first reason decides)
_NO_FACTS = ReadFacts(source="", source_id="", column_mapping="none", stages="", quarantine_id=None, target_history=())


def whole_read_reason(mark: ReadMark | None, facts: ReadFacts, open_retriable: Callable[[], bool]) -> str | None:
    """Why a run must read its whole source (see the module doc), or None: what is new will do.

    ``open_retriable`` (whether a record open in quarantine failed with a retriable error) is
    asked last, only when nothing else decided (it reads the quarantine table).
    """
    if mark is None:
        return "no earlier run's read is recorded on the target (a first run, or a new target)"
    if mark.source != facts.source or mark.source_id != facts.source_id:
        return "the source is not the one the last run read (recreated, or another table)"
    if facts.column_mapping != "none":
        return f"the source maps its columns (delta.columnMapping.mode: {facts.column_mapping})"
    if mark.stages != facts.stages:
        return "the stages changed since the last run: records open in quarantine run again"
    if mark.quarantine_id is not None and facts.quarantine_id != mark.quarantine_id:
        return "the quarantine table is not the one the last run wrote (dropped or recreated)"
    changed = target_changed(facts.target_history)
    if changed is not None:
        return changed
    if facts.quarantine_id is not None and open_retriable():
        return "records open in quarantine failed with a retriable error: they run again"
    return None


def _facts(plan: Plan, mark: ReadMark, source_id: str, column_mapping: str, stages: str) -> ReadFacts:
    """:class:`ReadFacts` as Spark finds them."""
    spark = plan.spark
    quarantine = plan.quarantine_table
    q_id = str(_detail(spark, quarantine)["id"]) if table_exists(spark, quarantine) else None
    now = _version(spark, plan.target_table)
    history: tuple[Mapping[str, Any], ...] = ()
    if now > mark.target_version:
        rows = spark.sql(
            f"DESCRIBE HISTORY {table_ref(plan.target_table)} LIMIT {now - mark.target_version}"
        ).select("version", "operation", "operationParameters", "operationMetrics").collect()
        history = tuple(r.asDict() for r in rows if int(r["version"]) > mark.target_version)
    return ReadFacts(
        source=plan.config.source.location, source_id=source_id, column_mapping=column_mapping, stages=stages,
        quarantine_id=q_id, target_history=history,
    )


def _open_retriable(spark: SparkSession, quarantine: str, pipeline: str) -> bool:
    q = read_table(spark, quarantine)
    if RETRIABLE not in q.columns:
        return False
    found = q.where(
        (F.col(PIPELINE) == F.lit(pipeline)) & (F.col(STATUS) == QuarantineStatus.OPEN.value) & F.col(RETRIABLE)
    ).limit(1).collect()
    return bool(found)


def _mark(plan: Plan) -> ReadMark | None:
    if not table_exists(plan.spark, plan.target_table):
        return None
    props = _detail(plan.spark, plan.target_table)["properties"] or {}
    return ReadMark.from_json(props.get(MARK_PREFIX + plan.config.pipeline))


def _version(spark: SparkSession, name: str) -> int:
    row = spark.sql(f"DESCRIBE HISTORY {table_ref(name)} LIMIT 1").select("version").first()
    assert row is not None
    return int(row[0])


def _read_version(spark: SparkSession, name: str, version: int) -> DataFrame:
    reader = spark.read.format("delta").option("versionAsOf", version)
    return reader.load(name) if is_path(name) else reader.table(name)


def _files_since(spark: SparkSession, location: str, since: int, version: int) -> list[NewFile] | str:
    """The files the commits ``since+1 .. version`` of the table at ``location`` added, or why not."""
    log_dir = location.rstrip("/") + "/_delta_log/"
    paths = [f"{log_dir}{v:020d}.json" for v in range(since + 1, version + 1)]
    try:
        text = spark.read.text(paths)  # one column: each line of the commits
        lines = text.select(F.col("_metadata.file_name"), text.columns[0]).collect()
    except AnalysisException:
        return f"the source's log no longer holds its commits since version {since} (log retention)"
    except Exception as exc:  # a log this session may not read by path: the whole table instead, said
        # (by the error's class: its message may name a credential in a storage URL)
        return f"the source's log could not be read by path ({type(exc).__name__})"
    commits: dict[int, list[Mapping[str, Any]]] = {v: [] for v in range(since + 1, version + 1)}
    for file_name, line in lines:
        commits[int(str(file_name).split(".")[0])].append(json.loads(line))
    return new_files(commits)


def _absolute(location: str, path: str) -> str | None:
    """A data file's path to read (None: one Spark would take as a glob)."""
    absolute = "://" in path or path.startswith("/")
    full = unquote(path) if absolute else location.rstrip("/") + "/" + unquote(path)
    return None if _GLOB & set(full.split(":", 1)[-1]) else full


def _read_files(
    spark: SparkSession, location: str, files: Sequence[NewFile], schema: StructType, partitioned: Sequence[str]
) -> DataFrame:
    """The records ``files`` hold, in ``schema`` (partition columns from each file's values)."""
    data = StructType([f for f in schema.fields if f.name not in partitioned])
    groups: dict[tuple[tuple[str, str | None], ...], list[str]] = {}
    for f in files:
        path = _absolute(location, f.path)
        assert path is not None  # plan_read reads such a source whole
        groups.setdefault(f.partition, []).append(path)
    frames = []
    for values, paths in groups.items():
        df = spark.read.schema(data).parquet(*paths)
        given = dict(values)
        for col in partitioned:
            df = df.withColumn(col, F.lit(given.get(col)).cast(schema[col].dataType))
        frames.append(df.select(*schema.fieldNames()))
    out = frames[0]
    for df in frames[1:]:
        out = out.unionByName(df)
    return out


def record_read(plan: Plan, read: SourceRead) -> None:
    """Record on the target how far this run read (after all its writes committed): a table
    property commit, made only when it changes (see the module doc). A run that read nothing
    new wrote nothing: its read is the one recorded already, and nothing is looked up."""
    spark, config = plan.spark, plan.config
    if (read.empty and read.since == read.version) or not table_exists(spark, plan.target_table):
        return
    source_id = read.source_id or str(_detail(spark, config.source.path or config.source.table or "")["id"])
    quarantine = plan.quarantine_table
    mark = ReadMark(
        source=config.source.location, source_id=source_id, version=read.version,
        stages=read.stages or _fingerprint(plan),
        quarantine_id=str(_detail(spark, quarantine)["id"]) if table_exists(spark, quarantine) else None,
        target_version=_version(spark, plan.target_table), files=read.files,
    )
    if (read.mark if read.mark is not None or read.since is not None else _mark(plan)) == mark:
        return
    key = MARK_PREFIX + config.pipeline
    spark.sql(
        f"ALTER TABLE {table_ref(plan.target_table)} SET TBLPROPERTIES ({sql_literal(key)} = "
        f"{sql_literal(mark.to_json())})"
    )
