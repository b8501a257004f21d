"""Tensors staged through files in the exchange folder (the CPU path and CUDA's 'host' transport).

The writer maps the file (``MAP_SHARED``) and copies the tensor straight into
it, so a CUDA tensor costs one device-to-host copy and no intermediate host
buffers; the reader maps it back (CPU) or reads it into a pinned buffer and
copies that to the device (CUDA). Raw bytes only: no pickle in either
direction, so neither side ever unpickles data the other produced.

:class:`SlotWriter` keeps one mapped file per slot (the runner's output
positions) and rewrites it in place while the size stays the same: the pages
are allocated and mapped once, so later hand-overs skip page allocation,
zeroing and faults (most of the cost of a fresh 256 MB file).
"""

from __future__ import annotations

import errno
import math
import os
from pathlib import Path
from typing import Any


def _raw_bytes(t: Any) -> Any:
    """``t`` as a flat C-contiguous uint8 tensor (same device)."""
    import torch

    flat = t.detach().contiguous().reshape(-1)
    return flat.view(torch.uint8) if flat.dtype != torch.bool else flat.to(torch.uint8)


def _allocate(path: Path, n: int) -> int:
    """Create ``path`` with ``n`` bytes reserved (a full memory file system fails here, not as SIGBUS later); returns
    it open read-write (the caller closes it).

    The exchange folder is writable from inside the candidate's sandbox, so a name there may have been made a
    symlink: it is never followed (``O_NOFOLLOW``: the trusted writer fails instead of writing where the link
    points), and the file is mapped through this descriptor (:func:`_map_shared`), never reopened by its name,
    which could have been swapped in between."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0), 0o644)
    try:
        _reserve(fd, n, str(path.parent))
    except BaseException:
        os.close(fd)
        raise
    return fd


def _map_shared(fd: int, n: int) -> Any:
    """A uint8 tensor over the first ``n`` bytes of open file ``fd``, mapped shared (writes reach the file). Through
    ``/proc/self/fd``: the file this descriptor has open, whatever its name now points to."""
    import torch

    return torch.from_file(f"/proc/self/fd/{fd}", shared=True, size=n, dtype=torch.uint8)


def open_regular(path: Path) -> int:
    """``path`` opened read-only if it is a regular file (the caller closes it): a symlink is refused
    (``O_NOFOLLOW``), and so is anything else a name in a folder the candidate can write may have become (a FIFO
    would block the reader: opened without blocking, then refused)."""
    import stat

    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | os.O_NONBLOCK)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise ValueError(f"{Path(path).name} is not a regular file")
    return fd


def _reserve(fd: int, n: int, where: str) -> None:
    """Give open file ``fd`` ``n`` bytes, reserved where the file system can (``where`` names it in the error)."""
    if not n:
        return
    try:
        os.posix_fallocate(fd, 0, n)
    except OSError as exc:
        if exc.errno not in (errno.EOPNOTSUPP, errno.EINVAL):
            raise OSError(exc.errno, f"no room for {n} bytes in {where}: {exc.strerror}") from exc
        os.ftruncate(fd, n)


def write_memfd(t: Any, name: str) -> tuple[int, int]:
    """A new memory file (``memfd_create``) holding the bytes of ``t`` (any device, any layout; stored
    C-contiguous): (its descriptor, the byte count). It has no name in any folder, so nothing can read it until the
    descriptor is passed on (``SCM_RIGHTS``); the caller owns the descriptor."""
    import torch

    raw = _raw_bytes(t)
    n = raw.numel()
    fd = os.memfd_create(name, getattr(os, "MFD_CLOEXEC", 1))
    try:
        _reserve(fd, n, "a memory file")
        if n:  # mapped shared: one copy (device-to-host on CUDA), no buffer
            _map_shared(fd, n).copy_(raw)
    except BaseException:
        os.close(fd)
        raise
    return fd, n


def read_fd_into(fd: int, view: memoryview, what: str) -> None:
    """Fill ``view`` with the bytes of descriptor ``fd``, whose size must be ``len(view)`` (``what`` names it in
    errors). Positional reads: a descriptor passed between processes shares its offset with the sender's copy."""
    want = len(view)
    have = os.fstat(fd).st_size
    if have != want:
        raise ValueError(f"{what} holds {have} bytes, {want} expected")
    got = 0
    while got < want:
        k = os.preadv(fd, [view[got:]], got)
        if not k:
            raise ValueError(f"{what} ended after {got} of {want} bytes")
        got += k


def _nbytes(shape: list[int], dtype: Any) -> int:
    import torch

    return math.prod(int(s) for s in shape) * torch.empty((), dtype=dtype).element_size()


def read_tensor_fd(fd: int, shape: list[int], dtype: Any) -> Any:
    """The tensor of ``shape`` and ``dtype`` whose bytes descriptor ``fd`` holds, copied into host memory of its own
    (C-contiguous)."""
    import torch

    raw = torch.empty(_nbytes(shape, dtype), dtype=torch.uint8)
    if raw.numel():
        read_fd_into(fd, memoryview(raw.numpy()).cast("B"), f"a handed-over memory file (shape {list(shape)} of {dtype})")
    return raw.view(dtype).view(shape)


def write_tensor_file(path: Path, t: Any) -> int:
    """Write the bytes of ``t`` (any device, any layout; stored C-contiguous) to ``path``; returns the byte count."""
    raw = _raw_bytes(t)
    n = raw.numel()
    fd = _allocate(path, n)
    try:
        if n:
            _map_shared(fd, n).copy_(raw)
    finally:
        os.close(fd)
    return n


class SlotWriter:
    """Reusable staging files, one per slot; a slot's file is rewritten in place while its size is unchanged."""

    def __init__(self, folder: Path) -> None:
        self.folder = Path(folder)
        self._slots: dict[str, tuple[int, int, Any]] = {}  # name -> (bytes, inode, shared mapping)

    def write(self, name: str, t: Any) -> Path:
        """Stage ``t`` in slot ``name``; returns the file's path (its bytes are ``t``'s, C-contiguous). A slot whose
        name now leads elsewhere (another file, a symlink: ``lstat``) is made again, never followed."""
        raw = _raw_bytes(t)
        n = raw.numel()
        path = self.folder / name
        slot = self._slots.get(name)
        try:
            current = os.lstat(path).st_ino
        except FileNotFoundError:
            current = None
        if slot is None or slot[0] != n or slot[1] != current or n == 0:
            fd = _allocate(path, n)
            try:
                slot = (n, os.fstat(fd).st_ino, _map_shared(fd, n) if n else None)
            finally:
                os.close(fd)
            self._slots[name] = slot
        if n:
            slot[2].copy_(raw)
        return path


def read_tensor_file(path: Path, shape: list[int], dtype: Any) -> Any:
    """The tensor of ``shape`` and ``dtype`` stored in regular file ``path`` (:func:`open_regular`; host memory,
    mapped privately)."""
    import torch

    numel = math.prod(int(s) for s in shape)
    fd = open_regular(Path(path))
    try:
        want = _nbytes(shape, dtype)
        have = os.fstat(fd).st_size
        if have != want:
            raise ValueError(f"{Path(path).name} holds {have} bytes, shape {list(shape)} of {dtype} needs {want}")
        if numel == 0:
            return torch.empty(shape, dtype=dtype)
        through = f"/proc/self/fd/{fd}"  # the file opened above, whatever the name leads to now
        if dtype == torch.bool:
            return torch.from_file(through, shared=False, size=numel, dtype=torch.uint8).view(shape).to(torch.bool)
        return torch.from_file(through, shared=False, size=numel, dtype=dtype).view(shape)
    finally:
        os.close(fd)


class DeviceReader:
    """Reads staged files onto a CUDA device through one growing pinned buffer (``read()`` into it, then one DMA).

    A private mapping of a fresh file costs a page fault per 4 KiB and a pageable copy; reading into memory that is
    already pinned and resident costs one copy out of the page cache and a full-speed transfer. Nothing of the file
    stays mapped, so a writer that truncates or replaces it between reads can only make a read fail.
    """

    def __init__(self, device: Any) -> None:
        self.device = device
        self._pinned: Any = None

    def _buffer(self, n: int) -> Any:
        import torch

        if self._pinned is None or self._pinned.numel() < n:
            self._pinned = None
            pin = torch.device(self.device).type == "cuda"  # (a CPU destination needs no pinning: tests use one)
            self._pinned = torch.empty(max(n, 1 << 20), dtype=torch.uint8, pin_memory=pin)
        return self._pinned[:n]

    def read(self, path: Path, shape: list[int], dtype: Any) -> Any:
        """The tensor stored in ``path`` as ``shape``/``dtype``, on the device (C-contiguous)."""
        fd = open_regular(Path(path))
        try:
            return self._read(fd, shape, dtype, Path(path).name)
        finally:
            os.close(fd)

    def read_fd(self, fd: int, shape: list[int], dtype: Any) -> Any:
        """The tensor whose bytes descriptor ``fd`` holds (a memory file handed over), on the device."""
        return self._read(fd, shape, dtype, "a handed-over memory file")

    def _read(self, fd: int, shape: list[int], dtype: Any, what: str) -> Any:
        import torch

        want = _nbytes(shape, dtype)
        out = torch.empty(shape, dtype=dtype, device=self.device)
        if want == 0:
            return out
        buf = self._buffer(want)
        read_fd_into(fd, memoryview(buf.numpy()).cast("B"), f"{what} (shape {list(shape)} of {dtype})")
        out.reshape(-1).view(torch.uint8).copy_(buf)  # pinned -> device: a full-speed transfer
        return out
