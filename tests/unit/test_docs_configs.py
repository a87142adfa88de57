"""The manual's config fragments validate inside the demo's config (issue 37: every block runs).

A page of the manual shows a config section on its own (``mlflow:``, ``metrics:``, an
expectation stage, Kafka credentials from the environment). Each is merged into the demo's
config (``conf/orders_demo.yml``: a mapping merges key by key, a list replaces) and the result
goes through ``quarantine validate`` in a fresh process, as a user's edited config would: a
fragment whose keys or stages drift from the code (a json stage on the raw ``value``, an
option renamed) fails here, naming the block.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.readme import block
from tests.unit.test_cli_validate import _validate

REPO = Path(__file__).resolve().parents[2]
#: The fragments this file runs, by their keys in the manual.
FRAGMENTS = ("kafka-credentials", "expectation-stage", "mlflow-keys", "metrics-table-key", "alerts-channels",
             "fail-on-keys", "encryption-keys")


def _merge(base: Any, fragment: Any) -> Any:
    """``fragment`` over ``base``: mappings key by key, anything else replaced."""
    if isinstance(base, dict) and isinstance(fragment, dict):
        return {**base, **{k: _merge(base.get(k), v) for k, v in fragment.items()}}
    return fragment


@pytest.mark.parametrize("key", FRAGMENTS)
def test_a_config_fragment_of_the_manual_validates_in_the_demo_config(
    key: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    base = yaml.safe_load((REPO / "conf" / "orders_demo.yml").read_text(encoding="utf-8"))
    fragment = yaml.safe_load(block(key).body)
    merged = _merge(base, fragment)
    assert isinstance(fragment, dict) and merged != base, key
    conf = tmp_path / "conf" / "pipeline.yml"
    shutil.copytree(REPO / "conf" / "expectations", conf.parent / "expectations")
    conf.write_text(yaml.safe_dump(merged, sort_keys=False), encoding="utf-8")
    for name in ("KAFKA_SASL_USERNAME", "KAFKA_SASL_PASSWORD"):  # what ${env:…} reads
        monkeypatch.setenv(name, f"a-{name.lower()}")
    for name in ("SLACK_WEBHOOK_URL", "OPS_WEBHOOK_URL"):  # the alert channels' webhooks
        monkeypatch.setenv(name, f"https://hooks.example.com/{name.lower()}")
    proc = _validate(conf)
    assert proc.returncode == 0, f"{block(key).where()}: {proc.stderr}"
    assert "config ok: pipeline orders_demo" in proc.stdout


def test_a_fragment_that_drifted_from_the_code_fails(tmp_path: Path) -> None:
    """What the runner above catches: the same merge with an option the code does not know."""
    fragment = yaml.safe_load(block("mlflow-keys").body)
    fragment["mlflow"]["http_timeout_seconds"] = 5
    merged = _merge({"mlflow": {"enabled": False}}, fragment)
    assert merged["mlflow"]["http_timeout_seconds"] == 5 and merged["mlflow"]["enabled"] is True
    from quarantine.config import load_config
    from quarantine.errors import ConfigError

    with pytest.raises(ConfigError, match=r"mlflow\.http_timeout_seconds"):
        load_config(_demo_with(merged, tmp_path / "pipeline.yml"))


def _demo_with(section: dict[str, Any], path: Path) -> Path:
    """The demo's config with ``section`` merged in and its stages cut to a decode, written to ``path``."""
    base = yaml.safe_load((REPO / "conf" / "orders_demo.yml").read_text(encoding="utf-8"))
    base["stages"] = [{"name": "decode", "type": "decode_utf8"}]
    path.write_text(yaml.safe_dump(_merge(base, section)), encoding="utf-8")
    return path
