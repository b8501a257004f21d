"""Warm task-probe servers: torch imported once, a forked child per task.

A fresh probe process spends most of its time importing torch (3-5 s idle, 9-14 s on an H200 host with eight
tasks loading at once), which made task loading the largest cost of scoring a new task. A server runs
``_task_probe_child.py --serve`` under the same sandbox and priority as the one-shot probe and answers one
request at a time; each request runs in a child forked from it (see that module for the isolation between
requests). Servers are pooled per (isolation, GPU access), at most :func:`max_servers` of each, started on
demand and kept until the interpreter exits.

``CUDA_AGENT_PROBE_SERVER=0`` turns servers off (one fresh process per probe). A server that cannot start or
dies is never fatal: :func:`served_probe` returns None and the caller runs the one-shot probe.
"""

from __future__ import annotations

import atexit
import collections
import json
import os
import queue
import secrets
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import structlog

from cuda_agent.harness import _spawner
from cuda_agent.harness._build_sandbox import background_priority
from cuda_agent.harness._bwrap import BwrapSpec, resolve_isolation
from cuda_agent.harness.settings import usable_cpus

log = structlog.get_logger(__name__)

#: Environment variable: "0" = no probe servers (one fresh process per probe).
SERVER_ENV = "CUDA_AGENT_PROBE_SERVER"
#: Seconds the client waits beyond a request's own limit before it gives the server up as hung.
_BACKSTOP_S = 30.0
_CHILD = Path(__file__).with_name("_task_probe_child.py")


def servers_enabled() -> bool:
    """False when ``$CUDA_AGENT_PROBE_SERVER`` is 0/false/no."""
    return os.environ.get(SERVER_ENV, "1").strip().lower() not in ("0", "false", "no")


def max_servers() -> int:
    """Servers kept per pool: one per 4 usable cores, between 1 and 4."""
    return max(1, min(4, usable_cpus() // 4))


def probe_command(isolation: str, dev_bind: bool, *args: str, lock_files: tuple[str, ...] = ()) -> list[str]:
    """The probe child's command line (``args`` appended) under ``isolation``, at background priority: the
    one-shot probe and the servers run the same sandbox. ``lock_files``: the device's timing lock and turnstile,
    bound read-only into the sandbox (the real run holds the lock shared; ``flock`` needs no write access)."""
    argv = [sys.executable, "-I", str(_CHILD), *args]
    spec = BwrapSpec(dev_bind=dev_bind, chdir=Path("/"), readonly=tuple(Path(f) for f in lock_files))
    return background_priority(resolve_isolation(isolation).prefix(spec) + argv)  # type: ignore[arg-type]


class ProbeServerError(RuntimeError):
    """The server could not start, died or hung (not the task's fault): the caller falls back."""


class ProbeServer:
    """One warm server process and the pipes to it; one request at a time."""

    def __init__(self, isolation: str, dev_bind: bool, startup_timeout_s: float,
                 lock_files: tuple[str, ...] = ()) -> None:
        self.sandboxed = resolve_isolation(isolation).level == "bwrap"  # type: ignore[arg-type]
        self.proc = _spawner.popen(  # by the spawner thread: see harness/_spawner.py
            probe_command(isolation, dev_bind, "--serve", *(["--sandboxed"] if self.sandboxed else []),
                          lock_files=lock_files), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, bufsize=1,
            start_new_session=True,
        )
        self._lines: queue.Queue[str | None] = queue.Queue()
        self._stderr: collections.deque[str] = collections.deque(maxlen=400)
        self._stderr_count = 0
        threading.Thread(target=self._pump_out, daemon=True).start()
        threading.Thread(target=self._pump_err, daemon=True).start()
        first = self._next_line(time.monotonic() + startup_timeout_s)
        if first is None or first.strip() != "READY":
            self.close()
            raise ProbeServerError(f"probe server did not start: {''.join(self._stderr)[-1500:]}")

    def _pump_out(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self._lines.put(line)
        self._lines.put(None)

    def _pump_err(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self._stderr.append(line)
            self._stderr_count += 1

    def _next_line(self, deadline: float) -> str | None:
        try:
            return self._lines.get(timeout=max(0.0, deadline - time.monotonic()))
        except queue.Empty:
            return None

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    def request(self, code: str, device: str, seed: int, timeout_s: float,
                extra: dict[str, Any] | None = None) -> tuple[dict[str, Any], str]:
        """(answer, the task's stderr tail) of one probe; raises :class:`ProbeServerError` when the server fails.
        ``extra``: more request fields (``memory_limit_bytes``)."""
        rid = secrets.token_hex(8)
        mark = self._stderr_count
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write(json.dumps({**(extra or {}), "id": rid, "code": code, "device": device,
                                              "seed": seed, "timeout_s": timeout_s}) + "\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError) as exc:
            self.close()
            raise ProbeServerError(f"probe server gone: {exc}") from exc
        deadline = time.monotonic() + timeout_s + _BACKSTOP_S
        while True:
            line = self._next_line(deadline)
            if line is None:  # EOF (died) or the backstop passed (hung)
                self.close()
                raise ProbeServerError("probe server died or hung during a request")
            try:
                answer = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(answer, dict) and answer.get("id") == rid:
                answer.pop("id", None)
                new = max(0, self._stderr_count - mark)
                tail = "".join(list(self._stderr)[-new:]) if new else ""
                return answer, tail[-2000:]

    def close(self) -> None:
        """Stop the server (its stdin closes; killed if it lingers)."""
        try:
            if self.proc.stdin is not None:
                self.proc.stdin.close()
        except OSError:
            pass
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


#: A server pool's key: isolation level, whether the GPU's device nodes are bound, the timing lock files bound.
_Key = tuple[str, bool, tuple[str, ...]]


class _Pool:
    """Idle servers per key; at most :func:`max_servers` alive per key, others wait for one."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._idle: dict[_Key, list[ProbeServer]] = collections.defaultdict(list)
        self._count: dict[_Key, int] = collections.defaultdict(int)

    def acquire(self, key: _Key, startup_timeout_s: float) -> ProbeServer:
        with self._cond:
            while True:
                idle = self._idle[key]
                while idle:
                    server = idle.pop()
                    if server.alive:
                        return server
                    self._count[key] -= 1
                if self._count[key] < max_servers():
                    self._count[key] += 1
                    break
                self._cond.wait()
        try:  # started outside the lock: other keys and idle servers stay available
            return ProbeServer(key[0], key[1], startup_timeout_s, key[2])
        except BaseException:
            with self._cond:
                self._count[key] -= 1
                self._cond.notify()
            raise

    def release(self, key: _Key, server: ProbeServer) -> None:
        with self._cond:
            if server.alive:
                self._idle[key].append(server)
            else:
                self._count[key] -= 1
            self._cond.notify()

    def close(self) -> None:
        with self._cond:
            servers = [s for idle in self._idle.values() for s in idle]
            self._idle.clear()
            self._count.clear()
        for server in servers:
            server.close()


_POOL = _Pool()
atexit.register(_POOL.close)


def served_probe(
    code: str, *, device: str, seed: int, timeout_s: float, startup_timeout_s: float, isolation: str,
    extra: dict[str, Any] | None = None,
) -> tuple[dict[str, Any], str] | None:
    """(answer, stderr tail) from a warm server, or None when servers are off or failed, or a CUDA failure needs
    confirming (run the one-shot probe)."""
    if not servers_enabled():
        return None
    lock_files = tuple((extra or {}).get("timing_lock") or ())
    key = (resolve_isolation(isolation).level, device.startswith("cuda"), lock_files)  # type: ignore[arg-type]
    try:
        server = _POOL.acquire(key, startup_timeout_s)
    except (ProbeServerError, OSError) as exc:
        log.warning("probe_server.unavailable", reason=str(exc)[:300])
        return None
    try:
        answer = server.request(code, device, seed, timeout_s, extra)
        if device.startswith("cuda") and not answer[0].get("ok") and "cuda" in str(answer[0].get("message", "")).lower():
            return None  # a CUDA failure in a forked child is confirmed by a fresh process before it is the task's
        return answer
    except ProbeServerError as exc:
        log.warning("probe_server.failed", reason=str(exc)[:300])
        return None
    finally:
        _POOL.release(key, server)


def close_servers() -> None:
    """Stop every idle server (tests; the pool also closes at exit)."""
    _POOL.close()
