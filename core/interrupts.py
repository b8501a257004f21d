"""Ctrl-C for long commands: the first one stops work cleanly, the second one at once, never a traceback.

:class:`StopSignal` is what ``run`` and ``eval`` hold while they work:

- the first SIGINT sets it (queued episodes are cancelled, running ones stop at their next tool call:
  :func:`cuda_agent.loop.run_episode` raises :class:`EpisodeInterrupted` there, nothing is graded and no
  ``result.json`` is written, so the episode counts as not done and runs again on resume);
- ``grace_s`` seconds later every process this one started is killed, so a tool call or a grading pass
  blocked on a child returns at once (child processes ignore SIGINT: their parent ends them);
- a second SIGINT kills those processes and exits with status 130 at once.

Outside the main thread (or when nothing is interrupting) it is an ordinary event: :meth:`StopSignal.request`
stops the work the same way, which is how tests and embedding applications use it.

Commands without a cooperative stop (``data``, ``train``) run under :class:`InterruptExit`, which the CLI holds
around every command: the first SIGINT raises ``KeyboardInterrupt`` in the main thread (the command unwinds as
it would), child processes are killed after the grace period, and whatever still runs a few seconds later does
not hold the exit; a second SIGINT leaves at once. A command's own :class:`StopSignal` takes precedence while
it is held.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from types import FrameType, TracebackType
from typing import Any, Protocol

#: Exit status after an interrupt (128 + SIGINT), as shells report it.
INTERRUPTED_STATUS = 130
#: Seconds between the first Ctrl-C and killing the child processes still running.
GRACE_S = 5.0


class StopRequest(Protocol):
    """What long-running work polls to know it should stop (a :class:`StopSignal` or a ``threading.Event``)."""

    def is_set(self) -> bool: ...


class EpisodeInterrupted(Exception):
    """The episode was stopped on request before it finished: not graded, no ``result.json``, runs again."""


def kill_child_processes() -> int:
    """SIGKILL every process descended from this one; returns how many were signalled."""
    try:
        import psutil
    except ImportError:  # psutil is a dependency; without it the children end with their parent
        return 0
    try:
        children = psutil.Process().children(recursive=True)
    except psutil.Error:
        return 0
    for child in children:
        try:
            child.kill()
        except psutil.Error:
            continue
    return len(children)


class StopSignal:
    """A stop request set by the first Ctrl-C (see the module doc); usable as a context manager.

    :param message: the one line printed to stderr at the first Ctrl-C (None: print nothing, the caller says it).
    :param grace_s: seconds before the child processes of the running work are killed.
    """

    def __init__(self, what: str = "the work", *, message: str | None = "", grace_s: float = GRACE_S) -> None:
        self.grace_s = grace_s
        self.interrupts = 0
        self._event = threading.Event()
        self._closed = threading.Event()
        self._killer: threading.Thread | None = None
        self._previous: Any = None
        self._installed = False
        if message == "":
            message = (f"interrupt: stopping {what} at its next tool call (its processes are ended after "
                       f"{grace_s:g} s); Ctrl-C again to stop at once")
        self.message = message

    # -- the event --------------------------------------------------------------
    def is_set(self) -> bool:
        """A stop was requested."""
        return self._event.is_set()

    def wait(self, timeout: float | None = None) -> bool:
        """Wait until a stop is requested (or ``timeout``); True when it was."""
        return self._event.wait(timeout)

    def request(self) -> None:
        """Request a stop, as the first Ctrl-C does (without the message)."""
        if self._event.is_set():
            return
        self._event.set()
        self._killer = threading.Thread(target=self._kill_after_grace, name="stop-grace", daemon=True)
        self._killer.start()

    def _kill_after_grace(self) -> None:
        if self._closed.wait(self.grace_s):
            return
        while not self._closed.is_set():  # a dying evaluation may start a process again: keep ending them
            kill_child_processes()
            self._closed.wait(0.5)

    # -- the signal handler ------------------------------------------------------
    def _on_sigint(self, signum: int, frame: FrameType | None) -> None:
        self.interrupts += 1
        if self.interrupts == 1:
            if self.message:
                print(self.message, file=sys.stderr, flush=True)
            self.request()
            return
        kill_child_processes()
        print("interrupted again: stopped at once (unfinished work runs again on resume)", file=sys.stderr, flush=True)
        sys.stdout.flush()
        os._exit(INTERRUPTED_STATUS)

    def __enter__(self) -> StopSignal:
        if threading.current_thread() is threading.main_thread():
            self._previous = signal.signal(signal.SIGINT, self._on_sigint)
            self._installed = True
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self._closed.set()
        if self._installed:
            signal.signal(signal.SIGINT, self._previous)
            self._installed = False


class InterruptExit:
    """Ctrl-C for a command with no cooperative stop: unwind at once, end the children, exit 130 within seconds.

    :param what: named in the one line printed at the first Ctrl-C.
    :param settle_s: seconds after the children were killed before the process leaves regardless.
    """

    def __init__(self, what: str, *, grace_s: float = GRACE_S, settle_s: float = 3.0) -> None:
        self.what, self.grace_s, self.settle_s = what, grace_s, settle_s
        self.interrupts = 0
        self._done = threading.Event()
        self._previous: Any = None
        self._installed = False

    def _watchdog(self) -> None:
        if self._done.wait(self.grace_s):
            return
        kill_child_processes()
        if self._done.wait(self.settle_s):
            return
        print(f"interrupted: {self.what} stopped (work still running was left)", file=sys.stderr, flush=True)
        sys.stdout.flush()
        os._exit(INTERRUPTED_STATUS)

    def _on_sigint(self, signum: int, frame: FrameType | None) -> None:
        self.interrupts += 1
        if self.interrupts == 1:
            print(f"interrupt: stopping {self.what} (its processes are ended after {self.grace_s:g} s); "
                  "Ctrl-C again to stop at once", file=sys.stderr, flush=True)
            threading.Thread(target=self._watchdog, name="interrupt-watchdog", daemon=True).start()
            raise KeyboardInterrupt
        kill_child_processes()
        print("interrupted again: stopped at once", file=sys.stderr, flush=True)
        sys.stdout.flush()
        os._exit(INTERRUPTED_STATUS)

    def __enter__(self) -> InterruptExit:
        if threading.current_thread() is threading.main_thread():
            self._previous = signal.signal(signal.SIGINT, self._on_sigint)
            self._installed = True
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self._done.set()
        if self._installed:
            signal.signal(signal.SIGINT, self._previous)
            self._installed = False
