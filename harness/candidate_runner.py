"""The program that runs INSIDE the sandbox: loads the candidate and runs its forward.

Started ahead of time (``python -m cuda_agent.harness.candidate_runner``), it reads its ``setup`` (device and
timing protocol), imports torch, initialises the device, warms the thread pools, takes the integrity guard snapshot,
answers ``ready`` (with the wall and CPU seconds of each of those phases), and then serves the requests of one
evaluation before it is killed. Nothing here decides a verdict: it reports what happened; the trusted side compares
and times.

Channel: the harness's one wire format (:mod:`cuda_agent.harness.wire`, messages in
:mod:`cuda_agent.harness.messages`) on two inherited pipe descriptors (``CUDA_AGENT_RUNNER_FDS=in,out``);
descriptors of fresh input sets and exported outputs beside it on a Unix socket (``CUDA_AGENT_FD_SOCKET``). The
candidate's own stdout/stderr go to a separate pipe the parent drains. The runtime guard
(:mod:`cuda_agent.harness.integrity.runtime`) must import: a runner without it refuses to start.
"""

from __future__ import annotations

import gc
import os
import signal
import socket
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from cuda_agent.harness import messages as m
from cuda_agent.harness.wire import Failure, LineReader, Reply, WireError, decode_request, encode, write_all


class _StartClock:
    """Wall and CPU seconds of each phase of the runner's start, for its ``ready`` reply: where a slow start went."""

    def __init__(self) -> None:
        self.phases: dict[str, m.StartPhase] = {}
        self._wall = time.monotonic()
        self._cpu = time.process_time()  # the whole process, every thread (torch's pools, CUPTI's)

    def since_spawn(self, spawn_clock: float | None) -> None:
        """Record the 'interpreter' phase: the parent's spawn (its monotonic clock, the machine's) to ``main()``,
        with the CPU the process used before ``main()``. Nothing when the parent did not say when it spawned."""
        if spawn_clock is not None:
            self.phases["interpreter"] = m.StartPhase(wall_s=round(max(0.0, self._wall - spawn_clock), 4),
                                                      cpu_s=round(self._cpu, 4))

    def lap(self, name: str) -> None:
        """End phase ``name``: the seconds since the previous lap (or since ``main()`` began)."""
        wall, cpu = time.monotonic(), time.process_time()
        self.phases[name] = m.StartPhase(wall_s=round(wall - self._wall, 4), cpu_s=round(cpu - self._cpu, 4))
        self._wall, self._cpu = wall, cpu


class _Runner:
    """State of one candidate process."""

    def __init__(self, out_fd: int, setup: m.Setup) -> None:
        import torch

        from cuda_agent.harness._vmm import FD_SOCKET_ENV
        from cuda_agent.harness.runner_io import RunnerData

        self.torch = torch
        self.out_fd = out_fd
        self.device = setup.device
        fd = os.environ.get(FD_SOCKET_ENV)
        self.data = RunnerData(torch, self.device, socket.socket(fileno=int(fd)) if fd else None)
        self.setup = setup
        self.so_path: Path | None = None
        self.model: Any = None
        self.last: list[Any] = []
        self.timer: Any = None
        self.runtime: Any = None
        self.guard_before: Any = None
        self.loader: Any = None  # the backend's RunnerLoader (harness/device_adapter.py), made by start()
        self.workspace: Path | None = None
        self.torch_compute_allowed = False  # set by load: only the suite self-check allows it
        self.timer_before: Any = None

    def send(self, reply: Reply | Failure) -> None:
        write_all(self.out_fd, encode(reply))

    # ------------------------------------------------------------------ startup
    def start(self, lap: Callable[[str], None]) -> None:
        """Work done before the candidate exists: device init, pool warm-up, timer, guard snapshot; ``lap(name)``
        ends each phase (:class:`_StartClock`)."""
        from cuda_agent.harness.integrity import runtime  # an import failure is a harness error: no fallback
        from cuda_agent.harness.timing import DeviceTimer

        lap("imports")  # with torch's and the harness's in __init__
        torch = self.torch
        if self.device.startswith("cuda"):
            torch.cuda.set_device(torch.device(self.device))
            torch.ones(1, device=self.device).add_(1)
            torch.cuda.synchronize()
        lap("device_init")
        x = torch.ones(1 << 16)  # intra-op/OpenMP worker threads now, so the thread count is stable before load
        (x * 2).sum()
        lap("cpu_warmup")
        from cuda_agent.harness.device_adapter import load_runner_loader

        # The backend's language runtime is made ready before the guard's snapshot: what it does to the process
        # (environment, imports, threads) is not the candidate's doing.
        self.loader = load_runner_loader(self.setup.loader)
        self.loader.prepare(self.device)
        lap("loader_prepare")
        # Never a retake of the candidate's call: it would run again on the same data; a guarded part of the
        # timer's state, so the candidate cannot switch it on.
        self.timer = DeviceTimer.from_spec(self.device, self.setup.timer, retakes=False)
        lap("device_timer")
        self.runtime = runtime
        with runtime.audit_ops():  # lazy imports of the audit happen before the snapshot
            (x + 1).sum()
        # The fingerprints' modules too: the guard watches their functions only once they are imported (T7).
        from cuda_agent.harness import checksum, compare, module_state  # noqa: F401
        lap("audit_warmup")
        self.guard_before = runtime.take_guard_snapshot()
        self.timer_before = self.timer.state()
        lap("guard_snapshot")

    def _guard_violations(self) -> list[m.Violation]:
        """The guard's violations since the snapshot, plus any change to this runner's timer itself (T8)."""
        from cuda_agent.harness.timing import timer_state_changes

        out = [_violation(v) for v in self.runtime.compare_guard_snapshot(self.guard_before,
                                                                          self.runtime.take_guard_snapshot())]
        changes = timer_state_changes(self.timer_before, self.timer.state())
        if changes:
            out.append(m.Violation(rule="T8.runtime.timer_patched", message="the harness's timer was changed after "
                                   "the candidate loaded: " + "; ".join(changes[:6]) + "; the timer must stay untouched"))
        return out

    # ------------------------------------------------------------------ requests
    def load(self, req: m.Load) -> m.Loaded:
        torch = self.torch
        self.data.exchange = Path(req.exchange)
        self.data.output_specs = req.output_specs
        seeded = self._seeded_sets(req.task_code, req.seeded_sets)
        self.workspace = Path(req.workspace)
        sys.path.insert(0, req.workspace)
        # The backend's built artefacts (the loader puts them first on sys.path), then model_new.py below.
        self.so_path = self.loader.load(self.workspace, Path(req.so_dir), req.require_extension)
        import importlib.util

        path = Path(req.workspace) / "model_new.py"
        spec = importlib.util.spec_from_file_location("model_new", path)
        if spec is None or spec.loader is None:
            raise RuntimeError(f"cannot load {path}")
        module = importlib.util.module_from_spec(spec)
        sys.modules["model_new"] = module
        spec.loader.exec_module(module)
        cls = getattr(module, "ModelNew", None)
        if cls is None:
            raise RuntimeError(f"{path.name} defines no class ModelNew")
        torch.manual_seed(req.init_seed)
        with torch.device(self.device):
            model = cls(*req.init_inputs)
        from cuda_agent.harness.model_mode import set_task_mode

        self.model = set_task_mode(model, torch, self.device)
        self.torch_compute_allowed = req.torch_compute_allowed
        return m.Loaded(violations=self._guard_violations(), seeded=seeded)

    def _seeded_sets(self, task_code: str | None, seeds: dict[str, int]) -> dict[str, m.SeededSet]:
        """Input sets made here from their seeds, before any candidate code exists.

        The task's code runs in a throw-away namespace that is cleared (and collected) before the candidate's
        extension and module are imported, so the reference model is absent once they load (T3/T6). The trusted
        side compares the fingerprints with its own and hands over every set that differs. The guard snapshot is
        retaken afterwards: whatever the task's code did is not the candidate's doing.
        """
        if not seeds or not task_code:
            return {}
        import gc

        from cuda_agent.harness.compare import fingerprint
        from cuda_agent.harness.reference_sets import generate_inputs

        torch = self.torch
        out: dict[str, m.SeededSet] = {}
        namespace: dict[str, Any] = {"__name__": "cuda_agent_task_inputs"}
        try:
            exec(compile(task_code, "<task>", "exec"), namespace)  # noqa: S102 (the task's own code, from the task store)
            get_inputs = namespace["get_inputs"]
            for key, seed in seeds.items():
                try:
                    with self.data.sets_pool():  # where the sets handed over live: apart from the calls' allocations
                        values = generate_inputs(torch, get_inputs, int(seed), self.device)
                except Exception as exc:  # the trusted side then stages this set
                    out[key] = m.SeededSet(error=f"{type(exc).__name__}: {exc}")
                    continue
                self.data.inputs[int(key)] = values
                out[key] = m.SeededSet(fingerprints=[fingerprint(v) if type(v) is torch.Tensor else None for v in values])
        except Exception as exc:
            return {key: m.SeededSet(error=f"task code: {type(exc).__name__}: {exc}") for key in seeds}
        finally:
            get_inputs = None
            namespace.clear()
            gc.collect()
            if self.device.startswith("cuda"):
                torch.cuda.synchronize()
            self.guard_before = self.runtime.take_guard_snapshot()
        self.timer_before = self.timer.state()
        return out

    def inputs(self, req: m.Inputs) -> m.Received | Failure:
        try:
            self.data.receive(req.set, req.tensors)
        except Exception as exc:  # noqa: BLE001 - with descriptors: the trusted side hands this set over by files
            if not any(d.fd is not None for d in req.tensors):
                raise
            return Failure(error=f"{type(exc).__name__}: {exc}"[:500], fd_error=True)
        return m.Received(set=req.set)

    def drop_inputs(self, req: m.DropInputs) -> m.InputsDropped:
        for k in req.sets:
            self.data.inputs.pop(k, None)
        return m.InputsDropped(sets=list(req.sets))

    def call(self, req: m.Call) -> m.Called:
        torch = self.torch
        clock = time.perf_counter
        t0 = clock()
        # The previous call's outputs go before this call's inputs are staged: freeing them may run code of the
        # candidate's (a storage's deleter), which must not see the staged inputs before the timer starts (session
        # 37's red team computed the next output in such a deleter: reward 3). The cyclic collector stays off until
        # the call is described, so no finalizer of the candidate's runs in that window either.
        self.last = []
        gc_was_on = gc.isenabled()
        gc.disable()
        try:
            return self._call(req, torch, clock, t0)
        finally:
            if gc_was_on:
                gc.enable()

    def _call(self, req: m.Call, torch: Any, clock: Callable[[], float], t0: float) -> m.Called:
        from cuda_agent.harness.compare import fingerprint

        args = self.data.copy_of(req.set)
        t1 = clock()
        self.data.poison()
        t2 = clock()
        ops: list[Any] = []
        kernels: list[str] = []
        casts: list[tuple[str, str, str]] = []
        model, runtime, audit = self.model, self.runtime, req.audit

        def forward() -> Any:
            if not audit:
                return model(*args)
            with runtime.audit_ops() as seen:
                result = model(*args)
            ops.extend(seen)
            kernels.extend(getattr(seen, "kernels", []))
            casts.extend(getattr(seen, "casts", []))
            return result

        # Under no_grad, as the baselines and KernelBench's own timing run: recording autograd's graph would be host
        # work (and memory) the baselines do not pay.
        with torch.no_grad():
            out, ms, host_ms = self.timer.time_call(forward, flush=req.flush, warm=args)
        t3 = clock()
        violations: list[Any] = []
        if audit and not self.torch_compute_allowed:  # the suite self-check runs the task's own Model
            violations += runtime.op_audit_violations(ops, "cuda" if self.device.startswith("cuda") else "cpu",
                                                      casts, _precision_floor(torch, args))
            if kernels and self.workspace is not None:
                violations += self.loader.kernel_origin_violations(kernels, self.workspace, self.so_path)
        outs = list(out) if isinstance(out, (tuple, list)) else [out]
        ranges = [_storage_range(a) for a in args if type(a) is torch.Tensor]
        metas = [self._describe_output(j, o, ranges) for j, o in enumerate(outs)]
        self.last = outs
        t4 = clock()
        prints = [fingerprint(a) if type(a) is torch.Tensor else None for a in args]
        state = _module_state(model, torch) if req.state else None
        t5 = clock()
        work = {"copy_inputs": t1 - t0, "poison": t2 - t1, "timed": t3 - t2, "outputs": t4 - t3,
                "input_fingerprints": t5 - t4}
        timer = self.timer
        return m.Called(ms=ms, host_ms=host_ms, enqueue_ms=timer.last_enqueue_ms, spin_us=timer.last_spin_us,
                        spin_blocked=timer.last_spin_blocked, outputs=metas, input_fingerprints=prints,
                        ops=[str(o) for o in ops][:200], violations=[_violation(v) for v in violations],
                        threads=_native_threads(), work_ms={k: round(v * 1e3, 3) for k, v in work.items()},
                        state=state)

    def _describe_output(self, j: int, o: Any, ranges: list[tuple[int, int]]) -> m.OutputMeta:
        from cuda_agent.harness.compare import fingerprint

        kind = f"{type(o).__module__}.{type(o).__qualname__}"
        if type(o) is not self.torch.Tensor:
            return m.OutputMeta(type=kind, exact_tensor=False)
        r = _storage_range(o)
        dtype = str(o.dtype).removeprefix("torch.")
        specs = self.data.output_specs
        spec = specs[j] if j < len(specs) else None
        # Only outputs the trusted side will read are fingerprinted (a huge wrong one is not touched).
        matches = spec is not None and list(o.shape) == list(spec.shape or []) and dtype == spec.dtype
        return m.OutputMeta(type=kind, exact_tensor=True, dtype=dtype, shape=list(o.shape), stride=list(o.stride()),
                            device=o.device.type, contiguous=o.is_contiguous(), nbytes=o.numel() * o.element_size(),
                            alias_input=any(r[0] < b[1] and b[0] < r[1] for b in ranges) if r[1] > r[0] else False,
                            requires_grad=bool(o.requires_grad), fingerprint=fingerprint(o) if matches else None)

    def export(self, req: m.Export) -> m.Exported:
        descs, fds = self.data.export(self.last, req.transport)
        if fds:  # the descriptors travel first: they are queued on the socket before the reply is read
            from cuda_agent.harness._vmm import send_fds

            send_fds(self.data.fd_sock, fds)
        return m.Exported(outputs=descs, vmm_error=self.data.vmm_error)

    def calibrate(self, req: m.Calibrate) -> m.Calibrated | Failure:
        """The protocol's own cost per call (null calls), measured before the candidate is loaded, under the
        device's lock; the spin is sized again first, alone on the device, and the timer's state retaken."""
        if self.model is not None:
            return Failure(error="calibrate must come before load")
        from cuda_agent.harness.timing_stats import calibrated_overhead

        self.timer.recalibrate_spin()
        self.timer_before = self.timer.state()
        return m.Calibrated(overhead_ms=calibrated_overhead(self.timer), spin=self.timer.spin_calibration())

    def guard(self, req: m.Guard) -> m.Guarded:
        peak = int(self.torch.cuda.max_memory_allocated()) if self.device.startswith("cuda") else None
        return m.Guarded(violations=self._guard_violations(), threads=_native_threads(), peak_bytes=peak)

    def kernels(self, req: m.Kernels) -> m.KernelTimes:
        from cuda_agent.harness.profiling import kernel_breakdown, profiler_sum_ms

        violations = self._guard_violations()  # first: threads the profiler starts are the harness's
        args = self.data.copy_of(req.set)
        model = self.model
        reply = m.KernelTimes(violations=violations)
        before = set(_native_thread_ids())
        with self.torch.no_grad():
            if req.breakdown:
                reply.per_kernel = kernel_breakdown(lambda: model(*args), self.device)
            if req.profiler_sum:
                reply.profiler_sum_ms = profiler_sum_ms(lambda: model(*args), self.device)
        self.runtime._HARNESS_THREADS.update(set(_native_thread_ids()) - before)
        return reply


def _precision_floor(torch: Any, args: Any) -> str:
    """The least precise floating dtype among the forward's tensor inputs (torch's default dtype when none is)."""
    dtypes = [a.dtype for a in args if type(a) is torch.Tensor and a.dtype.is_floating_point]
    worst = max(dtypes, key=lambda d: torch.finfo(d).eps, default=torch.get_default_dtype())
    return str(worst).removeprefix("torch.")


def _storage_range(t: Any) -> tuple[int, int]:
    """[start, end) byte addresses of the storage behind tensor ``t``."""
    s = t.untyped_storage()
    start = s.data_ptr()
    return start, start + s.nbytes()


def _native_threads() -> int:
    """Threads of this process as the kernel sees them (Python and native)."""
    return len(_native_thread_ids()) or -1


def _native_thread_ids() -> list[str]:
    try:
        return os.listdir("/proc/self/task")
    except OSError:
        return []



def _module_state(model: Any, torch: Any) -> dict[str, str]:
    from cuda_agent.harness.module_state import state_digest

    return state_digest(model, torch)[1]


def _violation(v: Any) -> m.Violation:
    data = v.model_dump(mode="json") if hasattr(v, "model_dump") else dict(v)
    return m.Violation(rule=str(data.get("rule")), message=str(data.get("message")), file=data.get("file"),
                       line=data.get("line"))


def _failure(exc: BaseException) -> Failure:
    return Failure(error=f"{type(exc).__name__}: {exc}"[:2000], traceback=traceback.format_exc()[-4000:])


def main() -> int:
    """Entry point inside the sandbox."""
    clock = _StartClock()
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent ends this process, not the terminal's Ctrl-C
    # Before torch starts any thread: every thread of this process then blocks the signals a candidate's timer or
    # handler would run on (T10; the guard watches that it stays so).
    from cuda_agent.harness.integrity.signal_guard import block_async_signals

    block_async_signals()
    in_fd, out_fd = (int(x) for x in os.environ["CUDA_AGENT_RUNNER_FDS"].split(","))
    reader = LineReader(in_fd)
    try:
        first = reader.read_line(600.0)
        setup = decode_request(first or b"", {m.Setup.op: m.Setup})
    except (EOFError, WireError) as exc:
        write_all(out_fd, encode(Failure(error=f"runner start failed: no setup message ({exc})")))
        return 1
    clock.since_spawn(setup.spawn_clock)  # type: ignore[attr-defined]
    clock.lap("setup")
    runner = _Runner(out_fd, setup)  # type: ignore[arg-type]
    try:
        runner.start(clock.lap)
    except Exception as exc:  # noqa: BLE001 - reported to the parent, which fails the evaluation as a harness error
        runner.send(Failure(error=f"runner start failed: {type(exc).__name__}: {exc}", traceback=traceback.format_exc()[-3000:]))
        return 1
    from cuda_agent.harness.timing_env import process_timing_state

    runner.send(m.Ready(pid=os.getpid(), threads=runner.torch.get_num_threads(), spin=runner.timer.spin_calibration(),
                        start_phases=clock.phases, start_cpu_s=round(time.process_time(), 4),
                        ready_clock=time.monotonic(), timing_state=process_timing_state(runner.torch)))
    while True:
        try:
            line = reader.read_line(3600.0 * 24)
        except EOFError:
            return 0
        if line is None:
            continue
        try:
            req = decode_request(line, m.RUNNER_REQUESTS)
        except WireError as exc:
            runner.send(Failure(error=f"unreadable request: {exc}"))
            continue
        if isinstance(req, m.Exit):
            return 0
        try:
            runner.send(getattr(runner, req.op)(req))
        except BaseException as exc:  # noqa: BLE001 - everything the candidate raises is reported
            runner.send(_failure(exc))
            if isinstance(exc, (KeyboardInterrupt, SystemExit)):
                return 0


if __name__ == "__main__":
    sys.exit(main())
