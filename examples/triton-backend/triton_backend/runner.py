"""The sandbox side of the Triton backend (a cuda-agent RunnerLoader, imported inside the sandboxed runner).

:meth:`TritonLoader.prepare` runs before the runner's integrity guard takes its snapshot: it gives Triton a kernel
cache of its own in the runner's private temporary folder (no compiled kernel outlives the runner or is shared
with another candidate), selects Triton's interpreter on a CPU device (``TRITON_INTERPRET=1``: kernels run as
NumPy on CPU tensors), imports Triton and launches one small kernel of its own, so the driver's helper modules are
built and loaded now rather than during the candidate's first timed call. Nothing is imported ahead of
``model_new.py`` (the kernels are compiled by Triton's JIT when first launched). The GPU kernels an audited call
runs must be the workspace's ``@triton.jit`` functions (or torch's own fill/copy kernels, which allocation and
copies launch).
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

#: torch kernels that allocation, fills and copies launch (never compute).
TORCH_MEMORY_KERNELS = ("FillFunctor", "fill_kernel", "copy_kernel", "CopyKernel", "direct_copy", "Memcpy", "Memset",
                        "memcpy", "memset", "zero_kernel")


class TritonLoader:
    """Makes Triton ready in the runner and judges which kernels are the candidate's."""

    def prepare(self, device: str) -> None:
        """A private kernel cache, the interpreter on a CPU device, Triton imported and one launch of our own."""
        os.environ["TRITON_CACHE_DIR"] = tempfile.mkdtemp(prefix="triton-cache-", dir=os.getcwd())
        # `tl.dot(..., allow_tf32=False)` means TRITON_F32_DEFAULT or "ieee": the precision the static rules accepted
        # must not be changed by the environment the runner inherited
        os.environ.pop("TRITON_F32_DEFAULT", None)
        if device == "cpu":
            os.environ["TRITON_INTERPRET"] = "1"
        import triton  # noqa: F401

        if device == "cpu":
            from triton_backend.interpreter_compat import patch_autotune_bench, patch_scalar_index

            patch_scalar_index()
            patch_autotune_bench()
        from triton_backend import _warm

        _warm.launch(device)

    def load(self, workspace: Path, artifacts: Path, required: bool) -> Path | None:
        """Nothing is built ahead: ``model_new.py`` holds the kernels, compiled by Triton's JIT at first launch."""
        return None

    def kernel_origin_violations(self, kernel_names: Iterable[str], workspace: Path, binary: Path | None) -> list[Any]:
        """GPU kernels that ran but are neither a ``@triton.jit`` function of ``model_new.py`` nor torch's
        fill/copy kernels (T1: a library or ATen kernel did the work)."""
        from cuda_agent.harness.integrity import Violation
        from cuda_agent.harness.integrity.runtime import base_kernel_name

        from triton_backend.integrity import kernel_names as own_names

        own = set(own_names((Path(workspace) / "model_new.py").read_text(errors="replace")))
        out: list[Any] = []
        reported: set[str] = set()
        for name in kernel_names:
            if any(marker in name for marker in TORCH_MEMORY_KERNELS):
                continue
            base = base_kernel_name(name)
            if base in own or base in reported:
                continue
            reported.add(base)
            out.append(Violation(rule="T1.runtime.foreign_kernel", file="model_new.py",
                                 message=f"GPU kernel `{name[:120]}` ran during forward but is not one of the "
                                         f"@triton.jit kernels of model_new.py ({', '.join(sorted(own)) or 'none'}); "
                                         "library kernels (cuBLAS, ATen) are not allowed"))
        return out
