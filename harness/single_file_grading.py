"""Grading a KernelBench single-file solution on a :class:`~cuda_agent.harness.device_backend.DeviceBackend`.

KernelBench's own forms put the kernels and ``ModelNew`` in one file: CUDA C++ built by ``load_inline`` at import,
or Triton kernels (``@triton.jit``) beside ``ModelNew``. The backend's adapter checks the file statically in its
language (:meth:`~cuda_agent.harness.device_adapter.DeviceAdapter.check_single_file`); the file then becomes
``model_new.py`` beside the task's ``model.py`` and is graded by the trusted pass with every runtime check, with no
build of ours (its own ``load_inline`` build, or the JIT, runs inside the sandboxed runner).
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path
from typing import Any

from cuda_agent.schemas.result import CandidateResult, CheckError, Status
from cuda_agent.schemas.task import TaskManifest


def static_rejection(task: TaskManifest, violations: list[Any], notes: str, seconds: float) -> CandidateResult:
    """A ``rejected`` grade naming the first broken rule (all of them in ``errors``)."""
    first = violations[0]
    errors = [CheckError(check=v.rule, message=(f"{v.file}:{v.line}: " if v.line else f"{v.file}: ") + v.message,
                         details={"file": v.file, "line": v.line}) for v in violations[:20]]
    message = f"rejected by integrity rule {first.rule}: {first.file}" + (f":{first.line}" if first.line else "")
    message += f": {first.message}"
    if notes:
        message += f"\nnot statically recoverable: {notes}"
    return CandidateResult(task_id=task.id, phase="grade", status=Status.rejected, rule=first.rule, message=message,
                           errors=errors, duration_s=seconds, flags=["single_file_static_checks"])


def grade_single_file(backend: Any, source: Path, root: Path, task: TaskManifest) -> CandidateResult:
    """Static checks of ``source`` in the backend's language, then the trusted grading pass of it as
    ``root/model_new.py`` (``root`` must not exist yet). ``task`` is the manifest the backend evaluates."""
    started = time.monotonic()
    static = backend.adapter.check_single_file(source.read_text(errors="replace"), source.name)
    not_static = "; ".join(static.notes)
    if static.violations:
        return static_rejection(task, static.violations, not_static, time.monotonic() - started)
    root.mkdir(parents=True)
    shutil.copy2(source, root / "model_new.py")
    (root / "model.py").write_text(task.code)
    result = backend.evaluator().grade(task, root, None)
    result.flags.append("single_file_static_checks")
    if not_static:
        result.flags.append("single_file_sources_not_static")
        result.message = f"{result.message}\nstatic checks incomplete (runtime checks applied): {not_static}".strip()
    result.diagnostics.static_sources_checked = len(static.sources)
    return result
