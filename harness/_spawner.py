"""Start long-lived sandboxed processes from one long-lived thread.

bubblewrap's ``--die-with-parent`` is ``PR_SET_PDEATHSIG``, and Linux sends that signal when the *thread* that
forked the process exits, not when the process does. A runner or probe server started from a short-lived thread
(a warm-up thread, a worker of a thread pool that is shut down) was SIGKILLed the moment that thread ended, in the
middle of an evaluation. Every process meant to outlive the call that starts it is forked here, by one thread
that lives as long as the interpreter; processes a call waits for (compiles, one-shot probes) need not be.
"""

from __future__ import annotations

import subprocess
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

_lock = threading.Lock()
_executor: ThreadPoolExecutor | None = None


def popen(*args: Any, **kwargs: Any) -> subprocess.Popen:
    """``subprocess.Popen(*args, **kwargs)``, forked by the spawner thread; exceptions propagate to the caller."""
    global _executor
    with _lock:
        if _executor is None:
            _executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="cuda-agent-spawner")
        executor = _executor
    return executor.submit(subprocess.Popen, *args, **kwargs).result()
