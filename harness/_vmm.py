"""Device buffers shared through file descriptors (CUDA VMM): the 'vmm' transport.

Legacy CUDA IPC handles do not open across bubblewrap's namespaces, so a
sandboxed candidate used to hand its outputs over through host files: a
device-to-host copy on its side, a read and a host-to-device copy on the
trusted side, about 0.25 s per 256 MB output on the H200. Here the runner
copies each output into a buffer made with the driver's virtual-memory API
(``cuMemCreate`` with a POSIX file-descriptor handle) and passes the
descriptor over a Unix socket (``SCM_RIGHTS``), which crosses any namespace;
the trusted side imports it, maps it and copies the bytes into memory of its
own before it compares anything. Device to device, nothing through the host.

The same calls carry fresh input sets the other way (:func:`export_copy`, ``fresh_set_transport``): the
reference copies a set into new allocations before the timing batch and the runner imports each at its call.

Plain ctypes over ``libcuda``; no extension to build. Every driver failure is
a :class:`VmmError`; callers fall back to the host transport.
"""

from __future__ import annotations

import ctypes
import os
import socket
import threading
from typing import Any

CU_MEM_ALLOCATION_TYPE_PINNED = 1
CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR = 1
CU_MEM_LOCATION_TYPE_DEVICE = 1
CU_MEM_ALLOC_GRANULARITY_MINIMUM = 0
CU_MEM_ACCESS_FLAGS_PROT_READWRITE = 3

#: Environment variable naming the runner's end of the descriptor socket.
FD_SOCKET_ENV = "CUDA_AGENT_FD_SOCKET"
#: Most descriptors one hand-over may carry (outputs of one call).
MAX_FDS = 64


class VmmError(RuntimeError):
    """A driver call of the VMM transport failed (the caller falls back to the host transport)."""


class _Location(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int), ("id", ctypes.c_int)]


class _AllocFlags(ctypes.Structure):
    _fields_ = [
        ("compressionType", ctypes.c_ubyte),
        ("gpuDirectRDMACapable", ctypes.c_ubyte),
        ("usage", ctypes.c_ushort),
        ("reserved", ctypes.c_ubyte * 4),
    ]


class _AllocationProp(ctypes.Structure):
    _fields_ = [
        ("type", ctypes.c_int),
        ("requestedHandleTypes", ctypes.c_int),
        ("location", _Location),
        ("win32HandleMetaData", ctypes.c_void_p),
        ("allocFlags", _AllocFlags),
    ]


class _AccessDesc(ctypes.Structure):
    _fields_ = [("location", _Location), ("flags", ctypes.c_int)]


class Driver:
    """The few driver calls the transport needs, on device ``ordinal`` (the process's CUDA numbering)."""

    _lib: Any = None
    _lib_lock = threading.Lock()

    def __init__(self, ordinal: int) -> None:
        with Driver._lib_lock:
            if Driver._lib is None:
                try:
                    Driver._lib = ctypes.CDLL("libcuda.so.1")
                except OSError as exc:
                    raise VmmError(f"libcuda.so.1 not loadable: {exc}") from exc
        self.lib = Driver._lib
        self.ordinal = ordinal
        self._check(self.lib.cuInit(0), "cuInit")
        dev = ctypes.c_int()
        self._check(self.lib.cuDeviceGet(ctypes.byref(dev), ctypes.c_int(ordinal)), "cuDeviceGet")
        self.device = dev.value
        self.prop = _AllocationProp()
        self.prop.type = CU_MEM_ALLOCATION_TYPE_PINNED
        self.prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR
        self.prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE
        self.prop.location.id = self.device
        gran = ctypes.c_size_t()
        self.ensure_context()
        self._check(
            self.lib.cuMemGetAllocationGranularity(ctypes.byref(gran), ctypes.byref(self.prop), CU_MEM_ALLOC_GRANULARITY_MINIMUM),
            "cuMemGetAllocationGranularity",
        )
        self.granularity = int(gran.value) or 2 << 20

    def _check(self, code: int, what: str) -> None:
        if code != 0:
            text = ctypes.c_char_p()
            try:
                self.lib.cuGetErrorString(code, ctypes.byref(text))
            except Exception:  # noqa: BLE001 - the code alone still says what failed
                pass
            raise VmmError(f"{what} failed: CUDA error {code} ({(text.value or b'').decode(errors='replace')})")

    def ensure_context(self) -> None:
        """Make the device's primary context (torch's) current on this thread."""
        ctx = ctypes.c_void_p()
        self._check(self.lib.cuCtxGetCurrent(ctypes.byref(ctx)), "cuCtxGetCurrent")
        if not ctx.value:
            self._check(self.lib.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), self.device), "cuDevicePrimaryCtxRetain")
            self._check(self.lib.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")

    def round_up(self, n: int) -> int:
        """``n`` rounded up to the allocation granularity (at least one granule)."""
        g = self.granularity
        return max(g, (n + g - 1) // g * g)

    def create(self, size: int) -> int:
        """A new physical allocation of ``size`` bytes (a granularity multiple) that can be exported as an fd."""
        handle = ctypes.c_ulonglong()
        self._check(self.lib.cuMemCreate(ctypes.byref(handle), ctypes.c_size_t(size), ctypes.byref(self.prop), ctypes.c_ulonglong(0)), "cuMemCreate")
        return int(handle.value)

    def export_fd(self, handle: int) -> int:
        """A POSIX file descriptor for allocation ``handle`` (the caller owns it)."""
        fd = ctypes.c_int(-1)
        self._check(
            self.lib.cuMemExportToShareableHandle(
                ctypes.byref(fd), ctypes.c_ulonglong(handle), CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, ctypes.c_ulonglong(0)
            ),
            "cuMemExportToShareableHandle",
        )
        return int(fd.value)

    def import_fd(self, fd: int) -> int:
        """The allocation behind descriptor ``fd`` (the descriptor stays the caller's to close)."""
        handle = ctypes.c_ulonglong()
        self._check(
            self.lib.cuMemImportFromShareableHandle(
                ctypes.byref(handle), ctypes.c_void_p(fd), CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR
            ),
            "cuMemImportFromShareableHandle",
        )
        return int(handle.value)

    def map(self, handle: int, size: int) -> int:
        """Reserve ``size`` bytes of address space, map ``handle`` there read-write for this device; the address."""
        ptr = ctypes.c_ulonglong()
        self._check(
            self.lib.cuMemAddressReserve(ctypes.byref(ptr), ctypes.c_size_t(size), ctypes.c_size_t(0), ctypes.c_ulonglong(0), ctypes.c_ulonglong(0)),
            "cuMemAddressReserve",
        )
        try:
            self._check(self.lib.cuMemMap(ptr, ctypes.c_size_t(size), ctypes.c_size_t(0), ctypes.c_ulonglong(handle), ctypes.c_ulonglong(0)), "cuMemMap")
            access = _AccessDesc()
            access.location.type = CU_MEM_LOCATION_TYPE_DEVICE
            access.location.id = self.device
            access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE
            code = self.lib.cuMemSetAccess(ptr, ctypes.c_size_t(size), ctypes.byref(access), ctypes.c_size_t(1))
            if code != 0:
                self.lib.cuMemUnmap(ptr, ctypes.c_size_t(size))
                self._check(code, "cuMemSetAccess")
        except VmmError:
            self.lib.cuMemAddressFree(ptr, ctypes.c_size_t(size))
            raise
        return int(ptr.value)

    def unmap(self, ptr: int, size: int) -> None:
        """Undo :meth:`map` (errors ignored: this runs on cleanup paths)."""
        self.lib.cuMemUnmap(ctypes.c_ulonglong(ptr), ctypes.c_size_t(size))
        self.lib.cuMemAddressFree(ctypes.c_ulonglong(ptr), ctypes.c_size_t(size))

    def release(self, handle: int) -> None:
        """Drop this process's reference to allocation ``handle``."""
        self.lib.cuMemRelease(ctypes.c_ulonglong(handle))


def driver_for(torch: Any, device: Any) -> Driver:
    """The driver calls on torch device ``device`` (its index, or the current device when it has none)."""
    dev = torch.device(device)
    return Driver(dev.index if dev.index is not None else torch.cuda.current_device())


class _ArrayView:
    """``__cuda_array_interface__`` of ``n`` raw bytes at device address ``ptr`` (for ``torch.as_tensor``)."""

    def __init__(self, ptr: int, n: int) -> None:
        self.__cuda_array_interface__ = {"shape": (n,), "typestr": "|u1", "data": (ptr, False), "version": 2}


def byte_view(torch: Any, ptr: int, n: int, device: Any) -> Any:
    """A uint8 tensor over ``n`` bytes at ``ptr`` (no copy; valid while the mapping lives)."""
    return torch.as_tensor(_ArrayView(ptr, n), device=device)


class _Slot:
    def __init__(self, handle: int, ptr: int, size: int, fd: int) -> None:
        self.handle, self.ptr, self.size, self.fd = handle, ptr, size, fd


class VmmExporter:
    """Runner side: one exportable buffer per output position, reused while it is big enough."""

    def __init__(self, torch: Any, device: Any) -> None:
        self.torch = torch
        self.device = torch.device(device)
        self.driver = driver_for(torch, self.device)
        self._slots: dict[int, _Slot] = {}

    def stage(self, position: int, raw: Any) -> dict[str, Any]:
        """Copy flat uint8 CUDA tensor ``raw`` into slot ``position``; its descriptor entry (the fd goes separately)."""
        n = int(raw.numel())
        slot = self._slots.get(position)
        if slot is None or slot.size < n:
            if slot is not None:
                self._free(slot)
                del self._slots[position]
            size = self.driver.round_up(n)
            handle = self.driver.create(size)
            try:
                ptr = self.driver.map(handle, size)
            except VmmError:
                self.driver.release(handle)
                raise
            try:
                fd = self.driver.export_fd(handle)
            except VmmError:
                self.driver.unmap(ptr, size)
                self.driver.release(handle)
                raise
            slot = self._slots[position] = _Slot(handle, ptr, size, fd)
        byte_view(self.torch, slot.ptr, n, self.device).copy_(raw)
        self.torch.cuda.synchronize(self.device)  # the bytes are there before the trusted side maps them
        return {"vmm": True, "nbytes": n, "alloc": slot.size, "fd": slot.fd}

    def _free(self, slot: _Slot) -> None:
        os.close(slot.fd)
        self.driver.unmap(slot.ptr, slot.size)
        self.driver.release(slot.handle)


def export_copy(torch: Any, driver: Driver, raw: Any) -> dict[str, Any]:
    """A new exportable allocation holding a copy of flat uint8 CUDA tensor ``raw`` (the trusted side's inputs
    direction): ``{"handle", "fd", "nbytes", "alloc"}``. Nothing of it stays mapped here; the caller owns the
    descriptor and releases the handle (:meth:`Driver.release`) once the other side has read it. One allocation per
    hand-over, never reused: whoever imports it may keep a mapping and write to it."""
    n = int(raw.numel())
    if n <= 0:
        raise VmmError("nothing to export")
    driver.ensure_context()
    size = driver.round_up(n)
    handle = driver.create(size)
    try:
        ptr = driver.map(handle, size)
        try:
            byte_view(torch, ptr, n, raw.device).copy_(raw)
            torch.cuda.synchronize(raw.device)  # the bytes are there before anyone maps them
        finally:
            driver.unmap(ptr, size)
        fd = driver.export_fd(handle)
    except BaseException:
        driver.release(handle)
        raise
    return {"handle": handle, "fd": fd, "nbytes": n, "alloc": size}


def import_copy(torch: Any, driver: Driver, fd: int, nbytes: int, alloc: int, device: Any) -> Any:
    """The first ``nbytes`` of the allocation behind ``fd`` copied into a new uint8 tensor of this process.

    ``alloc`` is the allocation's size as the runner reports it; a wrong size fails the mapping (an error, never a
    read of memory that is not the runner's buffer). Nothing of the runner's memory stays mapped afterwards.
    """
    if nbytes <= 0 or alloc < nbytes or alloc % driver.granularity:
        raise VmmError(f"bad buffer description: {nbytes} bytes in an allocation of {alloc}")
    driver.ensure_context()
    handle = driver.import_fd(fd)
    try:
        ptr = driver.map(handle, alloc)
        try:
            out = byte_view(torch, ptr, nbytes, device).clone()
            torch.cuda.synchronize(device)
        finally:
            driver.unmap(ptr, alloc)
    finally:
        driver.release(handle)
    return out


def send_fds(sock: socket.socket, fds: list[int]) -> None:
    """Pass descriptors ``fds`` over Unix socket ``sock`` (one message; none: nothing is sent)."""
    if fds:
        socket.send_fds(sock, [b"F"], fds)


def recv_fds(sock: socket.socket, count: int, timeout_s: float) -> list[int]:
    """Exactly ``count`` descriptors from ``sock`` (one message), or ValueError; extra ones are closed."""
    if count <= 0:
        return []
    if count > MAX_FDS:
        raise ValueError(f"{count} descriptors announced, at most {MAX_FDS}")
    sock.settimeout(timeout_s)
    try:
        msg, fds, _flags, _addr = socket.recv_fds(sock, 16, MAX_FDS)
    except (TimeoutError, OSError) as exc:
        raise ValueError(f"no descriptors arrived: {exc}") from exc
    finally:
        sock.settimeout(None)
    if len(fds) != count:
        for fd in fds:
            os.close(fd)
        raise ValueError(f"{len(fds)} descriptors arrived, {count} announced")
    return list(fds)


def close_fds(fds: list[int]) -> None:
    """Close every descriptor in ``fds`` (ignoring ones already closed)."""
    for fd in fds:
        try:
            os.close(fd)
        except OSError:
            pass
