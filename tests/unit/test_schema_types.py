"""``quarantine.schema`` names columns without pyspark and builds its Spark types on first read (issue 53)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from quarantine import columns, schema

pytestmark = pytest.mark.unit

_CHILD = """
import json, sys
import quarantine.schema as schema
from quarantine.columns import VALUE, ErrorKind
before = "pyspark" in sys.modules
fields = schema.KAFKA_SOURCE_SCHEMA.fieldNames()
print(json.dumps({"before": before, "after": "pyspark" in sys.modules, "fields": fields}))
"""


def test_importing_schema_imports_no_pyspark_until_a_type_is_read() -> None:
    done = subprocess.run([sys.executable, "-c", _CHILD], capture_output=True, text=True, timeout=120,
                          cwd=Path(__file__).resolve().parents[2], check=True)
    report = json.loads(done.stdout.splitlines()[-1])
    assert report == {"before": False, "after": True, "fields": list(columns.KAFKA_SOURCE_COLUMNS)}


def test_the_types_are_built_once_and_other_names_are_not_attributes() -> None:
    assert schema.QUARANTINE_SCHEMA is schema.QUARANTINE_SCHEMA
    assert schema.result_struct(schema.HEADERS_TYPE)["error"].dataType is schema.ERROR_STRUCT
    assert schema.source_column_type(columns.VALUE).simpleString() == "binary"
    assert not hasattr(schema, "__path__")  # a module, not a package: the import system asks
    with pytest.raises(AttributeError, match="NO_SUCH_SCHEMA"):
        schema.NO_SUCH_SCHEMA  # noqa: B018 - the attribute read is the test
