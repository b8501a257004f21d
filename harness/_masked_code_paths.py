"""Code folders a sandbox must bind back after masking ``/tmp`` with a private tmpfs.

Every sandbox (built by ``_bwrap``: compiles, task probes, candidates, data
probe workers) mounts a fresh tmpfs over ``/tmp``. When cuda-agent itself, or a
``sys.path`` entry, or the interpreter lives under ``/tmp`` (a CI clone in
``/tmp``, wheels installed with ``--target /tmp/site``, a virtual environment
made there), the sandboxed Python would no longer find the harness code, or
not start at all. These folders are bound back read-only.
"""

from __future__ import annotations

import functools
import importlib
import sys
from pathlib import Path

#: The mount points the sandboxes replace with an empty tmpfs.
MASKED_ROOTS: tuple[Path, ...] = (Path("/tmp"),)

#: Packages whose folders the sandboxed child imports from.
_PACKAGES = ("cuda_agent", "cuda_agent.harness", "cuda_agent.plugins", "cuda_agent.training", "cuda_agent.skills")


@functools.lru_cache(maxsize=1)
def masked_code_paths() -> tuple[Path, ...]:
    """Existing code folders under a masked root, to be ``--ro-bind``-ed back (sorted, no nesting)."""
    candidates: set[Path] = set()
    for name in _PACKAGES:
        module = importlib.import_module(name)
        for entry in getattr(module, "__path__", []):
            candidates.add(Path(entry).resolve())
    for entry in sys.path:
        if entry and Path(entry).is_dir():
            candidates.add(Path(entry).resolve())
    # The interpreter itself: a virtual environment under /tmp (its bin/python is a link the sandboxed command
    # starts through, its pyvenv.cfg tells Python where the base install is), or a Python installed there.
    for entry in (sys.prefix, sys.exec_prefix, str(Path(sys.executable).parent)):
        if entry and Path(entry).is_dir():
            candidates.add(Path(entry).absolute())
            candidates.add(Path(entry).resolve())
    # Never a masked root itself (a script run from /tmp puts /tmp on sys.path): binding it
    # back would undo the private tmpfs.
    under = sorted(p for p in candidates if any(p.is_relative_to(root) and p != root for root in MASKED_ROOTS))
    kept: list[Path] = []
    for p in under:  # a parent already bound covers its children
        if not any(p.is_relative_to(k) for k in kept):
            kept.append(p)
    return tuple(kept)
