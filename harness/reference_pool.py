"""Warm reference processes of one evaluator: one per task, spares started ahead, an LRU that never evicts one in use.

A reference process imports torch, builds its task's model on the device and keeps it (and its compiled
baseline) warm across sessions. The pool hands out the process of a task (:meth:`ReferencePool.acquire`), counts
its users, closes unused ones beyond ``warm_limit`` (least recently used first, those warmed for a session still to
come last), keeps ``spares`` processes started ahead of time (torch imported, no task yet), and retires a process
whose device memory stayed pinned (it closes when its last session releases it). A process starts outside the
pool-wide lock (one start per task at a time), so a task whose process is warm never waits for another task's
process to import torch.

Under memory pressure (:meth:`ReferencePool.close_idle`) it closes only as many idle processes as the missing bytes
need: those a session already used first, then those warmed for a session still to come, and never the process of
the task whose reservation asks (:meth:`ReferencePool.sparing`). A process is idle between its warm-up and its
session; closing it there made that session start a new process whose ``prepare`` compiled the model afresh (a
second or more of the device stage, nearly every task of a suite check at concurrency 8 on an H100).
"""

from __future__ import annotations

import collections
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from cuda_agent.harness.reference_client import ReferenceClient, close_all
from cuda_agent.schemas.task import TaskManifest


class ReferencePool:
    """Reference processes of one evaluator (see the module docstring)."""

    def __init__(self, spawn: Callable[[], ReferenceClient], *, init_seed: int, warm_limit: int, spares: int,
                 on_start: Callable[[TaskManifest, ReferenceClient], None] | None = None) -> None:
        """:param spawn: starts a process without a task (it imports torch meanwhile).
        :param init_seed: seed set before the task's model is built. :param warm_limit: processes kept warm.
        :param spares: processes kept started ahead of time.
        :param on_start: called before a process gets its task (the evaluator takes its memory-budget hold)."""
        self._on_start = on_start
        self._spawn = spawn
        self.init_seed = init_seed
        self.warm_limit = warm_limit
        self.spares_wanted = spares
        self._refs: dict[str, ReferenceClient] = {}  # task code hash -> process, least recently used first
        self._lock = threading.Lock()
        self._spares: collections.deque[ReferenceClient] = collections.deque()
        self._start_locks: dict[str, threading.Lock] = {}  # one start per task at a time
        self._spared = threading.local()  # per thread: task code hashes :meth:`close_idle` leaves alone

    # ------------------------------------------------------------------ views
    def warm(self, task: TaskManifest) -> ReferenceClient | None:
        """``task``'s process if one is warm and alive now, else None; starts nothing."""
        with self._lock:
            ref = self._refs.get(task.code_hash)
        return ref if ref is not None and ref.alive else None

    def holds(self, task: TaskManifest) -> bool:
        """Whether a process of ``task`` is in the pool (warm or in use)."""
        with self._lock:
            return task.code_hash in self._refs

    def starting(self, task: TaskManifest) -> bool:
        """Whether a process for ``task`` is being started now."""
        with self._lock:
            lock = self._start_locks.get(task.code_hash)
        return lock is not None and lock.locked()

    @property
    def spares(self) -> list[ReferenceClient]:
        """The processes started ahead of time, waiting for a task."""
        with self._lock:
            return list(self._spares)

    # ------------------------------------------------------------------ acquire / release
    def acquire(self, task: TaskManifest) -> ReferenceClient:
        """The warm process of ``task`` (started now when there is none), counted as in use until :meth:`release`."""
        key = task.code_hash
        with self._lock:
            start_lock = self._start_locks.setdefault(key, threading.Lock())
        victims: list[ReferenceClient] = []
        with start_lock:
            with self._lock:
                ref = self._refs.pop(key, None)
                if ref is not None and ref.alive:
                    ref.users += 1
                    ref.awaiting_session = None  # a warmed process acquired again: its session (or another) came
                    self._refs[key] = ref  # most recent last
                    victims = self._evictions()
                    dead = None
                else:
                    dead, ref = ref, None
            if ref is None:
                if dead is not None:
                    dead.close()
                ref = self._new(task)
                with self._lock:
                    ref.users += 1
                    self._refs[key] = ref
                    victims = self._evictions()
        close_all(victims)
        return ref

    def release(self, ref: ReferenceClient) -> None:
        """Undo one :meth:`acquire`; closes processes beyond the warm limit that are now unused."""
        with self._lock:
            ref.users = max(0, ref.users - 1)
            victims = self._evictions()
            if ref.retired and ref.users == 0:
                victims.append(ref)
        close_all(victims)

    def retire(self, task: TaskManifest, ref: ReferenceClient) -> None:
        """Take ``ref`` out of service: later sessions of ``task`` get a new process; this one closes when its last
        session releases it."""
        with self._lock:
            if self._refs.get(task.code_hash) is ref:
                self._refs.pop(task.code_hash)
            ref.retired = True

    def mark_warmed(self, ref: ReferenceClient) -> None:
        """``ref``'s baselines were warmed for a session still to come (it is idle until that session acquires it):
        under memory pressure it goes after every idle process a session already used."""
        ref.warmed = True
        ref.awaiting_session = time.monotonic()

    @contextmanager
    def sparing(self, task: TaskManifest) -> Iterator[None]:
        """Inside the block, :meth:`close_idle` called from this thread (a memory reservation's pressure) leaves
        ``task``'s process alone: closing the process a session is about to use frees nothing that session does not
        take back at once, and costs a new process and its compile."""
        spared = getattr(self._spared, "keys", None)
        if spared is None:
            spared = self._spared.keys = collections.Counter()
        spared[task.code_hash] += 1
        try:
            yield
        finally:
            spared[task.code_hash] -= 1
            if spared[task.code_hash] <= 0:
                del spared[task.code_hash]

    def close_idle(self, missing: int | None = None) -> int:
        """Memory pressure: ``missing`` bytes are wanted (None: close every idle one). Close warm processes no
        session uses, in :meth:`_closing_order`, until their standing holds (``hold_bytes``) cover it; never one
        this thread spares (:meth:`sparing`). A process of unknown size counts as nothing (the next goes too).
        Returns the bytes let go of (at least 1 a closed process)."""
        spared = getattr(self._spared, "keys", None) or {}
        victims: list[ReferenceClient] = []
        freed = 0
        with self._lock:
            for key in self._closing_order():
                if missing is not None and freed >= missing:
                    break
                if key not in spared:
                    victims.append(self._refs.pop(key))
                    freed += max(1, victims[-1].hold_bytes or 0)
        close_all(victims)
        return freed

    def close(self) -> None:
        """Stop every process (all asked to exit before any is waited for)."""
        with self._lock:
            refs, self._refs = list(self._refs.values()), {}
            refs += list(self._spares)
            self._spares.clear()
        close_all(refs)

    # ------------------------------------------------------------------ internals
    def _new(self, task: TaskManifest) -> ReferenceClient:
        """``task``'s process: a spare that is still alive, else one started now; then the spares are topped up
        (their start is a ``Popen``: nothing here waits for an import)."""
        ref = None
        with self._lock:
            while self._spares and ref is None:
                cand = self._spares.popleft()
                if cand.alive:
                    ref = cand
                else:
                    cand.close()
        if ref is None:
            ref = self._spawn()
        self._fill_spares()
        if self._on_start is not None:
            self._on_start(task, ref)
        try:
            ref.start(task.code, self.init_seed)
        except BaseException:  # a task whose model cannot be built: its process is not kept
            ref.close()
            raise
        return ref

    def _fill_spares(self) -> None:
        with self._lock:  # a Popen each (milliseconds); under the lock so concurrent tasks do not overshoot
            while len(self._spares) < self.spares_wanted:
                self._spares.append(self._spawn())

    def _closing_order(self) -> list[str]:
        """Keys of the unused processes, the first to close first (the caller holds the lock): those a session
        already used, least recently used first; then those warmed for a session still to come, the latest warmed
        first (its session is the furthest off)."""
        idle = [(key, ref) for key, ref in self._refs.items() if ref.users == 0]
        used = [key for key, ref in idle if ref.awaiting_session is None]  # dict order: least recently used first
        waiting = sorted((kr for kr in idle if kr[1].awaiting_session is not None),
                         key=lambda kr: -(kr[1].awaiting_session or 0.0))
        return used + [key for key, _ in waiting]

    def _evictions(self) -> list[ReferenceClient]:
        """Unused processes beyond ``warm_limit``, in :meth:`_closing_order`, removed from the map (the caller holds
        the lock and closes them after releasing it)."""
        excess = len(self._refs) - self.warm_limit
        return [self._refs.pop(key) for key in self._closing_order()[:max(0, excess)]]
