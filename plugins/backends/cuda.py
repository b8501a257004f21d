"""The ``cuda`` backend: nvcc-built kernels on an NVIDIA GPU (a device adapter, docs/backends.md).

Workspaces hold ``kernels/<name>.cu`` + ``kernels/<name>_binding.cpp``.
The arch comes from the device through NVML (``sm_90a`` on H200/H100, so
Hopper-only instructions compile), else the ``arch`` setting, else
``$CUDA_AGENT_CUDA_ARCH``, else ``sm_90a``.
"""

from __future__ import annotations

import subprocess
from typing import Any

from cuda_agent.harness import device_arch, find_nvcc
from cuda_agent.harness.device_backend import BackendConfig, DeviceBackend
from cuda_agent.hookspecs import hookimpl
from cuda_agent.plugins.backends._common import ExtensionAdapter, host_facts


def _nvml_facts(index: int) -> dict[str, Any]:
    import pynvml

    pynvml.nvmlInit()
    try:
        handle = pynvml.nvmlDeviceGetHandleByIndex(index)
        name = pynvml.nvmlDeviceGetName(handle)
        major, minor = pynvml.nvmlDeviceGetCudaComputeCapability(handle)
        mem = pynvml.nvmlDeviceGetMemoryInfo(handle)
        facts = {
            "device": name.decode() if isinstance(name, bytes) else name,
            "capability": f"{major}.{minor}",
            "driver": _text(pynvml.nvmlSystemGetDriverVersion()),
            "memory_gb": round(mem.total / 2**30, 1),
        }
        try:
            facts["sm_clock_mhz"] = pynvml.nvmlDeviceGetMaxClockInfo(handle, pynvml.NVML_CLOCK_SM)
        except pynvml.NVMLError:
            pass
        return facts
    finally:
        pynvml.nvmlShutdown()


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def nvcc_version(nvcc: str) -> str | None:
    """'13.0' from ``nvcc --version``; None when it cannot run."""
    try:
        out = subprocess.run([nvcc, "--version"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    for token in out.replace(",", " ").split():
        if token.startswith("V") and token[1:2].isdigit():
            return ".".join(token[1:].split(".")[:2])
    return None


class CudaAdapter(ExtensionAdapter):
    """CUDA C++ built with nvcc into ``cuda_extension``, run on one NVIDIA GPU."""

    name = "cuda"
    skill = "cuda"
    device_kind = "cuda"
    language = "CUDA C++"

    def availability(self, config: BackendConfig) -> tuple[bool, str]:
        """Needs nvcc and a visible NVIDIA GPU (NVML)."""
        nvcc = find_nvcc()
        if nvcc is None:
            return False, "nvcc not found (PATH, $CUDA_HOME, /usr/local/cuda)"
        try:
            facts = _nvml_facts(config.device_index)
        except Exception as exc:
            return False, f"no NVIDIA GPU visible through NVML ({type(exc).__name__}: {exc})"
        return True, f"{facts['device']} (sm {facts['capability']}), nvcc {nvcc_version(nvcc)}"

    def device_facts(self, config: BackendConfig) -> dict[str, Any]:
        """GPU name, capability, driver, memory (NVML), nvcc and torch's CUDA version."""
        facts: dict[str, Any] = {}
        try:
            facts.update(_nvml_facts(config.device_index))
        except Exception as exc:
            facts["device_error"] = f"{type(exc).__name__}: {exc}"
        nvcc = find_nvcc()
        facts["nvcc"] = nvcc_version(nvcc) if nvcc else None
        facts["arch"] = config.arch or device_arch(config.device_index)
        import torch

        facts["cuda"] = torch.version.cuda
        facts["host"] = host_facts()
        return facts


class CudaBackend(DeviceBackend):
    """CUDA kernels built with nvcc, evaluated on one GPU."""

    adapter = CudaAdapter()


@hookimpl
def register_backends(register) -> None:
    """Register backend ``cuda``."""
    register("cuda", CudaBackend, config_model=BackendConfig, description="CUDA kernels on an NVIDIA GPU")
