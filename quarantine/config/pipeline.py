"""A whole pipeline's config: the ``stages:`` list (a StageSpec per entry) and PipelineConfig."""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache
from types import MappingProxyType
from typing import Annotated, Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    TypeAdapter,
    ValidationError,
    ValidationInfo,
    model_validator,
)

from quarantine.config.alerts import AlertsConfig
from quarantine.config.choices import WrittenBy
from quarantine.config.sections import (
    TRIGGER,
    ErrorsConfig,
    MetricsConfig,
    MlflowConfig,
    Section,
    SourceConfig,
    SparkConfig,
    TargetConfig,
    TriggerConfig,
)
from quarantine.errorhandling.fail_on import FailOnConfig
from quarantine.errors import ConfigError
from quarantine.redaction import collect_secrets, redact
from quarantine.secret_reference import SecretReference
from quarantine.secret_refs import resolved_secrets
from quarantine.stage import StageType
from quarantine.stages import STAGE_TYPES, stage_declaration
from quarantine.values.types import (
    IDENTIFIER,
    OPTIONAL_TEXT,
    TEXT,
    Check,
    config_error,
    fail,
    integer,
    text,
)

__all__ = [
    "PipelineConfig",
    "StageSpec",
    "stages_validator",
]


def _options(value: Any) -> Mapping[str, Any]:
    if value is None:
        return MappingProxyType({})
    if not isinstance(value, Mapping):
        raise fail("a mapping")
    return MappingProxyType(dict(value))


_OPTIONS = Check(_options, {"type": "object"}, to_plain=dict)


class StageSpec(Section):
    """One stage as declared in YAML: a built-in ``type`` with options.

    Built by :func:`parse_config` from the ``stages:`` list, which checks the type,
    the options against the type's options model in :data:`quarantine.stages.STAGE_TYPES`
    (their cross-field rules too) and keeps that model (:attr:`validated`), which the type's
    factory is given; what needs Spark or user code the factory checks when it builds the
    stage. Built in Python
    (``StageSpec("parse", "json", None, {"schema": …}, 1)``, positional or by
    name), only the fields are checked, and the options when the stage is built.
    """

    _key = "stages"

    name: Annotated[str, IDENTIFIER]
    """The stage's name; also the name of its result column."""
    type: Annotated[str, TEXT]
    """A built-in stage type (see quarantine.stages)."""
    input: Annotated[str | None, OPTIONAL_TEXT] = None
    """What the stage reads: a source column, or an earlier stage's name (its result); default the previous
    stage, or value for the first."""
    options: Annotated[Mapping[str, Any], _OPTIONS] = Field(default_factory=lambda: MappingProxyType({}))
    """The type's options as written (paths resolved)."""
    index: Annotated[int, integer(0)] = 0
    """Position in stages (for error messages: stages[2].options.schema)."""
    _validated: BaseModel | None = PrivateAttr(None)

    @property
    def validated(self) -> BaseModel | None:
        """The options as the type's options model validated them when the config was loaded (what
        the factory is given); None for a StageSpec built in Python, whose options are validated
        when the stage is built."""
        return self._validated

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        """``StageSpec(name, type, input, options, index)``, positionally or by name."""
        fields = ("name", "type", "input", "options", "index")
        if len(args) > len(fields):
            raise ConfigError("stages", args, f"at most {len(fields)} values: {', '.join(fields)}")
        kwargs.update(zip(fields, args, strict=False))
        super().__init__(**kwargs)

    def key(self, option: str | None = None) -> str:
        """The config path of this stage or one of its options, for error messages."""
        base = f"stages[{self.index}]"
        return f"{base}.{option}" if option else base


#: ``stages:`` as written, for the built-in types (the JSON Schema shows the types registered when it is made)
_STAGES_DECLARED: Any = Annotated[list[stage_declaration()], Field(min_length=1)]  # type: ignore[misc]


@cache
def _stages_adapter(types: tuple[StageType, ...]) -> TypeAdapter[list[Any]]:
    """A validator of ``stages:`` for the stage types registered now (``types``, in order; keyed by
    the types themselves, so that a type replaced under the same name gets a new validator)."""
    declared: Any = Annotated[list[stage_declaration()], Field(min_length=1)]  # type: ignore[misc]
    return TypeAdapter(declared)


def stages_validator() -> TypeAdapter[list[Any]]:
    return _stages_adapter(tuple(STAGE_TYPES.values()))


def _stage_specs(value: Any, info: ValidationInfo) -> tuple[StageSpec, ...]:
    """``stages:`` as written → StageSpecs: types, option names and shapes checked, paths resolved."""
    if isinstance(value, list | tuple) and value and all(isinstance(s, StageSpec) for s in value):
        return tuple(value)
    if not isinstance(value, list) or not value:
        raise ConfigError("stages", value, "a non-empty list of stages")
    try:
        declared = stages_validator().validate_python(value, context=info.context)
    except ValidationError as exc:
        raise config_error(exc, _stages_schema(), "stages") from None
    specs: list[StageSpec] = []
    seen: set[str] = set()
    for i, (raw, stage) in enumerate(zip(value, declared, strict=True)):
        if stage.name in seen:
            raise ConfigError(f"stages[{i}].name", stage.name, "a name not used by another stage")
        seen.add(stage.name)
        options = dict(raw.get("options") or {})
        opts = getattr(stage, "options", None)
        for option in getattr(type(opts), "paths", ()):
            value = getattr(opts, option)  # a mapping of options (a registry's) is kept as a mapping
            options[option] = value.model_dump(exclude_none=True) if isinstance(value, BaseModel) else value
        spec = StageSpec(name=stage.name, type=stage.type, input=stage.input, options=options, index=i)
        spec._validated = opts
        specs.append(spec)
    return tuple(specs)


def _stages_schema() -> dict[str, Any]:
    """The JSON Schema of ``stages:`` for the stage types registered now (with its ``$defs``)."""
    return _stages_json_schema(tuple(STAGE_TYPES.values()))


@cache
def _stages_json_schema(types: tuple[StageType, ...]) -> dict[str, Any]:
    return stages_validator().json_schema(by_alias=True)


_STAGE_LIST = Check(_stage_specs, {}, takes_info=True, input_type=_STAGES_DECLARED)


class PipelineConfig(Section):
    """A whole pipeline: source → stages → target + quarantine, and how errors behave.

    Build with :func:`load_config` / :func:`parse_config`; the object is frozen
    and already validated. :attr:`raw` keeps the YAML as loaded, for
    :meth:`redacted` (MLflow params, logs).
    """

    model_config = ConfigDict(json_schema_extra={"examples": [{
        "pipeline": "orders",
        "source": {"format": "delta", "table": "main.raw.orders"},
        "target": {"table": "main.sales.orders"},
        "stages": [
            {"name": "decode", "type": "decode_utf8"},
            {"name": "parse_order", "type": "json",
             "options": {"schema": "order_id STRING, amount DOUBLE, currency STRING", "required": ["order_id"]}},
            {"name": "check_order", "type": "checks", "options": {"rules": [
                {"column": "amount", "check": "range", "min": 0, "max": 10_000},
                {"column": "currency", "check": "in_set", "values": ["EUR", "USD"]},
            ]}},
        ],
        "errors": {"tolerance": "all", "deadletterqueue.table.name": "main.ops.quarantine"},
        "metrics": {"table": "main.ops.quarantine_metrics"},
    }]})

    pipeline: Annotated[
        str, text("a name of letters, digits, _ and -", pattern=r"[A-Za-z_\-][A-Za-z0-9_\-]*")
    ] = Field(examples=["orders"])
    """The pipeline's name: letters, digits, _ and -; it keys the quarantine rows."""
    source: SourceConfig
    """Where records come from."""
    target: TargetConfig
    """Where good rows go."""
    stages: Annotated[tuple[StageSpec, ...], _STAGE_LIST] = Field(
        examples=[[{"name": "decode", "type": "decode_utf8"}]]
    )
    """The stages, in order; each adds a result column named after it."""
    errors: ErrorsConfig
    """Kafka Connect's error-handling keys, flat (tolerance, retry.timeout, deadletterqueue.table.name…)."""
    trigger: Annotated[TriggerConfig, TRIGGER] = Field(
        default_factory=TriggerConfig,
        examples=[{"processing_time": "30 seconds"}],
        json_schema_extra={"default": "available_now"},
    )
    """Streaming trigger: available_now (drain and stop) or {processing_time: '10 seconds'}."""
    metrics: MetricsConfig = Field(default_factory=MetricsConfig)
    """The Delta metrics table."""
    mlflow: MlflowConfig = Field(default_factory=MlflowConfig)
    """MLflow tracking."""
    spark: SparkConfig = Field(default_factory=SparkConfig)
    """Local Spark session settings."""
    alerts: AlertsConfig = Field(default_factory=AlertsConfig)
    """Alerts: the channels (webhook, Slack, Teams, email) told of breaches, failed runs, stuck records and error
    rates."""
    fail_on: FailOnConfig = Field(default_factory=FailOnConfig)
    """Conditions over the run's own metrics that end it non-zero (exit code 4) once its writes committed."""

    _raw: Mapping[str, Any] = PrivateAttr(default_factory=lambda: MappingProxyType({}))
    _base_dir: str = PrivateAttr(default=".")
    _file: str | None = PrivateAttr(default=None)

    @property
    def spark_conf(self) -> Mapping[str, str]:
        """``spark.conf``: Spark settings for a local session."""
        return self.spark.conf

    @property
    def raw(self) -> Mapping[str, Any]:
        """The config as loaded (the flat ``errors.*`` keys folded into ``errors``)."""
        return self._raw

    @property
    def base_dir(self) -> str:
        """The folder relative paths of the config were read from (the config file's)."""
        return self._base_dir

    @property
    def file(self) -> str | None:
        """The YAML file the config was loaded from (:func:`~quarantine.config.load_config`), absolute;
        None for a config built from a mapping. Commands a person is told to run name it (``--conf``)."""
        return self._file

    @model_validator(mode="before")
    @classmethod
    def _as_written(cls, data: Any) -> Any:
        """An empty section (``metrics:`` with every key commented out) is ``{}``; the flat
        ``errors.tolerance: all`` at the top level is ``errors: {tolerance: all}``."""
        if not isinstance(data, Mapping):
            return data
        out = {k: v for k, v in data.items() if not (isinstance(k, str) and k.startswith("errors."))}
        for section in _SECTIONS:
            if section in out and out[section] is None:
                out[section] = {}
        flat = {k[len("errors."):]: v for k, v in data.items() if isinstance(k, str) and k.startswith("errors.")}
        nested = out.get("errors", {})
        out["errors"] = {**flat, **nested} if isinstance(nested, Mapping) else nested
        return out

    @model_validator(mode="after")
    def _consistent(self) -> PipelineConfig:
        self._check_tables_differ()
        brokers = self.errors.dlq_topic_bootstrap_servers or self.source.bootstrap_servers
        if self.errors.dlq_topic_name and not brokers:
            raise ConfigError(
                "errors.deadletterqueue.topic.bootstrap.servers", None,
                "the DLQ topic's brokers (host:port,…), unless the source is Kafka (its bootstrap.servers are used)",
            )
        if self.source.streaming and not self.target.checkpoint and self.target.written_by is WrittenBy.JOB:
            raise ConfigError("target.checkpoint", None, "a checkpoint location for a streaming source")
        if not self.source.streaming and not self.target.source_columns:
            raise ConfigError(
                "target.source_columns", False,
                "true for a batch source (re-runs de-duplicate the target on the source coordinates)",
            )
        return self

    def tables(self) -> dict[str, str]:
        """Every table the pipeline reads or writes, by the config key that names it."""
        dlq = self.errors.dlq_table_name
        named = {
            "source.path": self.source.path,
            "source.table": self.source.table,
            "target.table": self.target.table,
            "errors.deadletterqueue.table.name": dlq,
            "metrics.table": self.metrics.table,
        }
        if self.errors.tolerance_rate_limit >= 0:
            named["errors.deadletterqueue.table.name (its _tolerance window table)"] = dlq.rstrip("/") + "_tolerance"
        return {k: v for k, v in named.items() if v}

    def _check_tables_differ(self) -> None:
        """Every table is a different table: the first pair that is the same is a ConfigError.

        Names compare case-insensitively and without a trailing ``/`` (paths) — the
        same rule Delta and Unity Catalog apply to identifiers — so ``/data/t/`` and
        ``/DATA/t`` collide, as do ``main.raw.Orders`` and ``main.raw.orders``.
        """
        seen: dict[str, str] = {}
        for key, name in self.tables().items():
            other = seen.get(_norm(name))
            if other is not None:
                if key.startswith("errors.") and other.startswith("source."):
                    allowed = f"a table other than {other} (the quarantine table must never be the source)"
                else:
                    allowed = f"a table other than {other} ({name!r} is named by both)"
                raise ConfigError(key, name, allowed)
            seen[_norm(name)] = key

    def redacted(self) -> dict[str, Any]:
        """The config as loaded, with every credential replaced by ``[redacted]``."""
        out: dict[str, Any] = redact(dict(self.raw))
        return out

    def secrets(self) -> tuple[str, ...]:
        """Every configured secret value, to scrub from logs, params and messages: those written in the
        config (or read from the environment), and those this process read from a secret scope
        (:func:`quarantine.secret_refs.resolved_secrets`: an alert channel's webhook URL, an SMTP password)."""
        named = (s for s in collect_secrets(dict(self.raw)) if not _is_reference(s))
        return tuple(dict.fromkeys([*named, *resolved_secrets()]))


def _is_reference(text: str) -> bool:
    """Whether ``text`` says where a secret is kept (``env:NAME``, ``{{secrets/<scope>/<key>}}``), not a secret:
    masking the name hides nothing (the value read through it is masked as :func:`resolved_secrets`)."""
    try:
        SecretReference.parse(text)
    except ValueError:
        return False
    return True


#: Top-level keys holding a mapping of settings (``null`` is read as an empty one).


_SECTIONS = ("source", "target", "errors", "metrics", "mlflow", "spark", "alerts", "fail_on")


def _norm(name: str | None) -> str:
    return (name or "").rstrip("/").lower()
