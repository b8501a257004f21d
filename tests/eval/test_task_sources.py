"""Task-source plugins over trees built from our own example tasks (KernelBench is not vendored)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from cuda_agent.errors import ConfigError
from cuda_agent.plugin_manager import PluginManager
from cuda_agent.schemas.task import code_hash
from cuda_agent.specs import parse_tasks_spec

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples" / "tasks"


@pytest.fixture(scope="module")
def pm():
    return PluginManager(load_entrypoints=False)


@pytest.fixture(scope="module")
def example_files():
    files = sorted(p for p in EXAMPLES.glob("*.py") if not p.name.startswith("_"))
    assert len(files) >= 3, "examples/tasks must hold a few task files"
    return files


def tasks_of(pm, spec: str):
    s = parse_tasks_spec(spec, set(pm.registry.names("data_source")))
    return list(pm.registry.build("data_source", s.name, s.config()).iter_tasks())


@pytest.fixture(scope="module")
def kernelbench_tree(tmp_path_factory, example_files):
    root = tmp_path_factory.mktemp("kb")
    for level in (1, 2):
        d = root / "KernelBench" / f"level{level}"
        d.mkdir(parents=True)
        for i, f in enumerate(example_files, start=1):
            shutil.copy(f, d / f"{i}_{f.stem}.py")
    (root / "KernelBench" / "level4").mkdir()
    return root


def test_kernelbench_levels_and_ids(pm, kernelbench_tree, example_files):
    tasks = tasks_of(pm, f"kernelbench:{kernelbench_tree}?levels=1,2&ids=1-2")
    assert [t.id for t in tasks] == [
        f"kernelbench/level1/1_{example_files[0].stem}", f"kernelbench/level1/2_{example_files[1].stem}",
        f"kernelbench/level2/1_{example_files[0].stem}", f"kernelbench/level2/2_{example_files[1].stem}",
    ]
    assert [t.level for t in tasks] == [1, 1, 2, 2]
    assert tasks[0].code_hash == code_hash(example_files[0].read_text())
    assert tasks[0].source.startswith("kernelbench:")
    only = tasks_of(pm, f"kernelbench:{kernelbench_tree / 'KernelBench'}?levels=2&ids=3")
    assert [t.id for t in only] == [f"kernelbench/level2/3_{example_files[2].stem}"]


def test_kernelbench_level4_and_bad_input_errors(pm, kernelbench_tree, tmp_path):
    with pytest.raises(ConfigError, match="level 4 .*model downloads"):
        tasks_of(pm, f"kernelbench:{kernelbench_tree}?levels=4")
    with pytest.raises(ConfigError, match="valid levels: 1, 2, 3, 4"):
        tasks_of(pm, f"kernelbench:{kernelbench_tree}?levels=7")
    with pytest.raises(ConfigError, match="not an integer or a range"):
        tasks_of(pm, f"kernelbench:{kernelbench_tree}?ids=a-b")
    with pytest.raises(ConfigError, match="not a KernelBench checkout"):
        tasks_of(pm, f"kernelbench:{tmp_path}")


def test_folder_file_and_bare_path_inference(pm, example_files):
    tasks = tasks_of(pm, str(EXAMPLES))
    assert [t.id for t in tasks] == [f"tasks/{f.stem}" for f in example_files]
    assert all(t.code_hash.startswith("sha256:") for t in tasks)
    named = tasks_of(pm, f"folder:{EXAMPLES}?prefix=examples&level=1")
    assert named[0].id == f"examples/{example_files[0].stem}" and named[0].level == 1
    one = tasks_of(pm, str(example_files[0]))
    assert [t.id for t in one] == [f"file/{example_files[0].stem}"]


def test_jsonl_rows_with_meta_and_errors(pm, tmp_path, example_files):
    path = tmp_path / "synth.jsonl"
    rows = [{"id": f"op{i}", "code": f.read_text(), "level": 2, "ops": ["relu", "gemm"]} for i, f in enumerate(example_files[:2])]
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    tasks = tasks_of(pm, str(path))
    assert [t.id for t in tasks] == ["synth/op0", "synth/op1"]
    assert tasks[0].level == 2 and tasks[0].meta == {"ops": ["relu", "gemm"]}
    assert tasks[1].source == f"{path}#1"
    assert [t.id for t in tasks_of(pm, f"jsonl:{path}?limit=1&offset=1")] == ["synth/op1"]
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"id": "x", "source": "..."}) + "\n")
    with pytest.raises(ConfigError, match="no code in column 'code'; columns: id, source"):
        tasks_of(pm, str(bad))


def test_parquet_without_pyarrow_says_what_to_install(pm, tmp_path):
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        path = tmp_path / "d.parquet"
        path.write_bytes(b"PAR1")
        with pytest.raises(ConfigError, match="needs pyarrow"):
            tasks_of(pm, str(path))
    else:
        pytest.skip("pyarrow is installed here")


def test_workdir_single_and_folder_of_workdirs(pm, tmp_path, example_files):
    for i in range(2):
        d = tmp_path / f"wd{i}"
        d.mkdir()
        shutil.copy(example_files[i], d / "model.py")
    assert [t.id for t in tasks_of(pm, f"workdir:{tmp_path / 'wd0'}")] == ["workdir/wd0"]
    assert [t.id for t in tasks_of(pm, f"workdir:{tmp_path}")] == ["workdir/wd0", "workdir/wd1"]
    with pytest.raises(ConfigError, match="no model.py"):
        tasks_of(pm, f"workdir:{tmp_path / 'wd0' / 'nothing'}")
