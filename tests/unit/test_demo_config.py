"""The demo's config and expectation suite ship in the package, so an installed wheel runs the demo."""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from quarantine.cli import _parser
from quarantine.config import load_config
from quarantine.demo.declarative import PROJECT_FILES, TRANSFORMATION
from quarantine.demo.orders import DEMO_CONFIG, write_demo_config

REPO = Path(__file__).resolve().parents[2]

# Where the repository's demo config names a file or table, and what init-demo --out OUT names there:
# paths relative to the config's folder (OUT), so the folder can be moved or copied (issue 54, point 4).
# The MLflow URI is the repository's, MLflow's own (relative to where the command runs).
PATH_KEYS: dict[tuple[str, ...], str] = {
    ("source", "path"): "./source",
    ("target", "table"): "./orders",
    ("errors", "deadletterqueue.table.name"): "./quarantine",
    ("metrics", "table"): "./metrics",
    ("stages", "4", "options", "suite"): "./expectations/orders.json",
}


def _pop(tree: Any, keys: tuple[str, ...]) -> Any:
    *parents, last = keys
    for k in parents:
        tree = tree[int(k)] if isinstance(tree, list) else tree[k]
    return tree.pop(last)


def test_the_demo_config_and_suite_exist_once_and_ship_in_the_package() -> None:
    """The package's demo files are links to the repository's conf/ (a wheel holds their content)."""
    packaged = REPO / "quarantine" / "demo" / "conf"
    for name in ("orders_demo.yml", "expectations/orders.json"):
        assert (packaged / name).is_symlink(), name
        assert (packaged / name).resolve() == (REPO / "conf" / name).resolve(), name
        assert resources.files("quarantine.demo").joinpath("conf", name).read_bytes() == (
            REPO / "conf" / name).read_bytes()


def test_the_written_demo_config_is_the_repositorys_with_every_path_relative_to_out(tmp_path: Path) -> None:
    out = tmp_path / "my demo: 1"  # a space and a colon stay one YAML string
    path = write_demo_config(out)

    assert path == out / DEMO_CONFIG
    written = yaml.safe_load(path.read_text(encoding="utf-8"))
    repo = yaml.safe_load((REPO / "conf" / "orders_demo.yml").read_text(encoding="utf-8"))
    for keys, template in PATH_KEYS.items():
        assert _pop(written, keys) == template, keys
        _pop(repo, keys)
    assert written == repo  # all else as in conf/orders_demo.yml
    assert (out / "expectations" / "orders.json").read_bytes() == (REPO / "conf/expectations/orders.json").read_bytes()


def test_the_written_demo_config_loads_from_any_working_directory(tmp_path: Path, monkeypatch: Any) -> None:
    out = tmp_path / "demo"
    write_demo_config(out)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)

    config = load_config(out / DEMO_CONFIG)

    assert config.source.path == str(out / "source")
    assert config.target.table == str(out / "orders")


def test_the_written_demo_config_names_no_absolute_path_and_moves_with_its_folder(tmp_path: Path) -> None:
    """Issue 54, point 4: init-demo wrote absolute paths, so a copied or moved demo folder
    still read and wrote the old one."""
    write_demo_config(tmp_path / "demo")
    text = (tmp_path / "demo" / DEMO_CONFIG).read_text(encoding="utf-8")
    assert str(tmp_path) not in text
    moved = tmp_path / "moved"
    (tmp_path / "demo").rename(moved)

    config = load_config(moved / DEMO_CONFIG)

    assert config.source.path == str(moved / "source")
    assert config.target.table == str(moved / "orders")
    assert config.errors.dlq_table_name == str(moved / "quarantine")
    assert config.metrics.table == str(moved / "metrics")


def test_init_demo_writes_the_declarative_project_its_files_the_repositorys() -> None:
    """Issue 54, point 3: pipelines/orders is not in the wheel; ``init-demo --format declarative``
    writes it from the package (tests/e2e/test_declarative_pipeline.py runs what it writes)."""
    args = _parser().parse_args(["init-demo", "--format", "declarative", "--out", "pipelines/orders"])
    assert (args.format, args.out) == ("declarative", "pipelines/orders")
    packaged = resources.files("quarantine.demo").joinpath("conf", "declarative")
    project = REPO / "pipelines" / "orders"
    for name in PROJECT_FILES:
        assert packaged.joinpath(name).read_bytes() == (project / name).read_bytes(), name
    assert (project / "transformations" / "orders.py").read_text(encoding="utf-8") == TRANSFORMATION
    made = ("data/", "storage/", "__pycache__/", "transformations/__pycache__/")  # what running it leaves there
    files = {p.relative_to(project).as_posix() for p in project.rglob("*") if p.is_file()}
    assert {f for f in files if not f.startswith(made)} == {*PROJECT_FILES, "transformations/orders.py"}
