"""The probe child's hold of the device's timing lock (shared) around its real run; loaded by path by
``_task_probe_child.py``, which runs under ``python -I`` and cannot import cuda_agent (so neither can this file)."""

from __future__ import annotations

import os


class DeviceHold:
    """The device's timing lock in the shared mode around the real run's device work, taken as
    ``cuda_agent.harness.device_lock.TimingLock`` takes it (this file cannot import cuda_agent): the turnstile
    exclusively, then the lock file shared, then the turnstile let go; a timed batch holds the lock exclusively.

    ``paths``: ``[lock file, turnstile]`` (bound read-only into the sandbox; ``flock`` needs no write access), or
    None for no hold. The wait is bounded by ``wait_s`` because it counts against the probe's time limit: past it,
    the run goes on without the hold (said in the facts) rather than fail a sound task as a timeout."""

    def __init__(self, paths, wait_s: float) -> None:
        self.paths = paths
        self.wait_s = wait_s
        self.fd = None
        self.waited_s = 0.0
        self.error = None

    def __enter__(self):
        if not self.paths:
            return self
        import fcntl
        import time

        t0 = time.monotonic()
        try:
            fd = os.open(self.paths[0], os.O_RDONLY)
            gate = os.open(self.paths[1], os.O_RDONLY)
        except OSError as exc:
            self.error = f"cannot open the timing lock: {exc}"
            return self
        try:
            while True:
                try:
                    fcntl.flock(gate, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    try:
                        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
                        self.fd, fd = fd, None
                        break
                    finally:
                        fcntl.flock(gate, fcntl.LOCK_UN)
                except BlockingIOError:
                    if time.monotonic() - t0 > self.wait_s:
                        self.error = f"not taken: a timed batch held the device for over {self.wait_s:.0f} s"
                        break
                    time.sleep(0.01)
        finally:
            os.close(gate)
            if fd is not None:
                os.close(fd)
            self.waited_s = time.monotonic() - t0
        return self

    def __exit__(self, *exc) -> None:
        if self.fd is not None:
            os.close(self.fd)  # closing the file lets the lock go
            self.fd = None

    def facts(self) -> dict:
        """What the hold did, for the probe's facts."""
        return {"requested": bool(self.paths), "held": self.error is None and bool(self.paths),
                "wait_s": round(self.waited_s, 3), "error": self.error}
