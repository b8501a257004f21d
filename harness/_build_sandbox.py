"""Running the compiler sandboxed: bubblewrap when usable, else a plain process group.

The bubblewrap arguments come from :mod:`~cuda_agent.harness._bwrap` (the
builder every sandbox shares): the root file system and the workspace are
read-only, only the build folder (and /tmp, a private tmpfs) is writable,
there is no network, the compiler has its own pid namespace and runs as uid
65534 where the machine allows it; folders holding harness state can be
hidden behind empty tmpfs mounts. A timeout kills the whole tree.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from cuda_agent.harness._bwrap import BwrapSpec, resolve_isolation

#: Environment variable overriding :data:`BACKGROUND_NICE` (0 = normal priority).
BACKGROUND_NICE_ENV = "CUDA_AGENT_BACKGROUND_NICE"
#: Niceness of CPU work nobody waits on at the device: compiles and task probes. Under load (an eval with many
#: episodes in flight) they otherwise take the cores the processes holding a GPU's timing lock need: on a 16-core
#: H200 host with 16 tasks in flight, grading under the lock went from 2-3 s to 12-15 s per task.
BACKGROUND_NICE = 10


def background_priority(argv: Sequence[str]) -> list[str]:
    """``argv`` run at background priority (``nice -n N``; every process it starts inherits it).

    N is ``$CUDA_AGENT_BACKGROUND_NICE`` or :data:`BACKGROUND_NICE`; unchanged when N is 0 or ``nice`` is missing.
    """
    raw = os.environ.get(BACKGROUND_NICE_ENV, "").strip()
    try:
        level = int(raw) if raw else BACKGROUND_NICE
    except ValueError:
        raise ValueError(f"${BACKGROUND_NICE_ENV}={raw!r} is not an integer (0-19; 0 = normal priority)") from None
    nice = shutil.which("nice")
    if level <= 0 or nice is None:
        return list(argv)
    return [nice, "-n", str(min(level, 19)), *argv]


@dataclass
class SandboxRun:
    """Result of one sandboxed command."""

    returncode: int
    output: str
    timed_out: bool
    isolation: str


def bwrap_usable() -> bool:
    """Whether bubblewrap can sandbox compiles and probes here (any uid)."""
    return resolve_isolation("auto").level == "bwrap"


def run_sandboxed(
    argv: Sequence[str],
    *,
    readonly: Sequence[Path] = (),
    writable: Sequence[Path] = (),
    hidden: Sequence[Path] = (),
    timeout_s: float = 300,
    isolation: str = "auto",
    env: dict[str, str] | None = None,
    background: bool = False,
) -> SandboxRun:
    """Run ``argv`` under ``isolation`` ('auto' | 'bwrap' | 'process'), output merged.

    :param background: run at background priority (:func:`background_priority`), as compiles do.

    :raises IsolationUnavailable: (a ``RuntimeError``) ``isolation='bwrap'`` on a machine where
        bubblewrap cannot create namespaces.
    """
    iso = resolve_isolation(isolation)  # type: ignore[arg-type]
    spec = BwrapSpec(readonly=readonly, writable=writable, hidden=hidden, chdir=writable[0] if writable else Path("/"))
    cmd = iso.prefix(spec) + list(argv)
    if background:
        cmd = background_priority(cmd)
    full_env = {**os.environ, "TMPDIR": "/tmp", **(env or {})}
    proc = subprocess.Popen(
        cmd,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        env=full_env,
        start_new_session=True,
        cwd=str(writable[0]) if writable else None,
    )
    try:
        out, _ = proc.communicate(timeout=timeout_s)
        timed_out = False
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        out, _ = proc.communicate()
        timed_out = True
    return SandboxRun(
        returncode=proc.returncode if not timed_out else -9,
        output=out.decode(errors="replace"),
        timed_out=timed_out,
        isolation=iso.level,
    )
