"""Data in and out of the candidate runner: input sets received, copied per call, outputs exported.

Runs inside the sandbox (:mod:`cuda_agent.harness.candidate_runner`). Inputs arrive as files in the exchange
folder, CUDA IPC handles (trusted -> candidate), memory files or device allocations whose descriptors came over the
descriptor socket; each set is kept pristine and copied into per-position staging buffers for every call (the same
addresses with different data: a cache keyed by ``data_ptr`` is stale on the next set, T12). Outputs leave by slot
files, IPC handles or exported device allocations ('vmm').

On CUDA the sets received live in a memory pool of their own (:meth:`RunnerData.sets_pool`), apart from the pool the
candidate's calls allocate their outputs and workspaces from: a fresh set handed over inside a timed batch must not
take a cached block a call would have reused, or the call after it pays a ``cudaMalloc`` inside its timed window and
an honest kernel looks slower on never-seen data (the fresh-set rule then charges it; eight conv problems of
KernelBench were on an H100, session 31).
"""

from __future__ import annotations

import base64
import socket
from pathlib import Path
from typing import Any

from cuda_agent.harness.messages import ExportedOutput, OutputSpec, TensorDesc


def _encode(obj: Any) -> Any:
    """JSON-safe form of IPC reduction arguments (bytes -> {'b64': ...})."""
    if isinstance(obj, bytes):
        return {"b64": base64.b64encode(obj).decode()}
    if isinstance(obj, (list, tuple)):
        return [_encode(x) for x in obj]
    if isinstance(obj, (bool, int, float, str)) or obj is None:
        return obj
    return {"repr": str(obj)}


class RunnerData:
    """The runner's input sets, staging buffers and output exporters."""

    def __init__(self, torch: Any, device: str, fd_sock: socket.socket | None) -> None:
        self.torch = torch
        self.device = device
        self.cuda = device.startswith("cuda")
        self.fd_sock = fd_sock
        self.inputs: dict[int, list[Any]] = {}
        self.staging: dict[int, Any] = {}
        self.exchange: Path | None = None
        self.output_specs: list[OutputSpec] = []
        self._reader: Any = None  # DeviceReader of staged input files (CUDA)
        self._vmm_driver: Any = None  # driver calls of inputs handed over as device allocations
        self._slots: Any = None  # SlotWriter of exported outputs
        self._vmm: Any = None  # VmmExporter of exported outputs
        self.vmm_error: str | None = None
        self._pool: Any = None  # the received sets' own memory pool (CUDA); False where torch has none

    def sets_pool(self) -> Any:
        """A context in which allocations go to the received sets' own pool (CUDA; a no-op elsewhere, or where this
        torch has no ``torch.cuda.MemPool``)."""
        import contextlib

        torch = self.torch
        if not self.cuda:
            return contextlib.nullcontext()
        if self._pool is None:
            try:
                self._pool = torch.cuda.MemPool()
            except (AttributeError, RuntimeError, TypeError):
                self._pool = False
        return torch.cuda.use_mem_pool(self._pool) if self._pool else contextlib.nullcontext()

    # ------------------------------------------------------------------ inputs
    def receive(self, k: int, tensors: list[TensorDesc]) -> None:
        """Take set ``k``: descriptors first (those the tensors name), then every value into this process."""
        from cuda_agent.harness._vmm import close_fds, recv_fds

        described = [d for d in tensors if d.kind == "tensor" and d.fd is not None]
        fds: list[int] = []
        try:
            if described:
                if self.fd_sock is None:
                    raise ValueError("this runner has no descriptor socket")
                fds = recv_fds(self.fd_sock, len(described), 5.0)
            with self.sets_pool():
                self.inputs[k] = [self._received(d, fds) for d in tensors]
        finally:
            close_fds(fds)

    def _received(self, d: TensorDesc, fds: list[int]) -> Any:
        """One input in this process's memory: a value, or a tensor from an IPC handle, a staged file, a memory
        file's or a device allocation's descriptor (``fds[d.fd]``)."""
        torch = self.torch
        if d.kind != "tensor":
            return d.value
        dtype = getattr(torch, str(d.dtype))
        if d.ipc is not None:
            import pickle

            from torch.multiprocessing.reductions import rebuild_cuda_tensor

            args = pickle.loads(base64.b64decode(d.ipc))  # trusted -> candidate direction
            shared = rebuild_cuda_tensor(*args)
            # Own copy, then release the mapping at once: the producer's IPC reference count drops now, so killing
            # this process later cannot pin the reference process's memory.
            t = shared.clone(memory_format=torch.preserve_format)
            torch.cuda.synchronize()
            del shared
            return t
        if d.fd is not None:
            t = self._from_fd(fds[d.fd], d, dtype)
        elif self.cuda:
            t = self._device_reader().read(Path(str(d.file)), d.shape, dtype)
        else:
            from cuda_agent.harness._staging import read_tensor_file

            host = read_tensor_file(Path(str(d.file)), d.shape, dtype)
            return torch.empty_strided(d.shape, d.stride, dtype=dtype, device=self.device).copy_(host)
        if list(t.stride()) != list(d.stride):  # read C-contiguous: laid out as described
            t = torch.empty_strided(d.shape, d.stride, dtype=dtype, device=self.device).copy_(t)
        if self.cuda:
            torch.cuda.synchronize()
        return t

    def _from_fd(self, fd: int, d: TensorDesc, dtype: Any) -> Any:
        """The C-contiguous tensor ``d`` describes, from a device allocation (``vmm``) or a memory file."""
        torch = self.torch
        if d.vmm:
            from cuda_agent.harness._vmm import driver_for, import_copy

            if self._vmm_driver is None:
                self._vmm_driver = driver_for(torch, self.device)
            raw = import_copy(torch, self._vmm_driver, fd, int(d.nbytes or 0), int(d.alloc or 0), self.device)
            return raw.view(dtype).view(d.shape)
        if self.cuda:
            return self._device_reader().read_fd(fd, d.shape, dtype)
        from cuda_agent.harness._staging import read_tensor_fd

        return read_tensor_fd(fd, d.shape, dtype)

    def _device_reader(self) -> Any:
        if self._reader is None:
            from cuda_agent.harness._staging import DeviceReader

            self._reader = DeviceReader(self.device)
        return self._reader

    def copy_of(self, k: int) -> list[Any]:
        """Copies of set ``k`` in per-position staging buffers (the pristine set stays untouched, T5): the same
        addresses with different data on every set, fresh tensor objects viewing them on every call (T12)."""
        torch = self.torch
        out = []
        for i, v in enumerate(self.inputs[k]):
            if not isinstance(v, torch.Tensor):
                out.append(v)
                continue
            buf = self.staging.get(i)
            if buf is None or buf.shape != v.shape or buf.dtype != v.dtype or buf.stride() != v.stride():
                buf = v.clone(memory_format=torch.preserve_format)
                self.staging[i] = buf
            else:
                buf.copy_(v)
            out.append(buf.as_strided(buf.shape, buf.stride(), buf.storage_offset()))
        return out

    def poison(self) -> None:
        """Fill memory of output size with NaN and free it, so an uninitialised output reads NaN (T4/T21)."""
        torch = self.torch
        bufs = []
        for spec in self.output_specs:
            if spec.dtype is None or spec.shape is None:
                continue
            dtype = getattr(torch, spec.dtype)
            fill = float("nan") if dtype.is_floating_point or dtype.is_complex else -7
            bufs.append(torch.full(spec.shape, fill, dtype=dtype, device=self.device))
        del bufs

    # ------------------------------------------------------------------ outputs
    def export(self, outputs: list[Any], transport: str) -> tuple[list[ExportedOutput | None], list[int]]:
        """Hand ``outputs`` over by ``transport``: their descriptions and the descriptors to send first."""
        torch = self.torch
        descs: list[ExportedOutput | None] = []
        fds: list[int] = []
        for i, o in enumerate(outputs):
            if type(o) is not torch.Tensor:
                descs.append(None)
                continue
            o = o.detach()
            if o.device.type == "cuda" and transport == "vmm" and o.numel() and self._vmm_ready():
                try:
                    from cuda_agent.harness._staging import _raw_bytes

                    desc = self._vmm.stage(i, _raw_bytes(o))
                    fds.append(desc.pop("fd"))
                    descs.append(ExportedOutput(**desc))
                    continue
                except Exception as exc:  # noqa: BLE001 - reported; this output goes through a file instead
                    self.vmm_error = f"{type(exc).__name__}: {exc}"[:500]
            if o.device.type == "cuda" and transport == "ipc":
                from torch.multiprocessing.reductions import reduce_tensor

                _, args = reduce_tensor(o)
                descs.append(ExportedOutput(ipc=_encode(list(args))))
            else:
                if self.exchange is None:
                    raise RuntimeError("no exchange folder: 'load' comes before 'export'")
                if self._slots is None:
                    from cuda_agent.harness._staging import SlotWriter

                    self._slots = SlotWriter(self.exchange)
                # One file per output position, rewritten in place: one device-to-host copy into mapped pages.
                descs.append(ExportedOutput(file=str(self._slots.write(f"out_{i}.bin", o))))
        return descs, fds

    def _vmm_ready(self) -> bool:
        """The 'vmm' transport can be used here (socket present, driver calls worked so far)."""
        if self.vmm_error is not None or self.fd_sock is None:
            return False
        if self._vmm is None:
            try:
                from cuda_agent.harness._vmm import VmmExporter

                self._vmm = VmmExporter(self.torch, self.device)
            except Exception as exc:  # noqa: BLE001 - reported; files are used instead
                self.vmm_error = f"{type(exc).__name__}: {exc}"[:500]
                return False
        return True
