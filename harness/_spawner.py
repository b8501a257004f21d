"""Start long-lived sandboxed processes from one long-lived thread.

bubblewrap's ``--die-with-parent`` is ``PR_SET_PDEATHSIG``, and Linux sends that signal when the *thread* that
forked the process exits, not when the process does. A runner or probe server started from a short-lived thread
(a warm-up thread, a worker of a thread pool that is shut down) was SIGKILLed the moment that thread ended, in the
middle of an evaluation. Every process meant to outlive the call that starts it is forked here, by one thread
that lives as long as the interpreter; processes a call waits for (compiles, one-shot probes) need not be.
"""

from __future__ import annotations

import os
import subprocess
import threading
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

_lock = threading.Lock()
_executor: ThreadPoolExecutor | None = None


def popen(*args: Any, cpus: Iterable[int] | None = None, **kwargs: Any) -> subprocess.Popen:
    """``subprocess.Popen(*args, **kwargs)``, forked by the spawner thread; exceptions propagate to the caller.

    ``cpus``: the child starts on these cores (``ExperimentSettings.timing_cpus``). Linux keeps an affinity mask per
    thread and a child inherits its forking thread's: the spawner thread takes the mask for the fork and gives it
    back after, so no Python code runs between fork and exec.
    """
    global _executor
    with _lock:
        if _executor is None:
            _executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="cuda-agent-spawner")
        executor = _executor
    if cpus is None:
        return executor.submit(subprocess.Popen, *args, **kwargs).result()
    return executor.submit(_popen_on, frozenset(cpus), args, kwargs).result()


def _popen_on(cpus: frozenset[int], args: tuple, kwargs: dict) -> subprocess.Popen:
    """In the spawner thread: Popen with this thread's affinity set to ``cpus`` (pid 0 = the calling thread)."""
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, cpus)
    try:
        return subprocess.Popen(*args, **kwargs)
    finally:
        os.sched_setaffinity(0, before)
