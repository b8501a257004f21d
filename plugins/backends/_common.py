"""The host side shared by the ``cpu`` and ``cuda`` adapters: the release layout built into ``cuda_extension``.

Both languages (C++/OpenMP, CUDA C++) use the same workspace (``model_new.py`` calling ``cuda_extension``,
``kernels/*`` with ``REGISTER_BINDING``), the same incremental ninja build in the compiler sandbox, and the same
static rules (the ``model_new.py`` allowlist, the C++/CUDA source rules, the built module's undefined symbols). The
adapters (docs/backends.md) differ only in their suffix, device and facts; the backend itself is
:class:`cuda_agent.harness.device_backend.DeviceBackend`.
"""

from __future__ import annotations

import os
import platform
import shutil
from pathlib import Path
from typing import Any

from cuda_agent.harness import integrity, usable_cpus
from cuda_agent.harness.build import BuildOutcome, build_extension, default_cache_dir
from cuda_agent.harness.device_backend import BackendConfig, DeviceBackend
from cuda_agent.harness.layout import KERNEL_SUFFIX, write_layout
from cuda_agent.harness.single_file_integrity import SingleFileCheck, check_single_file
from cuda_agent.harness.tasks import scaled_for_backend
from cuda_agent.protocols import Workspace
from cuda_agent.schemas.task import TaskManifest

#: The names the backends' config model and base class had before the device-adapter protocol (interfaces 3.0).
KernelBackendConfig = BackendConfig
KernelBackend = DeviceBackend


class ExtensionAdapter:
    """Host side of a language built into ``cuda_extension`` by the harness (``kind``: 'cpu' or 'cuda')."""

    name = ""
    skill = ""
    device_kind = "cpu"
    language = ""
    runner_loader: str | None = None  # the built extension: cuda_agent.harness.extension_loader.ExtensionLoader

    @property
    def kernel_suffix(self) -> str:
        """'.cpp' on the CPU, '.cu' on CUDA."""
        return KERNEL_SUFFIX[self.device_kind]

    def task_for(self, task: TaskManifest, config: BackendConfig) -> TaskManifest:
        """The task's ``CPU_SIZES`` variant on the CPU (when ``cpu_sizes``), else the task."""
        if self.device_kind == "cpu" and config.cpu_sizes:
            return scaled_for_backend(task, "cpu")
        return task

    def layout(self, task: TaskManifest, root: Path) -> Workspace:
        """The release layout: protected model.py, binding.cpp and binding_registry.h; model_new.py; kernels/."""
        return write_layout(Path(root), task, self.device_kind)  # type: ignore[arg-type]

    def build(self, root: Path, build_dir: Path, config: BackendConfig, hidden: tuple[Path, ...]) -> BuildOutcome:
        """Incremental ninja build of ``kernels/`` + the shared binding object into ``cuda_extension``."""
        return build_extension(root, self.device_kind, build_dir,  # type: ignore[arg-type]
                               arch=config.arch if self.device_kind == "cuda" else None,
                               timeout_s=config.compile_timeout_s, cache_dir=config.build_cache or default_cache_dir(),
                               isolation=config.isolation, hidden=hidden)

    def check_sources(self, root: Path) -> list[Any]:
        """The ``model_new.py`` allowlist and the C++/CUDA source rules."""
        return integrity.check_sources(root, self.device_kind)

    def check_binary(self, outcome: BuildOutcome) -> list[Any]:
        """The built module's undefined symbols (ATen compute, vendor libraries, dlopen, dispatcher, Python C-API)."""
        return integrity.check_binary(outcome.so_path, self.device_kind) if outcome.so_path is not None else []

    def check_single_file(self, source: str, filename: str) -> SingleFileCheck:
        """KernelBench's ``load_inline`` single file: its inline sources and ``ModelNew.forward``."""
        return check_single_file(source, filename)

    def kernel_names(self, root: Path, outcome: BuildOutcome | None) -> list[str]:
        """The ``__global__`` functions of the built module (demangled), found through the host stubs nvcc emits
        for each (``__device_stub__<mangled kernel>``); [] on the CPU or when the module has none."""
        if self.device_kind != "cuda" or outcome is None or outcome.so_path is None:
            return []
        from cuda_agent.harness.integrity.binary import defined_symbols, demangle

        # 'void __device_stub__Z12swish_kernelPKfPfl(float const*, float*, long)' (and its '::__handle' statics)
        stubs = {n.split("__device_stub__", 1)[1].split("(", 1)[0] for n in defined_symbols(outcome.so_path)
                 if "__device_stub__" in n and "::" not in n.split(")")[-1]}
        return demangle(sorted("_" + s if s.startswith("Z") else s for s in stubs))


def host_facts() -> dict[str, Any]:
    """CPU model, cores, compiler, torch and Python versions."""
    model = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    import torch

    return {
        "cpu": model,
        "cores": usable_cpus(), "host_cores": os.cpu_count(),
        "cxx": shutil.which("c++") or shutil.which("g++"),
        "torch": torch.__version__,
        "python": platform.python_version(),
    }
