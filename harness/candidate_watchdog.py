"""The memory watchdog of every live candidate process of this process, on one thread (:data:`WATCHDOGS`)."""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING

import structlog

from cuda_agent.harness.process_tree import nvml_handle, nvml_usage

if TYPE_CHECKING:
    from cuda_agent.harness.sandbox import CandidateProcess

log = structlog.get_logger(__name__)


class WatchdogHub:
    """The memory watchdog of every live candidate process of this process, on one thread.

    A thread per candidate, each waking 20 times a second to walk its tree, cost the generation thread of
    concurrent rollouts the GIL in proportion to the episodes in flight (about 0.5 ms per poll on an idle host,
    more on a loaded one; 64 episodes per process is over 60% of one core). Here one thread polls every member at
    the shortest interval asked, and the GPU's per-process memory is read once per round per device (one NVML
    listing, not one per candidate).
    """

    def __init__(self) -> None:
        self._members: dict[int, CandidateProcess] = {}
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None
        self._handles: dict[str, object] = {}  # NVML handle per device, made once
        self.rounds = 0

    def add(self, proc: CandidateProcess) -> None:
        """Watch ``proc`` from the next round on (starts the thread on first use)."""
        with self._cond:
            self._members[id(proc)] = proc
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="memory-watchdog", daemon=True)
                self._thread.start()
            self._cond.notify_all()

    def remove(self, proc: CandidateProcess) -> None:
        """Stop watching ``proc``."""
        with self._cond:
            self._members.pop(id(proc), None)

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._members:
                    self._cond.wait()
                members = list(self._members.values())
            interval = min(m.options.watchdog_interval_s for m in members)
            usage: dict[str, dict[int, int] | None] = {}
            for m in members:
                if m.options.gpu_memory_mb and m.device not in usage:
                    if m.device not in self._handles:
                        self._handles[m.device] = nvml_handle(m.device)
                    usage[m.device] = nvml_usage(self._handles[m.device])
            for m in members:
                try:
                    done = m.poll_memory(usage.get(m.device))
                except Exception:  # noqa: BLE001 - one member's failure must not stop the others' watch
                    log.warning("memory watchdog poll failed", exc_info=True)
                    done = False
                if done:
                    self.remove(m)
            self.rounds += 1
            time.sleep(interval)


#: The process's one :class:`WatchdogHub`.
WATCHDOGS = WatchdogHub()
