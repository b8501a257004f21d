"""Signals and timers in the candidate's process (T10): no candidate code may run outside its calls.

A signal handler is host code the kernel's author chooses when to run. Session 37's red team ran one from an
interval timer while the harness flushed caches before the timed call (it computed the next output from the staged
inputs; the timed call only copied it), and from a one-shot timer just after ``forward`` returned (it wrote the
output after the timer's end, before the runner fingerprinted it): reward 3 both times on the CPU backend. The
source and binary rules refuse the calls that install handlers and arm timers (``T10.cpp.signal``,
``T10.binary.signal``); at run time:

- the runner blocks the asynchronous signals a timer or another process could send (:data:`WATCHED_SIGNALS`) in
  its main thread before torch is imported, so every thread it starts later has them blocked too: a handler the
  candidate installed anyway is never run, the signal stays pending;
- the guard snapshot records, for those signals, which have handlers (``SigCgt``), which each thread blocks
  (``SigBlk``), the three interval timers and the POSIX timers (:func:`signal_state`), and any change after the
  candidate loaded is ``T10.runtime.signal_state`` (:func:`signal_changes`).

Synchronous signals (SIGSEGV, SIGFPE ...) and the ones that end the process (SIGTERM, SIGKILL, SIGINT) are left as
they are: they report faults and let the parent stop the runner.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

#: Asynchronous signals a timer or another process could deliver: what a candidate's handler would run on.
WATCHED_SIGNALS: tuple[int, ...] = tuple(sorted(
    {int(s) for s in (signal.SIGALRM, signal.SIGVTALRM, signal.SIGPROF, signal.SIGUSR1, signal.SIGUSR2,
                      getattr(signal, "SIGIO", signal.SIGUSR1), getattr(signal, "SIGPOLL", signal.SIGUSR1))}
    | set(range(int(getattr(signal, "SIGRTMIN", 34)), int(getattr(signal, "SIGRTMAX", 64)) + 1))))
#: The watched signals as a /proc status mask (bit n-1 for signal n).
WATCHED_MASK = sum(1 << (s - 1) for s in WATCHED_SIGNALS)
_ITIMERS = (("real", signal.ITIMER_REAL), ("virtual", signal.ITIMER_VIRTUAL), ("prof", signal.ITIMER_PROF))


def block_async_signals() -> None:
    """Block :data:`WATCHED_SIGNALS` in the calling thread (threads it starts later inherit the mask): call it in
    the runner's main thread before anything starts a thread."""
    signal.pthread_sigmask(signal.SIG_BLOCK, WATCHED_SIGNALS)


def _status_mask(status: str, key: str) -> int | None:
    for line in status.splitlines():
        if line.startswith(key + ":"):
            return int(line.split(":", 1)[1].strip(), 16)
    return None


def signal_state() -> dict[str, Any]:
    """The watched signals' state now (JSON-able): ``caught`` (mask of those with handlers, process-wide),
    ``blocked`` (per thread id, the mask of those it blocks), ``itimers`` (the interval timers armed, in seconds)
    and ``posix_timers`` (how many POSIX timers the process has; None where the kernel does not list them)."""
    try:
        status = Path("/proc/self/status").read_text()
    except OSError:
        status = ""
    caught = _status_mask(status, "SigCgt")
    blocked: dict[str, int] = {}
    try:
        tids = os.listdir("/proc/self/task")
    except OSError:
        tids = []
    for tid in tids:
        try:
            mask = _status_mask(Path(f"/proc/self/task/{tid}/status").read_text(), "SigBlk")
        except OSError:
            continue  # the thread ended between the listing and the read
        if mask is not None:
            blocked[tid] = mask & WATCHED_MASK
    itimers = {name: list(signal.getitimer(which)) for name, which in _ITIMERS}
    try:
        posix: int | None = sum(1 for ln in Path("/proc/self/timers").read_text().splitlines() if ln.startswith("ID:"))
    except OSError:
        posix = None
    return {"caught": None if caught is None else caught & WATCHED_MASK, "blocked": blocked, "itimers": itimers,
            "posix_timers": posix}


def _names(mask: int) -> str:
    out = []
    for s in WATCHED_SIGNALS:
        if mask & (1 << (s - 1)):
            try:
                out.append(signal.Signals(s).name)
            except ValueError:
                out.append(f"SIGRT{s}")
    return ", ".join(out[:6])


def signal_changes(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    """What changed between two :func:`signal_state` snapshots that lets code run outside the calls, in words: a
    handler installed for a watched signal, a watched signal unblocked in a thread that blocked it, an interval
    timer or a POSIX timer armed (empty: nothing)."""
    out: list[str] = []
    if not before or not after:
        return out
    b_caught, a_caught = before.get("caught"), after.get("caught")
    if b_caught is not None and a_caught is not None and a_caught & ~b_caught:
        out.append(f"a handler was installed for {_names(a_caught & ~b_caught)}")
    for tid, mask in before.get("blocked", {}).items():
        now = after.get("blocked", {}).get(tid)
        if now is not None and mask & ~now:
            out.append(f"thread {tid} unblocked {_names(mask & ~now)}")
    for name, (value, interval) in after.get("itimers", {}).items():
        if (value or interval) and not any(before.get("itimers", {}).get(name, [0.0, 0.0])):
            out.append(f"the {name} interval timer was armed ({value:.6f} s, every {interval:.6f} s)")
    b_posix, a_posix = before.get("posix_timers"), after.get("posix_timers")
    if b_posix is not None and a_posix is not None and a_posix > b_posix:
        out.append(f"{a_posix - b_posix} POSIX timer(s) were created")
    return out
