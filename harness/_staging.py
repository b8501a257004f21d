"""Tensors staged through files in the exchange folder (the CPU path and CUDA's 'host' transport).

The writer maps the file (``MAP_SHARED``) and copies the tensor straight into
it, so a CUDA tensor costs one device-to-host copy and no intermediate host
buffers; the reader maps it back. Raw bytes only: no pickle in either
direction, so neither side ever unpickles data the other produced.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path
from typing import Any


def write_tensor_file(path: Path, t: Any) -> int:
    """Write the bytes of ``t`` (any device, any layout; stored C-contiguous) to ``path``; returns the byte count."""
    import torch

    flat = t.detach().contiguous().reshape(-1)
    raw = flat.view(torch.uint8) if flat.dtype != torch.bool else flat.to(torch.uint8)
    n = raw.numel()
    with open(path, "wb") as fh:
        if n:
            try:  # reserve the blocks now: a full memory file system then fails here, not as SIGBUS in the copy
                os.posix_fallocate(fh.fileno(), 0, n)
            except OSError as exc:
                if exc.errno not in (errno.EOPNOTSUPP, errno.EINVAL):
                    raise OSError(exc.errno, f"no room for {n} bytes in {path.parent}: {exc.strerror}") from exc
                fh.truncate(n)
    if n:
        torch.from_file(str(path), shared=True, size=n, dtype=torch.uint8).copy_(raw)
    return n


def read_tensor_file(path: Path, shape: list[int], dtype: Any) -> Any:
    """The tensor of ``shape`` and ``dtype`` stored in ``path`` (host memory, mapped privately)."""
    import torch

    numel = 1
    for s in shape:
        numel *= int(s)
    if numel == 0:
        return torch.empty(shape, dtype=dtype)
    want = numel * torch.empty((), dtype=dtype).element_size()
    have = Path(path).stat().st_size
    if have != want:
        raise ValueError(f"{Path(path).name} holds {have} bytes, shape {list(shape)} of {dtype} needs {want}")
    if dtype == torch.bool:
        return torch.from_file(str(path), shared=False, size=numel, dtype=torch.uint8).view(shape).to(torch.bool)
    return torch.from_file(str(path), shared=False, size=numel, dtype=dtype).view(shape)
