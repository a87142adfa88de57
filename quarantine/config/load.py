"""Reading a config: YAML (with ``${env:NAME}`` references and ``--set`` overrides) to a PipelineConfig."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any

import yaml

from quarantine.config.pipeline import PipelineConfig
from quarantine.config.sections import YAML_CONTEXT
from quarantine.errors import ConfigError, ConfigFileError
from quarantine.values.types import (
    is_relative_path,
)

__all__ = [
    "load_config",
    "parse_config",
]


def parse_config(raw: Mapping[str, Any], *, base_dir: str | Path = ".") -> PipelineConfig:
    """Validate a config mapping (as loaded from YAML) into a :class:`PipelineConfig`.

    Args:
        raw: the config; only the YAML key names are accepted (``retry.timeout``,
            not ``retry_timeout_ms``).
        base_dir: the folder that relative paths are read from: every path-like
            value (``source.path``, ``target.checkpoint``, an expectation suite; a
            table key when it holds a ``/``) is made absolute against it. Table names
            (``catalog.schema.table``), URIs and absolute paths stay as written.

    Every ``${env:NAME}`` in a string value is replaced by that environment
    variable first (Kafka Connect's ``EnvVarConfigProvider`` syntax): how a secret
    reaches a config without being written in it.

    Raises:
        ConfigError: naming the first bad key, its value and what is allowed; an
            expectation suite that does not exist is one (its resolved path named);
            so is an ``${env:NAME}`` whose variable is not set.
    """
    if not isinstance(raw, Mapping):
        raise ConfigError("", raw, "a mapping")
    raw = _from_environment(raw, "")
    folder = os.path.abspath(base_dir)
    config = PipelineConfig.model_validate(dict(raw), context={**YAML_CONTEXT, "base_dir": folder})
    as_loaded = dict(raw)
    errors = as_loaded.get("errors")
    flat = {k[len("errors."):]: as_loaded.pop(k) for k in list(as_loaded) if str(k).startswith("errors.")}
    as_loaded["errors"] = {**flat, **(errors if isinstance(errors, Mapping) else {})}
    config._raw = MappingProxyType(as_loaded)
    config._base_dir = folder
    return config


#: ``${env:NAME}``: Kafka Connect's EnvVarConfigProvider syntax (KIP-887).
_ENV_REFERENCE = re.compile(r"\$\{env:([A-Za-z_][A-Za-z0-9_]*)\}")


def _from_environment(node: Any, key: str) -> Any:
    """``node`` with every ``${env:NAME}`` in its strings replaced by the variable's value.

    This is how a secret reaches a config without being written in it: on Databricks
    a job cluster's environment variables may be secret references
    (``{{secrets/<scope>/<key>}}``), which the cluster resolves when it starts.

    Raises:
        ConfigError: a referenced variable is not set; it names the key and the variable.
    """
    if isinstance(node, str):
        def value(match: re.Match[str]) -> str:
            name = match.group(1)
            if name not in os.environ:
                raise ConfigError(key, node, f"the environment variable {name} to be set (named as ${{env:{name}}})")
            return os.environ[name]

        return _ENV_REFERENCE.sub(value, node)
    if isinstance(node, Mapping):
        return {k: _from_environment(v, f"{key}.{k}" if key else str(k)) for k, v in node.items()}
    if isinstance(node, list | tuple):
        return [_from_environment(v, f"{key}[{i}]") for i, v in enumerate(node)]
    return node


#: Keys an override may set whose value is a path: a relative one is read from the working directory.
_PATH_KEYS = {
    "source.path": True,
    "target.checkpoint": True,
    "target.table": False,
    "metrics.table": False,
    "errors.deadletterqueue.table.name": False,
}


def load_config(path: str | Path, overrides: Mapping[str, Any] | None = None) -> PipelineConfig:
    """Load and validate a YAML pipeline config.

    Relative paths written in the file are read from the file's folder, wherever
    it is loaded from (see :func:`parse_config`); relative paths given as
    ``overrides`` are read from the working directory, like any path typed at a
    prompt.

    Args:
        path: the YAML file.
        overrides: dotted keys to set before validation (``{"source.path": ...}``),
            as the CLI's ``--set key=value`` and bundle job parameters do.

    Raises:
        ConfigError: the file is missing or not YAML, or a key/value is bad.
    """
    p = Path(path)
    if not p.is_file():
        raise ConfigFileError(str(path), "is not there: no such file" + ("" if not p.exists() else " (a folder)"))
    try:
        with p.open(encoding="utf-8") as stream:
            raw = yaml.safe_load(stream)
    except yaml.YAMLError as exc:
        raise ConfigFileError(str(path), f"is not valid YAML: {_yaml_problem(exc)}") from None
    if not isinstance(raw, Mapping):
        top = type(raw).__name__
        raise ConfigFileError(str(path), f"needs a YAML mapping at its top level (pipeline:, source:, …); got {top}")
    raw = dict(raw)
    for dotted, value in (overrides or {}).items():
        bare = _PATH_KEYS.get(dotted)
        if bare is not None and isinstance(value, str) and is_relative_path(value, bare_names=bare):
            value = os.path.abspath(value)
        _set_dotted(raw, dotted, value)
    config = parse_config(raw, base_dir=p.parent)
    config._file = str(p.resolve())
    return config


def _yaml_problem(exc: yaml.YAMLError) -> str:
    """YAML's complaint as one line: where it stopped, what it expected, and what it was reading.

    ``line 3, column 1: expected ',' or '}', but got '<stream end>' (while parsing a flow
    mapping from line 2, column 9)``; lines and columns count from 1, as editors do.
    """
    if not isinstance(exc, yaml.MarkedYAMLError) or exc.problem_mark is None:
        return " ".join(str(exc).split())
    mark = exc.problem_mark
    said = f"line {mark.line + 1}, column {mark.column + 1}: {exc.problem}"
    if exc.context:
        start = exc.context_mark
        where = f" from line {start.line + 1}, column {start.column + 1}" if start is not None else ""
        said += f" ({exc.context}{where})"
    return said


def _set_dotted(raw: dict[str, Any], dotted: str, value: Any) -> None:
    """Set ``a.b.c`` in nested dicts; ``errors.x.y`` stays flat under ``errors``."""
    head, _, rest = dotted.partition(".")
    if head == "errors":
        raw.setdefault("errors", {})
        raw["errors"] = dict(raw["errors"] or {})
        raw["errors"][rest] = value
        return
    if not rest:
        raw[head] = value
        return
    node = dict(raw.get(head) or {})
    # source/target keys may themselves be dotted (bootstrap.servers): try the whole rest first
    if rest in node or (head in ("source",) and rest in {
        "bootstrap.servers", "topic.pattern", "starting.offsets", "include.headers", "max.offsets.per.trigger"
    }):
        node[rest] = value
    else:
        _set_dotted(node, rest, value)
    raw[head] = node


