"""ConfinedWorkspace: confinement, protection, content-addressed snapshots."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from cuda_agent.errors import WorkspaceError
from cuda_agent.harness.workspace import ConfinedWorkspace, read_manifest
from cuda_agent.protocols import Workspace


@pytest.fixture()
def ws(tmp_path: Path) -> ConfinedWorkspace:
    root = tmp_path / "ws"
    root.mkdir()
    (root / "model.py").write_text("class Model: pass\n")
    (root / "model_new.py").write_text("class ModelNew: pass\n")
    return ConfinedWorkspace(root, protected=["model.py"])


def test_satisfies_protocol(ws: ConfinedWorkspace) -> None:
    assert isinstance(ws, Workspace)


def test_read_write_list(ws: ConfinedWorkspace) -> None:
    ws.write("kernels/relu.cu", "__global__ void k() {}\n")
    assert ws.read("kernels/relu.cu").startswith("__global__")
    assert ws.list() == ["kernels/relu.cu", "model.py", "model_new.py"]


@pytest.mark.parametrize("bad", ["../outside.txt", "kernels/../../x", "/etc/passwd", "~/x", ""])
def test_escapes_refused(ws: ConfinedWorkspace, bad: str) -> None:
    with pytest.raises(WorkspaceError):
        ws.write(bad, "x")
    with pytest.raises(WorkspaceError):
        ws.read(bad)


def test_symlink_out_refused(ws: ConfinedWorkspace, tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("harness secret")
    os.symlink(secret, ws.root / "link.txt")
    os.symlink(tmp_path, ws.root / "linkdir")
    with pytest.raises(WorkspaceError, match="outside the workspace"):
        ws.read("link.txt")
    with pytest.raises(WorkspaceError, match="outside the workspace"):
        ws.write("linkdir/new.txt", "x")
    assert not (tmp_path / "new.txt").exists()
    assert "link.txt" not in ws.list()


def test_protected_file_refused_even_through_inner_symlink(ws: ConfinedWorkspace) -> None:
    with pytest.raises(WorkspaceError, match="protected"):
        ws.write("model.py", "hacked")
    os.symlink(ws.root / "model.py", ws.root / "alias.py")
    with pytest.raises(WorkspaceError, match="protected"):
        ws.write("alias.py", "hacked")
    assert ws.read("model.py") == "class Model: pass\n"
    assert ws.verify_protected() == []


def test_verify_protected_detects_outside_change(ws: ConfinedWorkspace) -> None:
    (ws.root / "model.py").write_text("changed behind our back")
    assert ws.verify_protected() == ["model.py"]


def test_missing_file_message_lists_files(ws: ConfinedWorkspace) -> None:
    with pytest.raises(WorkspaceError, match="model_new.py"):
        ws.read("nope.py")


def test_snapshot_restore_roundtrip(ws: ConfinedWorkspace, tmp_path: Path) -> None:
    ws.write("kernels/a.cu", "A1")
    first = ws.snapshot()
    assert first.startswith("sha256:")
    assert ws.snapshot() == first  # content-addressed: same state, same id
    ws.write("kernels/a.cu", "A2")
    second = ws.snapshot()
    assert second != first
    restored = ConfinedWorkspace.restore(first, ws.store, tmp_path / "restored")
    assert restored.read("kernels/a.cu") == "A1"
    assert restored.list() == ["kernels/a.cu", "model.py", "model_new.py"]
    assert restored.is_protected("model.py")
    assert restored.verify_protected() == []
    assert read_manifest(second, ws.store)["files"]["kernels/a.cu"].startswith("sha256:")


def test_restore_refuses_nonempty_and_unknown(ws: ConfinedWorkspace, tmp_path: Path) -> None:
    snap = ws.snapshot()
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "f").write_text("x")
    with pytest.raises(WorkspaceError, match="not empty"):
        ConfinedWorkspace.restore(snap, ws.store, busy)
    with pytest.raises(WorkspaceError, match="not found"):
        ConfinedWorkspace.restore("sha256:" + "0" * 64, ws.store, tmp_path / "new")
    with pytest.raises(WorkspaceError, match="invalid snapshot id"):
        ConfinedWorkspace.restore("nope", ws.store, tmp_path / "new2")


def test_protected_mapping_and_explicit_store(tmp_path: Path) -> None:
    root = tmp_path / "w"
    root.mkdir()
    (root / "binding.cpp").write_text("x")
    ws = ConfinedWorkspace(root, protected={"binding.cpp": "sha256:wrong"}, store=tmp_path / "st")
    assert ws.verify_protected() == ["binding.cpp"]
    ws.snapshot()
    assert (tmp_path / "st" / "manifests").is_dir()
