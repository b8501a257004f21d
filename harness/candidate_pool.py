"""Candidate runners started ahead of time, each handed out once (:class:`CandidatePool`).

A runner imports torch and initialises its device in 5-10 s; the pool keeps ``runners_ahead`` of them started
while the model is still writing code, hands each out for ONE evaluation, kills it after, and starts a replacement
at once. Exchange folders go to ``/dev/shm`` where it has room (staged tensors never reach a disk).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import threading
from collections import deque
from collections.abc import Callable
from pathlib import Path

from cuda_agent.harness.sandbox import CandidateProcess, RunnerOptions, resolve_isolation


#: Free bytes /dev/shm must have to hold exchange folders (input and output sets of big tasks live there).
SHM_MIN_FREE = 16 << 30


def default_scratch_dir() -> Path:
    """Where exchange folders go when ``sandbox.scratch_dir`` is unset.

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
    """Keeps ``size`` runners started ahead of time; each is handed out once."""

    def __init__(self, options: RunnerOptions, size: int) -> None:
        """:param options: how runners start. :param size: runners kept started ahead of time."""
        self.device = options.device
        self.options = options
        self.size = size
        self._isolation = resolve_isolation(options)
        self.isolation = self._isolation.level
        base = Path(options.scratch_dir) if options.scratch_dir else default_scratch_dir()
        base.mkdir(parents=True, exist_ok=True)
        self._base = base
        self._spare: deque[CandidateProcess] = deque()
        self._reapers: list[threading.Thread] = []
        self._lock = threading.Lock()
        self.fill()

    def _start_one(self, wrapper: list[str] | Callable[[Path], list[str]] | None = None) -> CandidateProcess:
        exchange = Path(tempfile.mkdtemp(prefix="cuda-agent-x-", dir=self._base))
        if callable(wrapper):  # the wrapper's command names files in the runner's exchange folder (a report)
            wrapper = wrapper(exchange)
        return CandidateProcess(exchange, self.options, self._isolation, wrapper)

    def start_wrapped(self, wrapper: list[str] | Callable[[Path], list[str]]) -> CandidateProcess:
        """A runner started now under ``wrapper`` (e.g. compute-sanitizer, ncu), outside the pool; a callable
        wrapper is given the runner's exchange folder (writable inside the sandbox) and returns the command."""
        proc = self._start_one(wrapper)
        proc.wait_ready()
        return proc

    def finish(self, proc: CandidateProcess, timeout_s: float) -> int | None:
        """Ask a runner to exit and wait for it; its exit code (None if it had to be killed)."""
        proc.send_exit()
        try:
            return proc.popen.wait(timeout_s)
        except subprocess.TimeoutExpired:
            return None

    def fill(self) -> None:
        """Start runners until ``size`` are waiting (non-blocking: they import torch meanwhile)."""
        with self._lock:
            self._spare = deque(p for p in self._spare if p.alive)
            while len(self._spare) < self.size:
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
