"""The release workspace layout, per backend.

A workspace the agent edits looks like the CUDA-Agent release's
``agent_workdir/`` so its conventions carry over::

    model.py               protected: the task's reference (read it; nothing imports it)
    model_new.py           the agent's ModelNew; imports `cuda_extension`
    binding.cpp            protected, ours: defines module `cuda_extension`
    binding_registry.h     protected, ours: REGISTER_BINDING(name, fn)
    kernels/<name>.cu      CUDA kernels            (backend "cuda")
    kernels/<name>.cpp     C++/OpenMP kernels      (backend "cpu")
    kernels/<name>_binding.cpp   registers entry points with REGISTER_BINDING

The same ``model_new.py`` runs on both backends: it only calls functions of
``cuda_extension``. The reference the harness runs always comes from the
task store, never from this folder's ``model.py``.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Literal

from cuda_agent.errors import WorkspaceError
from cuda_agent.harness._binding_sources import BINDING_CPP, BINDING_REGISTRY_H
from cuda_agent.harness.workspace import ConfinedWorkspace
from cuda_agent.schemas.task import TaskManifest

BackendKind = Literal["cpu", "cuda"]

#: Files we author and protect in every workspace.
PROTECTED_FILES: tuple[str, ...] = ("model.py", "binding.cpp", "binding_registry.h")
#: Folder of kernel sources and their bindings.
KERNELS_DIR = "kernels"
#: Kernel source suffix per backend.
KERNEL_SUFFIX: dict[str, str] = {"cpu": ".cpp", "cuda": ".cu"}


def binding_sources() -> dict[str, str]:
    """The protected binding files we author: relative path -> text."""
    return {"binding.cpp": BINDING_CPP, "binding_registry.h": BINDING_REGISTRY_H}


def _signature_of(code: str, method: str) -> str:
    """Parameter list (without ``self``) of ``Model.<method>`` in the task code; ``*args`` if unknown."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return "*args"
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == "Model":
            for item in node.body:
                if isinstance(item, ast.FunctionDef) and item.name == method:
                    args = item.args
                    args.posonlyargs = [a for a in args.posonlyargs if a.arg != "self"]
                    args.args = [a for a in args.args if a.arg != "self"]
                    for a in args.posonlyargs + args.args + args.kwonlyargs:
                        a.annotation = None
                    if args.vararg:
                        args.vararg.annotation = None
                    if args.kwarg:
                        args.kwarg.annotation = None
                    return ast.unparse(args)
    return "*args"


def starter_model_new(task_code: str, kind: BackendKind) -> str:
    """A starter ``model_new.py`` with ``Model``'s signatures and a clear TODO."""
    init_sig = _signature_of(task_code, "__init__")
    fwd_sig = _signature_of(task_code, "forward")
    suffix = KERNEL_SUFFIX[kind]
    init_params = f", {init_sig}" if init_sig else ""
    fwd_params = f", {fwd_sig}" if fwd_sig else ""
    return f'''"""ModelNew: the optimised replacement of Model (see model.py).

forward() may only call functions of `cuda_extension` (your kernels, registered
with REGISTER_BINDING in kernels/*_binding.cpp), allocate outputs (torch.empty...)
and read shapes/attributes. No torch compute, no fallbacks.
"""

import torch
import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    def __init__(self{init_params}):
        super().__init__()
        # Keep the same parameters/buffers as Model (same names, same init order)
        # when the reference has any: weights are initialised under the same seed.

    def forward(self{fwd_params}):
        # TODO: write kernels/<name>{suffix} + kernels/<name>_binding.cpp, then call
        # cuda_extension.<name>(...) here.
        raise NotImplementedError("ModelNew.forward is not written yet")
'''


def write_layout(
    root: Path,
    task: TaskManifest,
    kind: BackendKind,
    *,
    store: Path | None = None,
    model_new: str | None = None,
) -> ConfinedWorkspace:
    """Lay out a fresh workspace for ``task`` at ``root`` and protect our files.

    :param root: the workspace folder; must be absent or empty.
    :param task: the task; its ``code`` becomes ``model.py``.
    :param kind: ``"cpu"`` or ``"cuda"`` (only the starter's TODO differs).
    :param store: snapshot store of the workspace (default: next to it).
    :param model_new: text of ``model_new.py``; default: a starter.
    :returns: the workspace, with ``model.py``, ``binding.cpp`` and
        ``binding_registry.h`` protected.
    """
    if kind not in KERNEL_SUFFIX:
        raise WorkspaceError(f"unknown backend kind {kind!r} for the workspace layout; valid: cpu, cuda")
    root = Path(root)
    if root.exists() and any(root.iterdir()):
        raise WorkspaceError(f"workspace folder {root} is not empty; the layout needs a fresh folder")
    root.mkdir(parents=True, exist_ok=True)
    (root / KERNELS_DIR).mkdir()
    (root / "model.py").write_text(task.code)
    for rel, text in binding_sources().items():
        (root / rel).write_text(text)
    (root / "model_new.py").write_text(model_new if model_new is not None else starter_model_new(task.code, kind))
    return ConfinedWorkspace(root, protected=PROTECTED_FILES, store=store)


def kernel_sources(root: Path) -> list[Path]:
    """Every compilable source under ``kernels/`` (``.cu``, ``.cpp``, ``.cc``), sorted."""
    folder = Path(root) / KERNELS_DIR
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.rglob("*") if p.is_file() and p.suffix in {".cu", ".cpp", ".cc", ".cxx"})
