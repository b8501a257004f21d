"""The host side of the Triton backend: a cuda-agent DeviceAdapter (docs/backends.md of cuda-agent).

Workspace: the protected reference ``model.py`` and ``model_new.py`` holding the ``@triton.jit`` kernels and
``ModelNew`` (KernelBench's own Triton form, so a KernelBench single file is a workspace of one file). The "build"
needs no device: the file must parse and compile to Python bytecode; Triton's JIT compiles the kernels inside the
sandbox when they are first launched, so a kernel that does not compile fails ``verify`` with Triton's message.
The static rules are :mod:`triton_backend.integrity`. On a CUDA device kernels run compiled; on a CPU device under
Triton's interpreter (for CI: correctness, not speed).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Literal

from pydantic import Field

from cuda_agent.harness.build import BuildOutcome
from cuda_agent.harness.device_backend import BackendConfig, DeviceBackend
from cuda_agent.harness.integrity import Violation
from cuda_agent.harness.single_file_integrity import SingleFileCheck
from cuda_agent.harness.tasks import scaled_for_backend
from cuda_agent.harness.workspace import ConfinedWorkspace
from cuda_agent.schemas.task import TaskManifest

from triton_backend.integrity import check_triton_source, kernel_names
from triton_backend.starter import starter_model_new

#: Files of ours in every workspace (protected).
PROTECTED = ("model.py",)
MODEL_FILE = "model_new.py"
_SKIPPED_PARTS = {"__pycache__", "build", ".snapshots"}
_BINARY_SUFFIXES = {".so", ".o", ".a", ".pyd", ".ptx", ".cubin", ".fatbin", ".pth"}


class TritonConfig(BackendConfig):
    """Configuration block ``plugins.triton``: the harness settings of every backend, and where kernels run."""

    device: Literal["auto", "cuda", "cpu"] = Field(
        "auto", description="Where kernels run: 'cuda' (compiled by Triton on the CUDA device), 'cpu' (Triton's "
        "interpreter: correctness, not speed), 'auto' (the GPU when torch sees one, else the interpreter).")


def device_kind_for(config: TritonConfig) -> str:
    """'cpu' (interpreter) or 'cuda' (compiled) for ``config``."""
    if config.device == "auto":
        import torch

        return "cuda" if torch.cuda.is_available() else "cpu"
    return config.device


class TritonAdapter:
    """Triton kernels in ``model_new.py``, compiled by Triton's JIT inside the sandbox."""

    name = "triton"
    skill = "triton"
    kernel_suffix = ".py"
    language = "Triton"
    runner_loader = "triton_backend.runner:TritonLoader"

    def __init__(self, device_kind: str = "cuda") -> None:
        self.device_kind = device_kind

    # ------------------------------------------------------------------ facts
    def availability(self, config: Any) -> tuple[bool, str]:
        """Triton importable; a CUDA device for compiled kernels."""
        try:
            import triton
        except ImportError as exc:
            return False, f"triton is not installed ({exc}); pip install triton"
        if self.device_kind == "cpu":
            return True, f"triton {triton.__version__} (interpreter on the CPU: correctness, not speed)"
        import torch

        if not torch.cuda.is_available():
            return False, "no CUDA device visible to torch (set plugins.triton.device=cpu for Triton's interpreter)"
        return True, f"triton {triton.__version__} on {torch.cuda.get_device_name(config.device_index)}"

    def device_facts(self, config: Any) -> dict[str, Any]:
        """Triton's version, the mode and the device."""
        import platform

        import torch

        facts: dict[str, Any] = {"mode": "interpreter" if self.device_kind == "cpu" else "compiled",
                                 "torch": torch.__version__}
        try:
            import triton

            facts["triton"] = triton.__version__
        except ImportError:
            facts["triton"] = None
        if self.device_kind == "cuda" and torch.cuda.is_available():
            facts["device"] = torch.cuda.get_device_name(config.device_index)
            facts["cuda"] = torch.version.cuda
        else:
            facts["device"] = platform.processor() or platform.machine()
        return facts

    def task_for(self, task: TaskManifest, config: Any) -> TaskManifest:
        """The task's ``CPU_SIZES`` variant under the interpreter (when ``cpu_sizes``)."""
        if self.device_kind == "cpu" and config.cpu_sizes:
            return scaled_for_backend(task, "cpu")
        return task

    # ------------------------------------------------------------------ workspace and build
    def layout(self, task: TaskManifest, root: Path) -> ConfinedWorkspace:
        """``model.py`` (protected) and a starter ``model_new.py`` with Model's signatures."""
        root = Path(root)
        if root.exists() and any(root.iterdir()):
            from cuda_agent.errors import WorkspaceError

            raise WorkspaceError(f"workspace folder {root} is not empty; the layout needs a fresh folder")
        root.mkdir(parents=True, exist_ok=True)
        (root / "model.py").write_text(task.code)
        (root / MODEL_FILE).write_text(starter_model_new(task.code))
        return ConfinedWorkspace(root, protected=PROTECTED)

    def build(self, root: Path, build_dir: Path, config: Any, hidden: tuple[Path, ...]) -> BuildOutcome:
        """``model_new.py`` must parse and compile to bytecode (no device, nothing run)."""
        started = time.perf_counter()
        path = Path(root) / MODEL_FILE
        if not path.is_file():
            return BuildOutcome(ok=False, log=f"{MODEL_FILE} is missing", duration_s=time.perf_counter() - started,
                                errors=[{"file": MODEL_FILE, "line": None, "message": f"{MODEL_FILE} is missing"}])
        try:
            compile(path.read_text(errors="replace"), MODEL_FILE, "exec", dont_inherit=True)
        except SyntaxError as exc:
            msg = f"{MODEL_FILE}:{exc.lineno}: SyntaxError: {exc.msg}"
            return BuildOutcome(ok=False, log=msg, duration_s=time.perf_counter() - started,
                                errors=[{"file": MODEL_FILE, "line": exc.lineno, "message": f"SyntaxError: {exc.msg}"}])
        return BuildOutcome(ok=True, so_path=None, steps=0, isolation="none", duration_s=time.perf_counter() - started,
                            log="Triton kernels are compiled by Triton's JIT at their first launch (in verify)")

    # ------------------------------------------------------------------ integrity
    def check_sources(self, root: Path) -> list[Violation]:
        """The Triton rules over ``model_new.py``, and no other Python module or prebuilt binary in the workspace."""
        root = Path(root)
        path = root / MODEL_FILE
        if not path.is_file():
            return [Violation(rule="T1.python.no_model_new", file=MODEL_FILE, message=f"{MODEL_FILE} is missing")]
        out = check_triton_source(path.read_text(errors="replace"), MODEL_FILE).violations
        for p in sorted(root.rglob("*")):
            rel = p.relative_to(root)
            if not p.is_file() or any(part.startswith(".") or part in _SKIPPED_PARTS for part in rel.parts):
                continue
            if p.suffix == ".py" and str(rel) not in (MODEL_FILE, *PROTECTED):
                out.append(Violation(rule="T1.python.import_not_allowed", file=str(rel),
                                     message=f"{rel}: Python files other than {MODEL_FILE} are not allowed (they could "
                                             "shadow imports); put the kernels in model_new.py"))
            elif p.suffix in _BINARY_SUFFIXES:
                out.append(Violation(rule="T1.python.native_access", file=str(rel),
                                     message=f"{rel}: prebuilt binaries are not allowed; write @triton.jit kernels"))
        return out

    def check_binary(self, outcome: BuildOutcome) -> list[Violation]:
        """Nothing is built ahead of the run."""
        return []

    def check_single_file(self, source: str, filename: str) -> SingleFileCheck:
        """KernelBench's Triton single file is a ``model_new.py``: the same rules."""
        return SingleFileCheck(violations=check_triton_source(source, filename).violations)

    def kernel_names(self, root: Path, outcome: BuildOutcome | None) -> list[str]:
        """The ``@triton.jit`` functions of ``model_new.py`` (compiled kernels carry their names)."""
        path = Path(root) / MODEL_FILE
        return kernel_names(path.read_text(errors="replace")) if path.is_file() else []


class TritonBackend(DeviceBackend):
    """Triton kernels: compiled on the CUDA device, or interpreted on the CPU (``plugins.triton.device``)."""

    adapter = TritonAdapter("cuda")

    def __init__(self, config: TritonConfig | None = None) -> None:
        super().__init__(config or TritonConfig())
        self.adapter = TritonAdapter(device_kind_for(self.config))  # type: ignore[arg-type]
