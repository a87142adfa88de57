"""The base of every config section: frozen, strict, keys by their YAML names, errors as one ConfigError."""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache
from types import MappingProxyType
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, ValidationError, ValidationInfo, model_validator
from pydantic.functional_validators import ModelWrapValidatorHandler

from quarantine.errors import ConfigError
from quarantine.values.types import config_error, unknown_key

__all__ = ["YAML_CONTEXT", "Section", "schema_of"]


class Section(BaseModel):
    """A part of the config: frozen, no unknown keys, every failure a ConfigError.

    ``_key`` is the section's key in the YAML (``errors``, ``source``…): errors
    found inside it are named under it, whether it is validated alone
    (``ErrorsConfig.from_mapping``), built in Python, or as part of a config.
    """

    model_config = ConfigDict(
        frozen=True,
        extra="forbid",
        populate_by_name=True,  # attribute names in Python; YAML is held to the aliases (below)
        use_attribute_docstrings=True,
    )
    _key: ClassVar[str] = ""

    @model_validator(mode="before")
    @classmethod
    def _yaml_names_only(cls, data: Any, info: ValidationInfo) -> Any:
        """YAML (validated with ``context={"yaml": True}``) names a key by its alias only."""
        if isinstance(data, Mapping) and isinstance(info.context, Mapping) and info.context.get("yaml"):
            attributes = {name for name, f in cls.model_fields.items() if f.alias and f.alias != name}
            for k in data:
                if k in attributes:
                    known = [f.alias or name for name, f in cls.model_fields.items()]
                    where = f"{cls._key}.{k}" if cls._key else str(k)
                    raise ConfigError(where, data[k], unknown_key(where, str(k), known))
        return data

    @model_validator(mode="wrap")
    @classmethod
    def _errors_are_config_errors(cls, data: Any, handler: ModelWrapValidatorHandler[Any]) -> Any:
        try:
            return handler(data)
        except ValidationError as exc:
            raise config_error(exc, schema_of(cls), cls._key) from None


@cache
def schema_of(model: type[BaseModel]) -> dict[str, Any]:
    """A model's JSON Schema by alias (for naming the known keys in an error)."""
    return model.model_json_schema(by_alias=True)


#: The validation context of a config as written (keys by their YAML names only).
YAML_CONTEXT: Mapping[str, Any] = MappingProxyType({"yaml": True})
