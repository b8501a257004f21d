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
import signal
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from cuda_agent.harness._bwrap import BwrapSpec, resolve_isolation


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
) -> SandboxRun:
    """Run ``argv`` under ``isolation`` ('auto' | 'bwrap' | 'process'), output merged.

    :raises IsolationUnavailable: (a ``RuntimeError``) ``isolation='bwrap'`` on a machine where
        bubblewrap cannot create namespaces.
    """
    iso = resolve_isolation(isolation)  # type: ignore[arg-type]
    spec = BwrapSpec(readonly=readonly, writable=writable, hidden=hidden, chdir=writable[0] if writable else Path("/"))
    cmd = iso.prefix(spec) + list(argv)
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
