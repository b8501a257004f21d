"""The ``cpu`` backend: C++/OpenMP kernels, the whole agent loop with no GPU (a device adapter, docs/backends.md).

Workspaces hold ``kernels/<name>.cpp`` + ``kernels/<name>_binding.cpp``; ``.cu`` files are refused with a message
naming the file. Tasks that define ``CPU_SIZES`` are evaluated at that size. Timings on this backend check the
machinery, not performance targets.
"""

from __future__ import annotations

import shutil
from typing import Any

from cuda_agent.harness.device_backend import BackendConfig, DeviceBackend
from cuda_agent.hookspecs import hookimpl
from cuda_agent.plugins.backends._common import ExtensionAdapter, host_facts


class CpuAdapter(ExtensionAdapter):
    """C++/OpenMP built with the host compiler into ``cuda_extension``, run on the CPU."""

    name = "cpu"
    skill = "cpu"
    device_kind = "cpu"
    language = "C++/OpenMP"

    def availability(self, config: BackendConfig) -> tuple[bool, str]:
        """Usable wherever a C++ compiler is on PATH."""
        cxx = shutil.which("c++") or shutil.which("g++")
        return (True, f"C++ compiler {cxx}") if cxx else (False, "no C++ compiler (c++/g++) on PATH")

    def device_facts(self, config: BackendConfig) -> dict[str, Any]:
        """The host CPU, compiler, torch and Python."""
        facts = host_facts()
        return {"device": facts["cpu"], **facts}


class CpuBackend(DeviceBackend):
    """C++/OpenMP kernels built with the host compiler, evaluated on the CPU."""

    adapter = CpuAdapter()


@hookimpl
def register_backends(register) -> None:
    """Register backend ``cpu``."""
    register("cpu", CpuBackend, config_model=BackendConfig, description="C++/OpenMP kernels on the CPU")
