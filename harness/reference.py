"""The trusted reference process: input sets from secret seeds, reference outputs, comparison, baselines.

One process per (task, device), kept warm across sessions (``python -m cuda_agent.harness.reference``; the parent's
handle is :class:`~cuda_agent.harness.reference_client.ReferenceClient`). It runs the reference ``Model`` from the
task store, never from a workspace; generates each input set on the device from a seed the trusted side chose;
runs the reference FIRST on copies of the pristine inputs; keeps expected outputs only here; hands inputs to the
candidate (files, CUDA IPC handles, memory files or device allocations); and compares the candidate's outputs where
they live. Candidate data is never unpickled here: it arrives as validated JSON messages
(:mod:`cuda_agent.harness.messages`).

Started ahead of time, it imports torch (and, asked to, torch.compile's machinery) before its task arrives. It
ignores SIGINT (its parent ends it: a stop request, or the end of its request pipe) and exits quietly when the
parent is gone.
"""

from __future__ import annotations

import ctypes
import os
import signal
import socket
import sys
import traceback
from pathlib import Path
from typing import Any

from cuda_agent.harness import reference_messages as m
from cuda_agent.harness.reference_sets import HeldSets, jsonable, load_task_module
from cuda_agent.harness.wire import Failure, LineReader, Reply, WireError, decode_request, encode, write_all

#: Exchange folders whose reusable staging slots a reference process keeps mapped (the sessions it serves at once).
SLOT_WRITERS_KEPT = 4
#: Device bytes the caching allocator may keep beyond what is allocated after sets are dropped (then emptied).
RETAINED_LIMIT_BYTES = 1 << 30
#: Environment variable naming the child's ends of its request and reply pipes and of the descriptor socket.
CHANNEL_ENV = "CUDA_AGENT_REFERENCE_CHANNEL"


class ReferenceServer:
    """Everything the reference process does for one task (built by the ``start`` request)."""

    def __init__(self, req: m.Start, fd_sock: socket.socket | None = None) -> None:
        import torch

        from cuda_agent.harness.reference_baselines import Baselines
        from cuda_agent.harness.reference_checks import OutputChecker

        self.torch = torch
        self.fd_sock = fd_sock
        if req.threads is not None:  # before anything runs: inductor also generates code for this count
            torch.set_num_threads(req.threads)
        self.device = torch.device(req.device)
        if self.device.type == "cuda":
            torch.cuda.set_device(self.device)
        self.module = load_task_module(req.code)
        self.init_inputs = jsonable(list(self.module.get_init_inputs()))
        torch.manual_seed(req.init_seed)
        from cuda_agent.harness.device_lock import shared_at
        from cuda_agent.harness.model_mode import set_task_mode

        with shared_at(req.lock_path):
            with torch.device(self.device):
                model = self.module.Model(*self.init_inputs)
            self.model = set_task_mode(model, torch, self.device)
            if self.device.type == "cuda":
                torch.cuda.synchronize(self.device)  # the parameters' initialisation done inside the hold
        self.sets = HeldSets(torch, self.module.get_inputs, self.model, self.device)
        self.baselines = Baselines(torch, self.model, self.device, self.sets, self.module.get_inputs, req.timer,
                                   req.clone_inputs, req.net_overhead)
        self.checker = OutputChecker(torch, self.device, self._driver)
        self._slot_writers: dict[str, Any] = {}  # exchange folder -> SlotWriter of fresh sets (stage_set)
        self._vmm_driver: Any = None  # driver calls of the 'vmm' transport (made on first use)
        self.baseline_bytes: int | None = None
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
            self.baseline_bytes = torch.cuda.memory_allocated(self.device)

    # ------------------------------------------------------------------ inputs and expected outputs
    def make_set(self, req: m.MakeSet) -> m.MadeSet:
        """Generate set ``req.set`` from its seed, run the reference on copies, describe (and maybe stage) it."""
        torch = self.torch
        gate = (req.gate[0], req.gate[1]) if req.gate else None
        held = self.sets.make(req.set, req.seed, req.widen, gate, req.shrink)
        notes = [n for n in self.sets.gate_notes if n]
        if held is None:  # a widened set whose reference output is not finite (or too sensitive) at any widening
            return m.MadeSet(set=req.set, tensors=[], input_fingerprints=[], outputs=[], input_bytes=0,
                             inconclusive=True, gate_notes=notes)
        return m.MadeSet(
            set=req.set,
            work_bytes=max(0, int(self.sets.work_bytes)),
            widen_shrink=held.shrink,
            gate_notes=notes,
            tensors=self._describe(req.set, req.exchange, req.transport, req.stage),
            input_fingerprints=held.fingerprints,
            outputs=[m.OutputSpec(dtype=str(e.dtype).removeprefix("torch."), shape=list(e.shape))
                     if isinstance(e, torch.Tensor) else m.OutputSpec(kind=type(e).__name__) for e in held.expected],
            input_bytes=sum(x.numel() * x.element_size() for x in held.inputs if isinstance(x, torch.Tensor)),
        )

    def stage_set(self, req: m.StageSet) -> m.StagedSet:
        """Hand a set over after all (a seeded copy did not match, or a fresh set at its call)."""
        return m.StagedSet(tensors=self._describe(req.set, req.exchange, req.transport, True, req.reuse))

    def stage_fds(self, req: m.StageFds) -> m.StagedFds:
        """Stage a set where nothing can see it until it is handed over: one memory file per tensor, or with
        ``vmm`` on CUDA one exportable device allocation per tensor (a driver failure falls back to memory files,
        its reason in ``vmm_error``). The descriptors go to the parent over the descriptor socket, in input order,
        before the reply; ours are closed. Device allocations are released with the set."""
        from cuda_agent.harness._staging import _raw_bytes, write_memfd
        from cuda_agent.harness._vmm import VmmError, close_fds, export_copy, send_fds

        if self.fd_sock is None:
            raise ValueError("this reference server has no descriptor socket (in-process)")
        torch = self.torch
        # A set handed over again (memory-aware sessions) was exported before: that hand-over is complete.
        self.sets.release_exports(req.set, self._release_export)
        descs = self._describe(req.set, None, "host", stage=False)
        held = self.sets[req.set]
        fds: list[int] = []
        vmm_error: str | None = None
        try:
            for i, (d, x) in enumerate(zip(descs, held.inputs)):
                if not isinstance(x, torch.Tensor):
                    continue
                raw = _raw_bytes(x)
                update: dict[str, Any] = {"fd": len(fds), "nbytes": int(raw.numel())}
                if req.vmm and vmm_error is None and x.device.type == "cuda" and raw.numel():
                    try:
                        exported = export_copy(torch, self._driver(), raw)
                    except VmmError as exc:
                        vmm_error = str(exc)[:500]
                    else:
                        held.exports.append(exported["handle"])
                        held.export_bytes.append(int(raw.numel()))
                        fds.append(exported["fd"])
                        descs[i] = d.model_copy(update={**update, "vmm": True, "alloc": exported["alloc"]})
                        continue
                fd, _ = write_memfd(raw, f"fresh-{req.set}-{update['fd']}")
                fds.append(fd)
                descs[i] = d.model_copy(update=update)
            send_fds(self.fd_sock, fds)
        finally:
            close_fds(fds)
        return m.StagedFds(tensors=descs, fds=len(fds), vmm_error=vmm_error)

    def _driver(self) -> Any:
        """The driver calls of the 'vmm' transport on this process's device (made on first use)."""
        if self._vmm_driver is None:
            from cuda_agent.harness._vmm import driver_for

            self._vmm_driver = driver_for(self.torch, self.device)
        return self._vmm_driver

    def _slot_writer(self, exchange: str) -> Any:
        """The reusable staging slots of ``exchange`` (the few most recent folders' are kept mapped)."""
        from cuda_agent.harness._staging import SlotWriter

        writer = self._slot_writers.pop(exchange, None) or SlotWriter(Path(exchange))
        self._slot_writers[exchange] = writer  # most recent last
        while len(self._slot_writers) > SLOT_WRITERS_KEPT:
            self._slot_writers.pop(next(iter(self._slot_writers)))
        return writer

    def _describe(self, k: int, exchange: str | None, transport: str, stage: bool,
                  reuse: bool = False) -> list[m.TensorDesc]:
        """Descriptions of set ``k``'s inputs: values inline; tensors by CUDA IPC handle, staged file (``reuse``: a
        reusable slot file), or (``stage=False``) layout only."""
        import base64
        import pickle

        torch = self.torch
        descs: list[m.TensorDesc] = []
        for i, x in enumerate(self.sets[k].inputs):
            if not isinstance(x, torch.Tensor):
                descs.append(m.TensorDesc(kind="value", value=jsonable(x)))
                continue
            d: dict[str, Any] = {"kind": "tensor", "dtype": str(x.dtype).removeprefix("torch."),
                                 "shape": list(x.shape), "stride": list(x.stride())}
            if not stage:
                pass
            elif self.device.type == "cuda" and transport == "ipc":
                from torch.multiprocessing.reductions import reduce_tensor

                _, args = reduce_tensor(x)
                d["ipc"] = base64.b64encode(pickle.dumps(args)).decode()  # trusted -> candidate direction only
            else:  # CPU, or CUDA staged through the host (the candidate copies it to its GPU)
                if exchange is None:
                    raise ValueError(f"staging set {k} through files needs the runner's exchange folder")
                if reuse:
                    path = self._slot_writer(exchange).write(f"fresh_{i}.bin", x)
                else:
                    from cuda_agent.harness._staging import write_tensor_file

                    path = Path(exchange) / f"in_{k}_{i}.bin"
                    write_tensor_file(path, x)
                d["file"] = str(path)
            descs.append(m.TensorDesc(**d))
        return descs

    def _release_export(self, handle: int) -> None:
        """Free one device allocation a set was exported in (the driver exists: the export made it)."""
        self._vmm_driver.release(handle)

    def release_exports(self, req: m.ReleaseExports) -> m.ExportsReleased:
        """Free the export allocations of sets whose runner copy was dropped (the sets stay held here)."""
        count = nbytes = 0
        for k in req.sets:
            n, b = self.sets.release_exports(k, self._release_export)
            count, nbytes = count + n, nbytes + b
        return m.ExportsReleased(released=count, released_bytes=nbytes)

    def drop_sets(self, req: m.DropSets) -> m.Dropped:
        """Free input sets no longer needed; reports device bytes still allocated beyond the model (leak probe)."""
        changed = self.sets.drop(req.sets, self._release_export)
        if self.device.type != "cuda":
            return m.Dropped(pinned_bytes=0, changed=changed)
        torch = self.torch
        torch.cuda.ipc_collect()  # free blocks whose IPC consumers released them
        if self.baseline_bytes is None:
            self.baseline_bytes = torch.cuda.memory_allocated(self.device)
        allocated = torch.cuda.memory_allocated(self.device)
        if torch.cuda.memory_reserved(self.device) - allocated > RETAINED_LIMIT_BYTES:
            # Give cached blocks back to the device: other tasks' processes (and the budget's next reservation)
            # count on the memory a finished session used, and a failed one must not keep it (the OOM cascade).
            torch.cuda.empty_cache()
        peak = self.sets.take_peak()
        return m.Dropped(pinned_bytes=max(0, allocated - self.baseline_bytes), changed=changed, peak_bytes=peak)

    def inputs_intact(self, req: m.InputsIntact) -> m.Intact:
        """Sets whose pristine inputs changed since they were made (a candidate wrote through IPC, T5)."""
        return m.Intact(changed=self.sets.changed())

    # ------------------------------------------------------------------ comparison and baselines
    def check(self, req: m.Check) -> m.Verdict:
        """Compare a call's exported outputs with the expected ones (device allocations' descriptors first)."""
        from cuda_agent.harness._vmm import close_fds, recv_fds

        n_vmm = sum(1 for d in req.outputs if d is not None and d.vmm)
        fds: list[int] = []
        if n_vmm:
            if self.fd_sock is None:
                return m.Verdict(transport_failed="no descriptor socket")
            try:
                fds = recv_fds(self.fd_sock, n_vmm, 5.0)  # relayed before the request: already queued
            except ValueError as exc:
                return m.Verdict(transport_failed=str(exc))
        try:
            held = self.sets[req.set]
            floor, noise = 0.0, {}
            if held.widen is not None:
                from cuda_agent.harness.widening import NOISE_FLOOR

                floor = NOISE_FLOOR
            if held.widen is None or any(p is not None and p[0] == "dup" for p in held.widen):
                # Ordinary sets and their near duplicates (ungated): the reference's own rounding noise bounds the
                # scale-aware atol (measured on the set's first check).
                from cuda_agent.harness.noise_floor import noise_floors

                noise = noise_floors(self.torch, self.model, held, req.tolerances,
                                     lambda: self.sets.fingerprints_of(held.inputs) == held.fingerprints)
            return self.checker.check(req, held.expected, fds, held.rms, floor, noise)
        finally:
            close_fds(fds)

    def prepare_baseline(self, req: m.PrepareBaseline) -> m.Compiled:
        """One untimed baseline call (torch.compile compiles now, outside any lock)."""
        return m.Compiled(compiled=self.baselines.prepare(req.which, req.set, req.compile_mode))

    def warm_baselines(self, req: m.WarmBaselines) -> m.Compiled:
        """Warm the baselines on inputs from a public seed; the memory that warm-up used goes back to the device
        (it was reserved only for the warm-up: a process that kept it cached would hold memory no budget counts)."""
        try:
            return m.Compiled(compiled=self.baselines.warm(req.compile_mode, req.with_compile, req.lock_path))
        finally:
            if self.device.type == "cuda":
                self.torch.cuda.empty_cache()

    def time_baseline(self, req: m.TimeBaseline) -> m.Samples:
        """Time a baseline over rotated sets (the caller holds the device's timing lock)."""
        return m.Samples(ms=self.baselines.time(req.which, req.sets, req.calls, req.warmup, req.compile_mode))

    def baseline_host_stats(self, req: m.BaselineHostStats) -> m.HostStats:
        """Host statistics of every baseline timed here (since the last take; ``take`` resets them)."""
        stats = {k: dict(v) for k, v in self.baselines.host_stats.items()}
        if req.take:
            self.baselines.host_stats.clear()
        return m.HostStats(stats=stats)

    def profiler_sum(self, req: m.ProfilerSum) -> m.Millis:
        """The release's profiler-sum time of a baseline."""
        return m.Millis(ms=self.baselines.profiler_sum(req.which, req.set, req.compile_mode))

    def threads(self, req: m.Threads) -> m.ThreadCount:
        """torch's intra-op thread count here (the baselines run with it)."""
        from cuda_agent.harness.timing_env import process_timing_state

        return m.ThreadCount(threads=int(self.torch.get_num_threads()), timing_state=process_timing_state(self.torch))

    def handle(self, req: m.Request) -> Reply:
        """Run one request (by its ``op``)."""
        return getattr(self, req.op)(req)


def backend_flags(torch: Any) -> dict[str, Any]:
    """The torch flags that change what a float32 matmul or convolution computes, as this process runs them."""
    flags: dict[str, Any] = {"float32_matmul_precision": torch.get_float32_matmul_precision(),
                             "cudnn_enabled": bool(torch.backends.cudnn.enabled),
                             "cudnn_allow_tf32": bool(torch.backends.cudnn.allow_tf32),
                             "cudnn_benchmark": bool(torch.backends.cudnn.benchmark),
                             "cudnn_deterministic": bool(torch.backends.cudnn.deterministic)}
    if torch.cuda.is_available():
        flags["cuda_matmul_allow_tf32"] = bool(torch.backends.cuda.matmul.allow_tf32)
    return flags


def _make_undumpable() -> None:
    """PR_SET_DUMPABLE=0: other processes of the same user cannot ptrace or read our memory."""
    try:
        ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)
    except Exception:  # noqa: BLE001 - not Linux: nothing to do
        pass


def _failure(exc: BaseException) -> Failure:
    return Failure(error=f"{type(exc).__name__}: {exc}"[:2000], traceback=traceback.format_exc()[-2000:])


def serve(read_fd: int, write_fd: int, fd_sock: socket.socket | None) -> int:
    """The request loop: a ``start`` (or a ``stop``) first, then requests until ``stop`` or the end of the pipe."""
    reader = LineReader(read_fd)
    server: ReferenceServer | None = None
    while True:
        try:
            line = reader.read_line(3600.0 * 24)
        except EOFError:
            return 0
        if line is None:
            continue
        try:
            req = decode_request(line, m.REFERENCE_REQUESTS)
        except WireError as exc:
            reply: Reply | Failure = Failure(error=f"unreadable request: {exc}")
        else:
            if isinstance(req, m.Stop):
                write_all(write_fd, encode(m.Stopping()))
                return 0
            try:
                if isinstance(req, m.Start):
                    if server is not None:
                        raise ValueError("this reference process already has a task")
                    server = ReferenceServer(req, fd_sock)
                    reply = m.Started(init_inputs=server.init_inputs, backend_flags=backend_flags(server.torch))
                elif server is None:
                    raise ValueError(f"{req.op!r} before 'start'")
                else:
                    reply = server.handle(req)
            except Exception as exc:  # noqa: BLE001 - every failure is reported to the parent
                reply = _failure(exc)
        write_all(write_fd, encode(reply))


def main(argv: list[str] | None = None) -> int:
    """Entry point (``python -m cuda_agent.harness.reference [--preimport compile]``)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent ends this process, not the terminal's Ctrl-C
    _make_undumpable()
    read_fd, write_fd, sock_fd = (int(x) for x in os.environ[CHANNEL_ENV].split(","))
    import torch  # noqa: F401 - imported ahead of the task

    if "--preimport" in (argv or sys.argv[1:]):
        import torch._dynamo  # noqa: F401
        import torch._inductor.compile_fx  # noqa: F401
    try:
        return serve(read_fd, write_fd, socket.socket(fileno=sock_fd))
    except (BrokenPipeError, ConnectionResetError):  # the parent is gone: nothing left to tell it
        return 0


if __name__ == "__main__":
    code = main()
    try:
        sys.stdout.flush()
    except OSError:
        pass
    os._exit(code)  # no interpreter teardown messages on a closed pipe
