"""CPU cores for the processes that time (``ExperimentSettings.timing_cpus``).

A kernel launch reaches the GPU through command buffers in host memory; on a machine with several NUMA nodes, a
process whose thread (and so its first-touch memory) sits on a node far from the GPU pays more per launch. Short
kernels measured in one fresh process or another then differ by a constant (the per-process shift of issue 3's
spread). ``timing_cpus: gpu_local`` starts the candidate runners and reference processes on the cores NVML lists
as local to their GPU, intersected with the cores this process may use (a lane pinned to part of the host keeps
its part). Where NVML, the GPU or such a core is missing nothing is pinned.
"""

from __future__ import annotations

import functools
import os


def _physical_index(device: str) -> tuple[str, int | str] | None:
    """('index', N) or ('uuid', 'GPU-...') of the physical GPU behind ``device`` ('cuda' / 'cuda:N'), through
    ``CUDA_VISIBLE_DEVICES``; None for a non-CUDA device or an ordinal it does not list."""
    if not device.startswith("cuda"):
        return None
    ordinal = int(device.partition(":")[2] or 0)
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is None:
        return ("index", ordinal)
    entries = [v.strip() for v in visible.split(",") if v.strip()]
    if ordinal >= len(entries):
        return None
    entry = entries[ordinal]
    return ("index", int(entry)) if entry.isdigit() else ("uuid", entry)


def cpus_from_masks(masks: list[int]) -> frozenset[int]:
    """Core numbers set in NVML's affinity bitmask words (64 cores per word, lowest core in bit 0 of word 0)."""
    return frozenset(64 * w + b for w, word in enumerate(masks) for b in range(64) if (int(word) >> b) & 1)


@functools.lru_cache(maxsize=None)
def _nvml_local_cpus(which: tuple[str, int | str]) -> frozenset[int] | None:
    try:
        import pynvml

        pynvml.nvmlInit()
        kind, value = which
        handle = (pynvml.nvmlDeviceGetHandleByIndex(value) if kind == "index"
                  else pynvml.nvmlDeviceGetHandleByUUID(value))
        words = max(1, ((os.cpu_count() or 64) + 63) // 64)
        return cpus_from_masks(list(pynvml.nvmlDeviceGetCpuAffinity(handle, words)))
    except Exception:  # noqa: BLE001 - no NVML, no such GPU: nothing to pin to
        return None


def gpu_local_cpus(device: str) -> frozenset[int] | None:
    """The cores local to ``device``'s GPU that this process may use, or None (nothing to pin to)."""
    which = _physical_index(device)
    local = _nvml_local_cpus(which) if which is not None else None
    if not local:
        return None
    usable = local & frozenset(os.sched_getaffinity(0))
    return usable or None


def timing_cpus(device: str, setting: str) -> frozenset[int] | None:
    """The cores a timing process of ``device`` is started on under ``ExperimentSettings.timing_cpus``."""
    if setting == "any":
        return None
    if setting == "gpu_local":
        return gpu_local_cpus(device)
    raise ValueError(f"timing_cpus {setting!r}: valid are 'any' and 'gpu_local'")
