"""``cuda-agent doctor``'s sandbox row: what the harness's sandboxes (compiles, probes, candidates) run under here."""

from __future__ import annotations

import subprocess
from typing import Any

from cuda_agent.hookspecs import hookimpl


def check_bwrap() -> dict[str, Any]:
    """The harness's own isolation resolver, so doctor reports exactly what candidates get (uid, fallback notes)."""
    try:
        from cuda_agent.harness import resolve_isolation  # the harness's resolver (its public API)
    except ImportError as exc:
        return {"ok": False, "detail": f"the harness is not importable ({exc}); candidates cannot be sandboxed"}
    iso = resolve_isolation("auto")
    version = None
    if iso.binary:
        try:
            out = subprocess.run([iso.binary, "--version"], capture_output=True, text=True, timeout=20)
            text = (out.stdout + out.stderr).strip()
            version = text.splitlines()[-1] if text else None
        except (OSError, subprocess.TimeoutExpired) as exc:
            version = f"(no version: {exc})"
    ok = iso.level == "bwrap"
    return {"ok": ok, "path": iso.binary, "version": version, "uid": iso.uid, "notes": list(iso.notes),
            "detail": "sandbox starts" if ok else iso.reason}


@hookimpl
def doctor_checks() -> dict[str, dict[str, Any]]:
    """The ``bubblewrap`` row of ``cuda-agent doctor``."""
    return {"bubblewrap": check_bwrap()}
