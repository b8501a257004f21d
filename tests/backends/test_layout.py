"""The release workspace layout: files, protection, starter model_new.py."""

from __future__ import annotations

import ast

import pytest

from cuda_agent.errors import WorkspaceError
from cuda_agent.harness.layout import PROTECTED_FILES, binding_sources, starter_model_new, write_layout

from .conftest import manifest


@pytest.mark.parametrize("kind", ["cpu", "cuda"])
def test_layout_writes_release_files_and_protects_ours(tmp_path, kind):
    task = manifest("gemm_bias_relu")
    ws = write_layout(tmp_path / "ws", task, kind)
    assert set(ws.list()) == {"model.py", "model_new.py", "binding.cpp", "binding_registry.h"}
    assert (tmp_path / "ws" / "kernels").is_dir()
    assert ws.read("model.py") == task.code
    for rel, text in binding_sources().items():
        assert ws.read(rel) == text
    for rel in PROTECTED_FILES:
        assert ws.is_protected(rel)
        with pytest.raises(WorkspaceError):
            ws.write(rel, "// mine now")
    assert ws.verify_protected() == []
    ws.write("kernels/gemm.cu" if kind == "cuda" else "kernels/gemm.cpp", "// ok")
    assert not ws.is_protected("model_new.py")


def test_protected_file_changed_behind_the_workspace_is_detected(tmp_path):
    ws = write_layout(tmp_path / "ws", manifest("swish"), "cpu")
    (tmp_path / "ws" / "binding.cpp").write_text("// tampered")
    assert ws.verify_protected() == ["binding.cpp"]


def test_layout_refuses_a_non_empty_folder(tmp_path):
    (tmp_path / "ws").mkdir()
    (tmp_path / "ws" / "x.txt").write_text("x")
    with pytest.raises(WorkspaceError, match="not empty"):
        write_layout(tmp_path / "ws", manifest("swish"), "cpu")


def test_starter_model_new_mirrors_model_signatures():
    text = starter_model_new(manifest("conv2d_relu").code, "cuda")
    tree = ast.parse(text)
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef))
    assert cls.name == "ModelNew"
    init = next(n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "__init__")
    fwd = next(n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "forward")
    assert [a.arg for a in init.args.args] == ["self", "in_channels", "out_channels", "kernel_size"]
    assert [a.arg for a in fwd.args.args] == ["self", "x"]
    assert "import cuda_extension" in text and "kernels/<name>.cu" in text


def test_solutions_share_model_new_across_backends():
    from .conftest import EXAMPLE_TASKS, SOLUTIONS

    for name in EXAMPLE_TASKS:
        cpu = (SOLUTIONS / "cpu" / name / "model_new.py").read_text()
        cuda = (SOLUTIONS / "cuda" / name / "model_new.py").read_text()
        assert cpu == cuda, f"model_new.py of {name} differs between backends"
