"""The process tree of a candidate, and the GPU memory it uses: what the sandbox's watchdog and freezer act on.

Reading ``/proc/<pid>/task/<tid>/children`` costs in proportion to the tree, not to the machine's process count
(psutil's recursive scan read every process's status: 170 ms per scan on a busy H200 host, 20 scans a second per
runner). GPU memory per process comes from NVML.
"""

from __future__ import annotations

import os
from typing import Any


def descendant_pids(root: int) -> list[int] | None:
    """``root`` and its descendants from ``/proc/<pid>/task/<tid>/children`` (cost grows with the tree, not with
    the machine's process count); None where the kernel does not provide those files.

    psutil's ``children(recursive=True)`` reads the status of every process on the machine: on the H200 host,
    busy with builds and torch.compile workers, one scan took about 170 ms, and every runner's memory watchdog
    ran one 20 times a second.
    """
    if not _HAS_PROC_CHILDREN:
        return None
    out = [root]
    i = 0
    while i < len(out):
        pid = out[i]
        i += 1
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for tid in tids:
            try:
                with open(f"/proc/{pid}/task/{tid}/children", "rb") as fh:
                    out.extend(int(x) for x in fh.read().split())
            except (OSError, ValueError):
                continue
    return out


_HAS_PROC_CHILDREN = os.path.exists(f"/proc/{os.getpid()}/task/{os.getpid()}/children")


def nvml_handle(device: str) -> Any | None:
    """NVML handle of ``device`` ('cuda:N'), or None where NVML or the device is missing."""
    try:
        import pynvml  # nvidia-ml-py

        pynvml.nvmlInit()
        index = int(device.split(":")[1]) if ":" in device else 0
        return pynvml.nvmlDeviceGetHandleByIndex(index)
    except Exception:
        return None


def nvml_usage(handle: Any) -> dict[int, int] | None:
    """GPU bytes per process (host pid view) on the device, one NVML listing; None when it cannot be read."""
    if handle is None:
        return None
    try:
        import pynvml

        return {int(p.pid): int(p.usedGpuMemory or 0) for p in pynvml.nvmlDeviceGetComputeRunningProcesses(handle)}
    except Exception:
        return None
