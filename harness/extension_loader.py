"""The sandbox side of the ``cpu`` and ``cuda`` backends: the built ``cuda_extension`` module (a RunnerLoader).

Runs inside the candidate runner (:mod:`cuda_agent.harness.candidate_runner`). The harness built the workspace's
``kernels/`` into one shared object, staged beside the workspace; :meth:`ExtensionLoader.load` imports it before
``model_new.py`` (a KernelBench single file builds its own with ``load_inline`` at import instead), and the GPU
kernels an audited call ran must be defined in it (T1).
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

#: The module name of the built extension (the release layout's).
MODULE_NAME = "cuda_extension"


class ExtensionLoader:
    """Imports ``cuda_extension`` from the staged build; judges kernel origins against that shared object."""

    def prepare(self, device: str) -> None:
        """Nothing to ready: the runner has imported torch and initialised the device already."""

    def load(self, workspace: Path, artifacts: Path, required: bool) -> Path | None:
        """Import ``cuda_extension`` from ``artifacts``; a failure is an error only when a build was staged."""
        sys.path.insert(0, str(artifacts))
        so_path = next(iter(sorted(Path(artifacts).glob(f"{MODULE_NAME}*.so"))), None)
        try:
            __import__(MODULE_NAME)
        except Exception as exc:
            if required:
                raise RuntimeError(f"importing {MODULE_NAME} from {artifacts} failed: {exc}") from exc
        return so_path

    def kernel_origin_violations(self, kernel_names: Iterable[str], workspace: Path, binary: Path | None) -> list[Any]:
        """Kernels defined neither in the built shared object nor among torch's fill/copy kernels (T1); none are
        judged without a built object (a single file's ``load_inline`` build is judged by the op audit)."""
        if binary is None:
            return []
        from cuda_agent.harness.integrity.runtime import kernel_origin_violations

        return kernel_origin_violations(kernel_names, binary)
