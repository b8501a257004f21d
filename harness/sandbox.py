"""Sandboxed, one-shot candidate processes started ahead of time.

Each candidate evaluation runs ``cuda_agent.harness.candidate_runner`` in a
fresh process: under bubblewrap when usable (read-only root and workspace, a
private tmpfs /tmp, no network, own pid namespace, a user namespace as uid
65534, die-with-parent, ``/dev`` bound on CUDA), otherwise as a plain
subprocess (recorded as isolation ``process``). Processes are started from a
pool ahead of time (torch imported, device initialised) with ``Popen``
(fork+exec, never a bare fork of a CUDA process), used for ONE evaluation,
then killed. A watchdog thread kills a process whose tree exceeds the RSS
limit (psutil) or its GPU memory limit (NVML); ``RLIMIT_AS`` is not used
because it breaks CUDA initialisation.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

import psutil
import structlog

from cuda_agent.errors import CudaAgentError
from cuda_agent.harness import _spawner
from cuda_agent.harness.candidate_watchdog import WATCHDOGS
from cuda_agent.harness.process_tree import descendant_pids
from cuda_agent.harness._bwrap import BwrapSpec, Isolation, IsolationUnavailable
from cuda_agent.harness._bwrap import resolve_isolation as _resolve
from cuda_agent.harness.messages import Ready, Setup, TimerSpec
from cuda_agent.harness.wire import Failure, LineReader, Reply, Request, WireError, decode_reply, encode, write_all
from cuda_agent.schemas.result import StartPhase

log = structlog.get_logger(__name__)


#: Raised when the settings require bubblewrap and it cannot run here (kept name of the candidate sandbox).
SandboxError = IsolationUnavailable


class CandidateDied(CudaAgentError):
    """The candidate process ended or was killed; ``reason`` says why ('crash', 'timeout', 'memory', ...)."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


@dataclass(frozen=True)
class RunnerOptions:
    """How candidate runners of one evaluator are started and watched (from the settings and experiments)."""

    device: str
    isolation: str = "auto"
    cpu_threads: int = 1
    timer: TimerSpec = field(default_factory=TimerSpec)
    memory_mb: int = 16384
    gpu_memory_mb: int | None = None
    startup_timeout_s: float = 120.0
    watchdog_interval_s: float = 0.05
    output_log_limit: int = 4000
    cuda_transport: str = "auto"
    unshare_pid: bool | None = None
    sandbox_uid: int | None = 65534
    bwrap_path: str | None = None
    cpus: frozenset[int] | None = None
    scratch_dir: Path | None = None
    #: The backend's RunnerLoader (``"module:Class"``, harness/device_adapter.py); None = ``cuda_extension``.
    loader: str | None = None


def resolve_isolation(options: RunnerOptions) -> Isolation:
    """The isolation ``options.isolation`` means here (bwrap as ``options.sandbox_uid`` where possible).

    :raises SandboxError: bubblewrap is required but unusable.
    """
    iso = _resolve(options.isolation, bwrap_path=options.bwrap_path, uid=options.sandbox_uid)
    if iso.level == "process" and options.isolation != "process":
        log.warning("sandbox.fallback", isolation="process", reason=iso.reason)
    for note in iso.notes:
        log.warning("sandbox.degraded", note=note)
    return iso


def _candidate_env(device: str, fds: tuple[int, int], threads: int, fd_socket: int) -> dict[str, str]:
    """The runner's environment, built by the trusted side (never by the candidate); the timing protocol comes in
    its ``setup`` message."""
    keep = ("PATH", "LD_LIBRARY_PATH", "CUDA_HOME", "CUDA_PATH", "LANG", "LC_ALL", "PYTHONPATH", "VIRTUAL_ENV")
    env = {k: v for k, v in os.environ.items() if k in keep or k.startswith("NVIDIA_")}
    env.update(
        HOME="/tmp",
        TMPDIR="/tmp",
        PYTHONDONTWRITEBYTECODE="1",
        PYTHONNOUSERSITE="1",
        PYTHONUNBUFFERED="1",
        CUDA_AGENT_RUNNER_FDS=f"{fds[0]},{fds[1]}",
        OMP_NUM_THREADS=str(threads),  # the reference process uses the same count (sandbox.cpu_threads)
    )
    from cuda_agent.harness.timing_env import timing_env

    env.update(timing_env(os.environ))  # as the reference process times its baselines (CUPTI torn down, allocator)
    from cuda_agent.harness._vmm import FD_SOCKET_ENV

    env[FD_SOCKET_ENV] = str(fd_socket)
    if "CUDA_VISIBLE_DEVICES" in os.environ:
        env["CUDA_VISIBLE_DEVICES"] = os.environ["CUDA_VISIBLE_DEVICES"]
    return env


def runner_environment(device: str, threads: int) -> dict[str, str]:
    """The environment a runner for ``device`` with ``threads`` intra-op threads starts with, less the descriptors
    of its pipes (benchmarks/host_sync_parity.py starts processes with it)."""
    from cuda_agent.harness._vmm import FD_SOCKET_ENV

    env = _candidate_env(device, (0, 0), threads, 0)
    env.pop("CUDA_AGENT_RUNNER_FDS", None)
    env.pop(FD_SOCKET_ENV, None)
    return env


class CandidateProcess:
    """One pre-started sandboxed runner, used for one evaluation, then killed.

    :param device: 'cpu' or 'cuda:N'.
    :param exchange: folder shared with the trusted side (bound writable into the sandbox).
        Its sibling ``<exchange>-stage`` is bound read-only: the evaluator copies the workspace
        and the built module there (the real workspace and build folders stay invisible).
    :param isolation: the resolved isolation (:func:`resolve_isolation`).
    """

    def __init__(self, exchange: Path, options: RunnerOptions, isolation: Isolation,
                 wrapper: list[str] | None = None) -> None:
        self.device = options.device
        self.exchange = exchange
        self.stage = exchange.with_name(exchange.name + "-stage")
        self.stage.mkdir(exist_ok=True)
        self.options = options
        self.isolation = isolation.level
        self.used = False
        self.dead_reason: str | None = None
        self.dead_message = ""
        self._log: deque[str] = deque(maxlen=400)
        self._log_chars = 0
        req_r, req_w = os.pipe()
        resp_r, resp_w = os.pipe()
        # Descriptors cross this socket: of exported device buffers ('vmm' transport) from the runner, of fresh
        # input sets (memory files, device allocations: harness/fresh_sets.py) to it.
        self.fd_sock, child_sock = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self._req_w = req_w
        self._reader = LineReader(resp_r)
        cmd = list(wrapper or []) + [sys.executable, "-s", "-P", "-m", "cuda_agent.harness.candidate_runner"]
        # -s: no user site; -P: the working directory is not put on sys.path. Not -I: it also drops
        # PYTHONPATH, and installs outside site-packages (air-gapped GPU machines: --target DIR plus
        # PYTHONPATH) then cannot import the runner.
        cuda = self.device.startswith("cuda")
        ipc = cuda and options.cuda_transport == "ipc"
        spec = BwrapSpec(
            writable=[exchange],
            readonly=[self.stage],
            dev_bind=cuda,
            # Host namespaces only for the 'ipc' transport (its reference counters live in the host's /dev/shm);
            # the other transports under bubblewrap need neither, so the candidate cannot see or signal the trusted
            # processes.
            share_ipc=ipc,
            unshare_pid=options.unshare_pid if options.unshare_pid is not None else not ipc,
        )
        cmd = isolation.prefix(spec) + cmd
        self.popen = _spawner.popen(  # by the spawner thread: see harness/_spawner.py
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            pass_fds=(req_r, resp_w, child_sock.fileno()),
            env=_candidate_env(self.device, (req_r, resp_w), options.cpu_threads, child_sock.fileno()),
            start_new_session=True,
            cwd="/tmp" if isolation.level == "bwrap" else str(exchange),
            cpus=options.cpus,
        )
        os.close(req_r)
        os.close(resp_w)
        child_sock.close()
        self.started_at = time.monotonic()
        self._stop = threading.Event()
        self._drain = threading.Thread(target=self._drain_output, daemon=True)
        self._drain.start()
        WATCHDOGS.add(self)  # one thread of this process polls every live candidate's memory
        self._ready: Ready | None = None
        try:  # the runner reads it as it starts: the pipe holds it until then
            write_all(self._req_w, encode(Setup(device=self.device, timer=options.timer, loader=options.loader,
                                                spawn_clock=self.started_at)))
        except OSError:
            pass  # a runner that died at once is reported by wait_ready

    # ------------------------------------------------------------------ output and watchdogs
    def _drain_output(self) -> None:
        assert self.popen.stdout is not None
        limit = self.options.output_log_limit
        for raw in iter(lambda: self.popen.stdout.read1(65536), b""):  # type: ignore[union-attr]
            text = raw.decode(errors="replace")
            self._log.append(text)
            self._log_chars += len(text)
            while self._log_chars > 4 * limit and len(self._log) > 1:
                self._log_chars -= len(self._log.popleft())

    def output_tail(self) -> str:
        """Last characters the candidate printed (stdout and stderr)."""
        text = "".join(self._log)
        return text[-self.options.output_log_limit :]

    def _tree(self) -> list[psutil.Process]:
        """The runner and every process below it (freeze, kill and the memory watchdog use it)."""
        pids = descendant_pids(self.popen.pid)
        if pids is None:  # no /proc/<pid>/task/<tid>/children here: psutil's scan of every process
            try:
                root = psutil.Process(self.popen.pid)
                return [root] + root.children(recursive=True)
            except psutil.Error:
                return []
        procs = []
        for pid in pids:
            try:
                procs.append(psutil.Process(pid))
            except psutil.Error:
                pass
        return procs

    def poll_memory(self, gpu_usage: dict[int, int] | None) -> bool:
        """One memory check of the process tree (host RSS, and GPU memory from ``gpu_usage``, the device's
        pid -> bytes snapshot); kills the tree over a limit. True when there is nothing left to watch."""
        opts = self.options
        if self._stop.is_set() or self.popen.poll() is not None:
            return True
        rss = 0
        pids = set()
        for p in self._tree():
            try:
                rss += p.memory_info().rss
                pids.add(p.pid)
            except psutil.Error:
                pass
        if rss > opts.memory_mb * 2**20:
            self._kill("memory", f"candidate used {rss / 2**20:.0f} MiB of host memory, limit {opts.memory_mb} MiB")
            return True
        if opts.gpu_memory_mb and gpu_usage is not None:
            used = sum(gpu_usage.get(pid, 0) for pid in pids)
            if used > opts.gpu_memory_mb * 2**20:
                self._kill("memory", f"candidate used {used / 2**20:.0f} MiB of GPU memory, limit {opts.gpu_memory_mb} MiB")
                return True
        return False

    def _kill(self, reason: str, message: str) -> None:
        if self.dead_reason is None:
            self.dead_reason, self.dead_message = reason, message
        try:
            os.killpg(self.popen.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        for p in self._tree():
            try:
                p.kill()
            except psutil.Error:
                pass

    # ------------------------------------------------------------------ stop/continue (trusted reads)
    def freeze(self) -> None:
        """SIGSTOP the whole process tree: nothing of the candidate runs while its outputs are read."""
        self._frozen = self._tree()
        for p in self._frozen:
            try:
                p.suspend()
            except psutil.Error:
                pass

    def thaw(self) -> None:
        """SIGCONT the processes :meth:`freeze` stopped (a stopped tree cannot have grown: no rescan)."""
        frozen, self._frozen = getattr(self, "_frozen", None), None
        for p in frozen if frozen is not None else self._tree():
            try:
                p.resume()
            except psutil.Error:
                pass

    # ------------------------------------------------------------------ channel
    def _read_line(self, timeout_s: float) -> bytes:
        def idle() -> None:
            if self.popen.poll() is not None:
                self._raise_dead()

        try:
            line = self._reader.read_line(timeout_s, on_idle=idle)
        except EOFError:
            self.popen.wait(10)
            self._raise_dead()
            raise  # unreachable: _raise_dead raises
        except WireError as exc:
            self._kill("protocol", f"candidate flooded the result channel ({exc})")
            raise CandidateDied("protocol", self.dead_message) from exc
        if line is None:
            self._kill("timeout", f"no answer from the candidate within {timeout_s:.0f} s")
            raise CandidateDied("timeout", self.dead_message)
        return line

    def _raise_dead(self) -> None:
        code = self.popen.wait(10)
        if self.dead_reason is None:
            if code < 0:
                name = signal.Signals(-code).name if -code in signal.Signals._value2member_map_ else str(-code)
                self.dead_reason, self.dead_message = "crash", f"candidate process died with signal {name}"
            elif code > 128 and (code - 128) in signal.Signals._value2member_map_:
                # bubblewrap's init reports a child killed by signal N as exit code 128 + N.
                self.dead_reason = "crash"
                self.dead_message = f"candidate process died with signal {signal.Signals(code - 128).name}"
            else:
                self.dead_reason, self.dead_message = "crash", f"candidate process exited with code {code}"
            self._drain.join(timeout=2)  # let the reader reach EOF before taking the tail
            tail = self.output_tail().strip()
            if tail:  # what the process printed is the agent's best clue (import error, traceback)
                self.dead_message += "\nlast output:\n" + tail[-3000:]
        raise CandidateDied(self.dead_reason, self.dead_message)

    def wait_ready(self) -> Ready:
        """Block until the runner imported torch and initialised the device (its ``ready`` reply)."""
        if self._ready is None:
            line = self._read_line(self.options.startup_timeout_s)
            try:
                reply = decode_reply(line, Ready)
            except WireError as exc:
                self._kill("protocol", "runner sent no ready message")
                raise CandidateDied("protocol", f"candidate runner failed to start: {exc}") from exc
            if isinstance(reply, Failure):
                self._kill("crash", "runner failed to start")
                raise CandidateDied("crash", f"candidate runner failed to start: {reply.error}\n{reply.traceback}")
            self._ready = reply  # type: ignore[assignment]
        return self._ready  # type: ignore[return-value]

    @property
    def start_s(self) -> float | None:
        """Seconds from this runner's spawn to its ready reply (importing torch, initialising the device, sizing
        its spin); None before :meth:`wait_ready` or when the runner did not say when."""
        clock = getattr(self._ready, "ready_clock", None)
        return round(clock - self.started_at, 3) if clock is not None else None

    @property
    def start_phases(self) -> dict[str, StartPhase]:
        """Where :attr:`start_s` went: wall and CPU seconds per phase of the runner's start, in order (empty before
        :meth:`wait_ready`)."""
        return dict(getattr(self._ready, "start_phases", None) or {})

    @property
    def start_cpu_s(self) -> float | None:
        """CPU seconds the runner process had used when ready (interpreter start included); None before
        :meth:`wait_ready`."""
        return getattr(self._ready, "start_cpu_s", None)

    def request(self, timeout_s: float, req: Request) -> Reply | Failure:
        """Send ``req`` and return the runner's reply, validated against the request's reply class (raises
        :class:`CandidateDied`; a reply that does not fit is a 'protocol' death: the candidate wrote it)."""
        self.wait_ready()
        self.used = True
        try:
            write_all(self._req_w, encode(req))
        except OSError as exc:
            self._raise_dead()
            raise CandidateDied("crash", str(exc)) from exc
        line = self._read_line(timeout_s)
        try:
            return decode_reply(line, req.Reply)
        except WireError as exc:
            self._kill("protocol", f"unreadable reply to {req.op!r}: {str(exc)[:300]}")
            raise CandidateDied("protocol", self.dead_message) from exc

    def send_exit(self) -> None:
        """Ask the runner to exit (no reply)."""
        from cuda_agent.harness.messages import Exit

        try:
            write_all(self._req_w, encode(Exit()))
        except OSError:
            pass

    @property
    def alive(self) -> bool:
        """The process is still running."""
        return self.popen.poll() is None

    def kill(self) -> None:
        """SIGKILL the process tree now (no wait; :meth:`close` waits and releases the pipes)."""
        if self.popen.poll() is None:
            self._kill(self.dead_reason or "closed", self.dead_message or "closed by the harness")

    def close(self) -> None:
        """Kill the process tree and release the pipes."""
        self._stop.set()
        WATCHDOGS.remove(self)
        if self.popen.poll() is None:
            self._kill(self.dead_reason or "closed", self.dead_message or "closed by the harness")
        try:
            self.popen.wait(10)
        except subprocess.TimeoutExpired:
            pass
        for fd in (self._req_w, self._reader.fd):
            try:
                os.close(fd)
            except OSError:
                pass
        self.fd_sock.close()

    def recv_fds(self, count: int, timeout_s: float) -> list[int]:
        """Exactly ``count`` descriptors the runner sent with its last export (ValueError otherwise)."""
        from cuda_agent.harness._vmm import recv_fds

        return recv_fds(self.fd_sock, count, timeout_s)
