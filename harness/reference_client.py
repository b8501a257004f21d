"""Parent side of a reference process: a typed client over the harness's one wire format.

:class:`ReferenceClient` starts ``python -m cuda_agent.harness.reference`` with ``Popen`` (fork+exec of a fresh
interpreter, never a fork of a process that touched CUDA), by the spawner thread (harness/_spawner.py). Started
without a task it is a spare: it imports torch meanwhile and gets its task by :meth:`ReferenceClient.start`. Every
other method sends one typed request (:mod:`cuda_agent.harness.messages`) and returns its typed reply's content;
a failure in the child is a :class:`~cuda_agent.harness.reference_sets.ReferenceError_` naming what went wrong.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
from collections.abc import Callable
from typing import Any

from cuda_agent.harness import _spawner
from cuda_agent.harness import reference_messages as m
from cuda_agent.harness.reference import CHANNEL_ENV
from cuda_agent.harness.reference_sets import ReferenceError_
from cuda_agent.harness.timing_env import timing_env
from cuda_agent.harness.wire import Failure, LineReader, Reply, Request, WireError, decode_reply, encode, write_all

#: Seconds a process that acknowledged a stop request may take to exit (CUDA context teardown; more under load).
EXIT_GRACE_S = 120.0
#: Seconds to wait for the acknowledgement of a stop request before the process is killed.
ACK_TIMEOUT_S = 10.0


class ReferenceClient:
    """A warm reference process for one task on one device (see the module docstring)."""

    def __init__(self, device: str, *, threads: int | None = None, timer: m.TimerSpec | None = None,
                 clone_inputs: bool = False, net_overhead: bool = False, compile_threads: int | None = None,
                 preimport_compile: bool = False, cpus: frozenset[int] | None = None,
                 timing_lock: Any = None) -> None:
        """:param device: 'cpu' or 'cuda:N'. :param threads: intra-op/OpenMP threads (the candidate's count).
        :param timer: the timing protocol's per-process part (the candidate's). :param clone_inputs: baselines on a
        clone per call. :param net_overhead: baselines net of the protocol's cost. :param compile_threads: inductor
        compile workers. :param preimport_compile: import torch.compile's machinery before the task arrives.
        :param cpus: the cores the child starts on. :param timing_lock: the device's
        :class:`~cuda_agent.harness.device_lock.TimingLock`: the child holds it shared while it builds the task's
        model on the device (:meth:`start`), so that never runs beside a timed batch."""
        self.device = device
        self.timing_lock = timing_lock
        self.threads_wanted = threads
        self.timer = timer or m.TimerSpec()
        self.clone_inputs = clone_inputs
        self.net_overhead = net_overhead
        #: The baselines were warmed (:meth:`warm_baselines`) in this process.
        self.warmed = False
        #: When (monotonic) it was warmed for a session that has not acquired it yet; None otherwise (the pool's
        #: ``mark_warmed`` and ``acquire``): under memory pressure such a process closes after the others.
        self.awaiting_session: float | None = None
        #: Bytes of its standing hold in the memory budget (set when it gets its task; None = unknown).
        self.hold_bytes: int | None = None
        #: Sessions using this process now (the pool never closes one in use to make room).
        self.users = 0
        #: Taken out of service (device memory stayed pinned): closed when its last session ends.
        self.retired = False
        #: The task's ``get_init_inputs()`` once started (None for a spare).
        self.init_inputs: list[Any] | None = None
        #: The precision flags the process runs the reference and baselines with (set by :meth:`start`).
        self.backend_flags: dict[str, Any] = {}
        self._stop_sent = False
        self._closed = False
        self._lock = threading.RLock()  # one request at a time, whatever thread asks
        #: Held by the one session using this process, from its start to the end of its sets' drop: the leak probe,
        #: the peak counter and the T5 input check are process-wide, so two sessions must not overlap on them.
        self.session_lock = threading.Lock()
        self._set_counter = 0
        #: Called once when the process is closed (the pool gives its memory-budget hold back here).
        self.on_close: Callable[[], None] | None = None
        to_child_r, to_child_w = os.pipe()
        from_child_r, from_child_w = os.pipe()
        # Descriptors (memory files, device allocations) travel beside the messages over this socket.
        self._fd_sock, child_sock = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        env = dict(os.environ)
        env.update(timing_env(os.environ))  # as the candidate's runner gets it (harness/timing_env.py)
        env[CHANNEL_ENV] = f"{to_child_r},{from_child_w},{child_sock.fileno()}"
        if threads is not None:
            env["OMP_NUM_THREADS"] = str(threads)
        if compile_threads is not None:
            env["TORCHINDUCTOR_COMPILE_THREADS"] = str(compile_threads)
        cmd = [sys.executable, "-m", "cuda_agent.harness.reference"] + (["--preimport"] if preimport_compile else [])
        self.proc = _spawner.popen(cmd, pass_fds=(to_child_r, from_child_w, child_sock.fileno()), env=env,
                                   stdin=subprocess.DEVNULL, cpus=cpus)
        os.close(to_child_r)
        os.close(from_child_w)
        child_sock.close()
        self._write_fd = to_child_w
        self._reader = LineReader(from_child_r)

    # ------------------------------------------------------------------ state
    @property
    def started(self) -> bool:
        """The child has its task (a spare has not, until :meth:`start`)."""
        return self.init_inputs is not None

    @property
    def alive(self) -> bool:
        """The child is running."""
        return self.proc.poll() is None

    # ------------------------------------------------------------------ requests
    def request(self, req: Request, timeout_s: float = 600.0, pass_fds: list[int] | tuple[int, ...] = ()) -> Any:
        """Send ``req`` (``pass_fds``: descriptors sent just before it; ours stay open) and return its reply."""
        with self._lock:
            if not self.alive:
                raise ReferenceError_("reference process is not running")
            try:
                if pass_fds:
                    from cuda_agent.harness._vmm import send_fds

                    send_fds(self._fd_sock, list(pass_fds))
                write_all(self._write_fd, encode(req))
            except OSError as exc:
                raise ReferenceError_(f"reference process is gone: {exc}") from exc
            return self._reply(req, timeout_s)

    def _reply(self, req: Request, timeout_s: float) -> Reply:
        try:
            line = self._reader.read_line(timeout_s)
        except (EOFError, OSError) as exc:
            code = self.proc.poll()
            self.close()
            raise ReferenceError_(f"reference process died (exit code {code}) during {req.op!r}") from exc
        except WireError as exc:
            self.close()
            raise ReferenceError_(f"reference process: {exc}") from exc
        if line is None:
            self.close()
            raise ReferenceError_(f"reference process did not answer {req.op!r} within {timeout_s:.0f} s")
        try:
            reply = decode_reply(line, req.Reply)
        except WireError as exc:
            raise ReferenceError_(f"reference process: {exc}") from exc
        if isinstance(reply, Failure):
            raise ReferenceError_(f"reference process ({req.op}): {reply.error}\n{reply.traceback}".rstrip())
        return reply

    def start(self, code: str, init_seed: int = 42, timeout_s: float = 300.0) -> None:
        """Give the child its task and wait until it has built the model."""
        if self.started:
            raise ReferenceError_("this reference process already has a task")
        lock_path = self.timing_lock.path_for_child() if self.timing_lock is not None else None
        reply = self.request(m.Start(code=code, device=self.device, init_seed=init_seed, threads=self.threads_wanted,
                                     timer=self.timer, clone_inputs=self.clone_inputs,
                                     net_overhead=self.net_overhead, lock_path=lock_path), timeout_s)
        self.init_inputs = reply.init_inputs
        self.backend_flags = dict(reply.backend_flags)

    def next_set_index(self) -> int:
        """A set index no other session of this process has used (sessions may share a warm process)."""
        with self._lock:
            self._set_counter += 1
            return self._set_counter - 1

    def make_set(self, k: int, seed: int, exchange: str | None, transport: str = "ipc", stage: bool = True,
                 widen: list[Any] | None = None, gate: list[float] | None = None,
                 shrink: float | None = None) -> m.MadeSet:
        """Make input set ``k`` from ``seed`` (and stage it for the runner when ``stage``); ``widen``: a widened set
        (its reply says ``inconclusive`` when the reference is not finite, or with ``gate`` too sensitive, at any
        widening); ``shrink``: make it again at the widening it was made at."""
        return self.request(m.MakeSet(set=k, seed=seed, exchange=exchange, transport=transport, stage=stage,
                                      widen=widen, gate=gate, shrink=shrink))

    def stage_set(self, k: int, exchange: str | None, transport: str = "ipc", reuse: bool = False) -> list[m.TensorDesc]:
        """Stage set ``k`` for the runner after all; its tensors' descriptions."""
        return self.request(m.StageSet(set=k, exchange=exchange, transport=transport, reuse=reuse)).tensors

    def stage_fds(self, k: int, vmm: bool = False) -> tuple[m.StagedFds, list[int]]:
        """Stage set ``k`` in memory files or device allocations: (the reply, the descriptors, ours to close)."""
        from cuda_agent.harness._vmm import recv_fds

        with self._lock:
            reply = self.request(m.StageFds(set=k, vmm=vmm))
            try:
                return reply, recv_fds(self._fd_sock, reply.fds, 5.0)
            except ValueError as exc:
                raise ReferenceError_(f"stage_fds: {exc}") from exc

    def drop_sets(self, ks: list[int]) -> int:
        """Free sets ``ks``; device bytes still held beyond the model."""
        return self.drop(ks).pinned_bytes

    def drop(self, ks: list[int]) -> m.Dropped:
        """Free sets ``ks``: the leak probe, the dropped sets whose pristine inputs had changed, the peak bytes."""
        return self.request(m.DropSets(sets=list(ks)))

    def release_exports(self, ks: list[int]) -> m.ExportsReleased:
        """Free the device allocations sets ``ks`` were exported in (their runner copies were dropped)."""
        return self.request(m.ReleaseExports(sets=list(ks)))

    def inputs_intact(self) -> list[int]:
        """Sets whose pristine inputs changed since they were made."""
        return self.request(m.InputsIntact()).changed

    def check(self, k: int, outputs: list[m.ExportedOutput | None], metas: list[m.OutputMeta],
              tolerances: dict[str, tuple[float, float]], fds: list[int] = ()) -> m.Verdict:  # type: ignore[assignment]
        """The reference's verdict on one call's exported outputs (``fds``: the device allocations' descriptors)."""
        return self.request(m.Check(set=k, outputs=outputs, metas=metas, tolerances=tolerances), pass_fds=fds)

    def prepare_baseline(self, which: str, k: int, compile_mode: str = "default") -> bool:
        """One untimed baseline call on set ``k``; True when it compiled."""
        return self.request(m.PrepareBaseline(which=which, set=k, compile_mode=compile_mode)).compiled

    def warm_baselines(self, compile_mode: str = "default", with_compile: bool = True,
                       lock_path: str | None = None) -> bool:
        """Warm the baselines on public inputs; True when this compiled. ``lock_path``: the device's timing lock,
        which the process holds shared around the warm-up's device work (never pass it while this thread holds
        that lock: the process would wait for a turnstile an exclusive waiter holds behind this thread's hold)."""
        return self.request(m.WarmBaselines(compile_mode=compile_mode, with_compile=with_compile,
                                            lock_path=lock_path)).compiled

    def time_baseline(self, which: str, sets: list[int], calls: int, warmup: int, compile_mode: str = "default") -> list[float]:
        """Per-call ms of a baseline over rotated ``sets`` (hold the device's timing lock around it)."""
        return self.request(m.TimeBaseline(which=which, sets=list(sets), calls=calls, warmup=warmup,
                                           compile_mode=compile_mode)).ms

    def baseline_host_stats(self, take: bool = False) -> dict[str, dict[str, float]]:
        """Per baseline kind: timed calls, calls over the spin, retakes, the longest enqueue, and on CUDA the
        caching allocator's retries and out-of-memory errors during the batches; ``take``: since the last take,
        then reset."""
        return self.request(m.BaselineHostStats(take=take)).stats

    def profiler_sum(self, which: str, k: int, compile_mode: str = "default") -> float:
        """The release's profiler-sum time of a baseline on set ``k``."""
        return self.request(m.ProfilerSum(which=which, set=k, compile_mode=compile_mode)).ms

    def threads(self) -> int:
        """The child's intra-op thread count."""
        return self.request(m.Threads()).threads

    def timing_state(self) -> dict[str, Any]:
        """The child's timing state now (harness/timing_env.py ``process_timing_state``)."""
        return dict(self.request(m.Threads()).timing_state)

    # ------------------------------------------------------------------ ending
    def request_stop(self) -> None:
        """Ask the child to exit, without waiting (:meth:`close` waits). Idempotent."""
        with self._lock:
            if self._stop_sent or self.proc.poll() is not None:
                return
            self._stop_sent = True
            try:
                write_all(self._write_fd, encode(m.Stop()))
            except OSError:  # a child that cannot hear it is killed by close()
                pass

    def close(self) -> None:
        """Stop the child: ask it to exit; once it acknowledged, wait for its exit (up to :data:`EXIT_GRACE_S`: a
        CUDA context's teardown takes seconds on a loaded host), else kill it."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        self.request_stop()
        if self.proc.poll() is None:
            acknowledged = False
            try:
                while not acknowledged:  # replies still in the pipe come first
                    line = self._reader.read_line(ACK_TIMEOUT_S)
                    if line is None:
                        break
                    acknowledged = _is_stopping(line)
            except (EOFError, OSError, WireError):
                acknowledged = True  # it closed its end: it is exiting
            try:
                self.proc.wait(EXIT_GRACE_S if acknowledged else 0.1)
            except subprocess.TimeoutExpired:
                pass
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(30)
        for fd in (self._write_fd, self._reader.fd):
            try:
                os.close(fd)
            except OSError:
                pass
        self._fd_sock.close()
        release, self.on_close = self.on_close, None
        if release is not None:  # its standing hold in the device's memory budget
            release()


def _is_stopping(line: bytes) -> bool:
    try:
        return isinstance(decode_reply(line, m.Stopping), m.Stopping)
    except WireError:
        return False


def close_all(refs: list[ReferenceClient]) -> None:
    """Close several reference processes at once: each is asked to exit before any is waited for, so the whole
    takes about one process's exit (CUDA context teardown, about a second each on the H200) instead of the sum."""
    for ref in refs:
        ref.request_stop()
    for ref in refs:
        ref.close()
