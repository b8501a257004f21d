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

import json
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections import deque
from pathlib import Path
from typing import Any

import psutil
import structlog

from cuda_agent.errors import CudaAgentError
from cuda_agent.harness import _spawner
from cuda_agent.harness._affinity import timing_cpus
from cuda_agent.harness.settings import HarnessSettings
from cuda_agent.harness.timing import protocol_env
from cuda_agent.harness._bwrap import BwrapSpec, Isolation, IsolationUnavailable
from cuda_agent.harness._bwrap import resolve_isolation as _resolve

log = structlog.get_logger(__name__)


#: Raised when the settings require bubblewrap and it cannot run here (kept name of the candidate sandbox).
SandboxError = IsolationUnavailable


class CandidateDied(CudaAgentError):
    """The candidate process ended or was killed; ``reason`` says why ('crash', 'timeout', 'memory', ...)."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


def resolve_isolation(settings: HarnessSettings) -> Isolation:
    """The isolation ``settings.isolation`` means here (bwrap as ``settings.sandbox_uid`` where possible).

    :raises SandboxError: bubblewrap is required but unusable.
    """
    iso = _resolve(settings.isolation, bwrap_path=settings.bwrap_path, uid=settings.sandbox_uid)
    if iso.level == "process" and settings.isolation != "process":
        log.warning("sandbox.fallback", isolation="process", reason=iso.reason)
    for note in iso.notes:
        log.warning("sandbox.degraded", note=note)
    return iso


def _candidate_env(
    device: str, fds: tuple[int, int], threads: int, preroll_us: float = 0.0, fd_socket: int | None = None,
    flush_multiple: float = 2.0, warm_pages: bool = False,
) -> dict[str, str]:
    keep = ("PATH", "LD_LIBRARY_PATH", "CUDA_HOME", "CUDA_PATH", "LANG", "LC_ALL", "PYTHONPATH", "VIRTUAL_ENV")
    env = {k: v for k, v in os.environ.items() if k in keep or k.startswith("NVIDIA_")}
    env.update(
        HOME="/tmp",
        TMPDIR="/tmp",
        PYTHONDONTWRITEBYTECODE="1",
        PYTHONNOUSERSITE="1",
        PYTHONUNBUFFERED="1",
        CUDA_AGENT_RUNNER_FDS=f"{fds[0]},{fds[1]}",
        CUDA_AGENT_DEVICE=device,
        OMP_NUM_THREADS=str(threads),  # the reference process uses the same count (settings.cpu_threads)
    )
    # The reference process gets the same, but for retakes: the candidate's calls are never retaken (a retake
    # runs it again on the same data, whose result a candidate could hand back from the take before).
    env.update(protocol_env(preroll_us, flush_multiple, warm_pages, preroll_retakes=0))
    if fd_socket is not None:
        from cuda_agent.harness._vmm import FD_SOCKET_ENV

        env[FD_SOCKET_ENV] = str(fd_socket)
    if "CUDA_VISIBLE_DEVICES" in os.environ:
        env["CUDA_VISIBLE_DEVICES"] = os.environ["CUDA_VISIBLE_DEVICES"]
    return env


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


class CandidateProcess:
    """One pre-started sandboxed runner, used for one evaluation, then killed.

    :param device: 'cpu' or 'cuda:N'.
    :param exchange: folder shared with the trusted side (bound writable into the sandbox).
        Its sibling ``<exchange>-stage`` is bound read-only: the evaluator copies the workspace
        and the built module there (the real workspace and build folders stay invisible).
    :param isolation: the resolved isolation (:func:`resolve_isolation`).
    """

    def __init__(
        self,
        device: str,
        exchange: Path,
        settings: HarnessSettings,
        isolation: Isolation,
        wrapper: list[str] | None = None,
    ) -> None:
        self.device = device
        self.exchange = exchange
        self.stage = exchange.with_name(exchange.name + "-stage")
        self.stage.mkdir(exist_ok=True)
        self.settings = settings
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
        self._resp_r = resp_r
        self._buf = b""
        cmd = list(wrapper or []) + [sys.executable, "-s", "-P", "-m", "cuda_agent.harness.candidate_runner"]
        # -s: no user site; -P: the working directory is not put on sys.path. Not -I: it also drops
        # PYTHONPATH, and installs outside site-packages (air-gapped GPU machines: --target DIR plus
        # PYTHONPATH) then cannot import the runner. The environment is built by the trusted side
        # (_candidate_env), never by the candidate.
        cuda = device.startswith("cuda")
        spec = BwrapSpec(
            writable=[exchange],
            readonly=[self.stage],
            dev_bind=cuda,
            # Host namespaces only for the 'ipc' transport (its reference counters live in the host's /dev/shm);
            # the default 'host' transport under bubblewrap needs neither, so the candidate cannot see or
            # signal the trusted processes.
            share_ipc=cuda and settings.cuda_transport == "ipc",
            unshare_pid=settings.unshare_pid if settings.unshare_pid is not None
            else not (cuda and settings.cuda_transport == "ipc"),
        )
        cmd = isolation.prefix(spec) + cmd
        self.popen = _spawner.popen(  # by the spawner thread: see harness/_spawner.py
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            pass_fds=(req_r, resp_w, child_sock.fileno()),
            env=_candidate_env(device, (req_r, resp_w), settings.cpu_threads, settings.timing_preroll_us,
                               child_sock.fileno(), settings.timing_l2_flush_multiple,
                               settings.timing_warm_input_pages),  # no retakes: see HarnessSettings.timing_preroll_retakes
            start_new_session=True,
            cwd="/tmp" if isolation.level == "bwrap" else str(exchange),
            cpus=timing_cpus(device, settings.timing_cpus),
        )
        os.close(req_r)
        os.close(resp_w)
        child_sock.close()
        self.started_at = time.monotonic()
        self._stop = threading.Event()
        self._drain = threading.Thread(target=self._drain_output, daemon=True)
        self._drain.start()
        self._watch = threading.Thread(target=self._watchdog, daemon=True)
        self._watch.start()
        self._ready: dict[str, Any] | None = None

    # ------------------------------------------------------------------ output and watchdogs
    def _drain_output(self) -> None:
        assert self.popen.stdout is not None
        limit = self.settings.output_log_limit
        for raw in iter(lambda: self.popen.stdout.read1(65536), b""):  # type: ignore[union-attr]
            text = raw.decode(errors="replace")
            self._log.append(text)
            self._log_chars += len(text)
            while self._log_chars > 4 * limit and len(self._log) > 1:
                self._log_chars -= len(self._log.popleft())

    def output_tail(self) -> str:
        """Last characters the candidate printed (stdout and stderr)."""
        text = "".join(self._log)
        return text[-self.settings.output_log_limit :]

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

    def _watchdog(self) -> None:
        limit = self.settings.rss_limit_mb * 2**20
        gpu_limit = self.settings.gpu_mem_limit_mb * 2**20 if self.settings.gpu_mem_limit_mb else None
        nvml = _nvml_handle(self.device) if gpu_limit else None
        while not self._stop.wait(self.settings.watchdog_interval_s):
            if self.popen.poll() is not None:
                return
            rss = 0
            pids = set()
            for p in self._tree():
                try:
                    rss += p.memory_info().rss
                    pids.add(p.pid)
                except psutil.Error:
                    pass
            if rss > limit:
                self._kill("memory", f"candidate used {rss / 2**20:.0f} MiB of host memory, limit {self.settings.rss_limit_mb} MiB")
                return
            if nvml is not None and gpu_limit:
                used = _nvml_used_by(nvml, pids)
                if used > gpu_limit:
                    self._kill("memory", f"candidate used {used / 2**20:.0f} MiB of GPU memory, limit {self.settings.gpu_mem_limit_mb} MiB")
                    return

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
    def _read_line(self, timeout_s: float) -> dict[str, Any]:
        deadline = time.monotonic() + timeout_s
        while b"\n" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0:
                self._kill("timeout", f"no answer from the candidate within {timeout_s:.0f} s")
                raise CandidateDied("timeout", self.dead_message)
            ready, _, _ = select.select([self._resp_r], [], [], min(left, 0.5))
            if not ready:
                if self.popen.poll() is not None:
                    self._raise_dead()
                continue
            chunk = os.read(self._resp_r, 1 << 20)
            if not chunk:
                self.popen.wait(10)
                self._raise_dead()
            self._buf += chunk
            if len(self._buf) > 64 * 2**20:
                self._kill("protocol", "candidate flooded the result channel (more than 64 MiB without a newline)")
                raise CandidateDied("protocol", self.dead_message)
        line, _, self._buf = self._buf.partition(b"\n")
        try:
            msg = json.loads(line)
        except ValueError as exc:
            raise CandidateDied("protocol", f"unreadable message from the candidate: {line[:200]!r}") from exc
        if not isinstance(msg, dict):
            raise CandidateDied("protocol", "candidate sent a non-object message")
        return msg

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

    def wait_ready(self) -> dict[str, Any]:
        """Block until the runner imported torch and initialised the device."""
        if self._ready is None:
            msg = self._read_line(self.settings.startup_timeout_s)
            if not msg.get("ok"):
                self._kill("crash", "runner failed to start")
                raise CandidateDied("crash", f"candidate runner failed to start: {msg.get('error')}\n{msg.get('traceback', '')}")
            self._ready = msg
        return self._ready

    def request(self, timeout_s: float, **req: Any) -> dict[str, Any]:
        """Send one request and return the runner's answer (raises CandidateDied)."""
        self.wait_ready()
        self.used = True
        try:
            os.write(self._req_w, (json.dumps(req) + "\n").encode())
        except OSError as exc:
            self._raise_dead()
            raise CandidateDied("crash", str(exc)) from exc
        return self._read_line(timeout_s)

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
        if self.popen.poll() is None:
            self._kill(self.dead_reason or "closed", self.dead_message or "closed by the harness")
        try:
            self.popen.wait(10)
        except subprocess.TimeoutExpired:
            pass
        for fd in (self._req_w, self._resp_r):
            try:
                os.close(fd)
            except OSError:
                pass
        self.fd_sock.close()

    def recv_fds(self, count: int, timeout_s: float) -> list[int]:
        """Exactly ``count`` descriptors the runner sent with its last export (ValueError otherwise)."""
        from cuda_agent.harness._vmm import recv_fds

        return recv_fds(self.fd_sock, count, timeout_s)


def _nvml_handle(device: str) -> Any | None:
    try:
        import pynvml  # nvidia-ml-py

        pynvml.nvmlInit()
        index = int(device.split(":")[1]) if ":" in device else 0
        return pynvml.nvmlDeviceGetHandleByIndex(index)
    except Exception:
        return None


def _nvml_used_by(handle: Any, pids: set[int]) -> int:
    """GPU bytes used by ``pids`` (host pid view) on the device."""
    try:
        import pynvml

        procs = pynvml.nvmlDeviceGetComputeRunningProcesses(handle)
        return sum(int(p.usedGpuMemory or 0) for p in procs if p.pid in pids)
    except Exception:
        return 0


#: Free bytes /dev/shm must have to hold exchange folders (input and output sets of big tasks live there).
SHM_MIN_FREE = 16 << 30


def default_scratch_dir() -> Path:
    """Where exchange folders go when ``settings.scratch_dir`` is unset.

    ``/dev/shm`` when it is a writable memory file system with at least :data:`SHM_MIN_FREE` bytes free
    (staged tensors then never reach a disk: no write-back of gigabytes per evaluation), else the
    system temp dir (containers often mount a 64 MB ``/dev/shm``).
    """
    shm = Path("/dev/shm")
    try:
        st = os.statvfs(shm)
        if shm.is_dir() and os.access(shm, os.W_OK) and st.f_bavail * st.f_frsize >= SHM_MIN_FREE:
            return shm
    except OSError:
        pass
    return Path(tempfile.gettempdir())


class CandidatePool:
    """Keeps ``settings.spare_runners()`` runners started ahead of time; each is handed out once."""

    def __init__(self, device: str, settings: HarnessSettings) -> None:
        self.device = device
        self.settings = settings
        self._isolation = resolve_isolation(settings)
        self.isolation = self._isolation.level
        base = Path(settings.scratch_dir) if settings.scratch_dir else default_scratch_dir()
        base.mkdir(parents=True, exist_ok=True)
        self._base = base
        self._spare: deque[CandidateProcess] = deque()
        self._reapers: list[threading.Thread] = []
        self._lock = threading.Lock()
        self.fill()

    def _start_one(self, wrapper: list[str] | None = None) -> CandidateProcess:
        exchange = Path(tempfile.mkdtemp(prefix="cuda-agent-x-", dir=self._base))
        return CandidateProcess(self.device, exchange, self.settings, self._isolation, wrapper)

    def start_wrapped(self, wrapper: list[str]) -> CandidateProcess:
        """A runner started now under ``wrapper`` (e.g. compute-sanitizer), outside the pool."""
        proc = self._start_one(wrapper)
        proc.wait_ready()
        return proc

    def finish(self, proc: CandidateProcess, timeout_s: float) -> int | None:
        """Ask a runner to exit and wait for it; its exit code (None if it had to be killed)."""
        try:
            os.write(proc._req_w, b'{"op": "exit"}\n')
            return proc.popen.wait(timeout_s)
        except (OSError, subprocess.TimeoutExpired):
            return None

    def fill(self) -> None:
        """Start runners until ``pool_size`` are waiting (non-blocking: they import torch meanwhile)."""
        with self._lock:
            self._spare = deque(p for p in self._spare if p.alive)
            while len(self._spare) < self.settings.spare_runners():
                self._spare.append(self._start_one())

    def acquire(self) -> CandidateProcess:
        """A fresh, ready runner; a replacement starts at once in the background."""
        dead = []
        with self._lock:
            proc = None
            while self._spare:
                cand = self._spare.popleft()
                if cand.alive:
                    proc = cand
                    break
                dead.append(cand)
        for cand in dead:
            self.release(cand)
        if proc is None:
            proc = self._start_one()
        self.fill()
        proc.wait_ready()
        return proc

    def release(self, proc: CandidateProcess) -> None:
        """Kill a used runner now; wait for it and delete its folders in the background.

        SIGKILL stops the whole tree at once (nothing of the candidate runs after this returns); the wait for the
        driver to tear its CUDA context down and the removal of its exchange folder (hundreds of MB of staged sets)
        are left to a reaper thread, so a caller holding the device's timing lock does not wait for them.
        :meth:`close` joins the reapers.
        """
        proc.kill()
        reaper = threading.Thread(target=self._reap, args=(proc,), name="cuda-agent-reaper", daemon=True)
        with self._lock:
            self._reapers = [t for t in self._reapers if t.is_alive()]
            self._reapers.append(reaper)
        reaper.start()

    @staticmethod
    def _reap(proc: CandidateProcess) -> None:
        proc.close()
        shutil.rmtree(proc.exchange, ignore_errors=True)
        shutil.rmtree(proc.stage, ignore_errors=True)

    def close(self) -> None:
        """Kill every spare runner and wait for every released one to be gone."""
        with self._lock:
            spare, self._spare = list(self._spare), deque()
        for proc in spare:
            self.release(proc)
        with self._lock:
            reapers, self._reapers = self._reapers, []
        for t in reapers:
            t.join(timeout=30)
