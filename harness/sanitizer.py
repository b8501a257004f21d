"""The compute-sanitizer gate of ``verify`` (``integrity.sanitizer``; CUDA): one input set under memcheck,
racecheck or initcheck in a runner started under the sanitizer; any error it reports rejects the candidate (T21).

A sanitizer that was asked for but is not installed is a harness error (:class:`SanitizerUnavailable`, raised when
the evaluator is made), never a silent pass.
"""

from __future__ import annotations

import secrets
import shutil
from pathlib import Path
from typing import TYPE_CHECKING

from cuda_agent.errors import CudaAgentError
from cuda_agent.harness.runner_client import CandidateFailed, RunnerClient
from cuda_agent.harness.sandbox import CandidateDied
from cuda_agent.harness.session import Session
from cuda_agent.schemas.result import CandidateResult, SanitizerInfo, Status
from cuda_agent.schemas.task import TaskManifest

if TYPE_CHECKING:
    from cuda_agent.harness.evaluator import Evaluator

#: The exit code the sanitized runner ends with when the sanitizer found errors.
ERROR_EXIT = 99


class SanitizerUnavailable(CudaAgentError):
    """``integrity.sanitizer`` asks for compute-sanitizer, and it cannot run here."""


def sanitizer_path(tool: str, kind: str) -> str:
    """The compute-sanitizer binary for ``tool`` on a ``kind`` device (raises :class:`SanitizerUnavailable`)."""
    if kind != "cuda":
        raise SanitizerUnavailable(f"integrity.sanitizer={tool!r} needs the cuda backend (compute-sanitizer checks "
                                   f"CUDA kernels); this is the {kind} backend: set integrity.sanitizer to 'off'")
    exe = shutil.which("compute-sanitizer")
    if exe is None:
        raise SanitizerUnavailable(f"integrity.sanitizer={tool!r}: compute-sanitizer is not on PATH (it comes with "
                                   "the CUDA toolkit); install it or set integrity.sanitizer to 'off'")
    return exe


def sanitizer_gate(evaluator: Evaluator, task: TaskManifest, root: Path, so_path: Path | None,
                   result: CandidateResult) -> CandidateResult:
    """One input set under compute-sanitizer; errors reject (T21)."""
    ctx = evaluator.context("verify")
    tool = ctx.integrity.sanitizer
    exe = sanitizer_path(tool, ctx.kind)
    pool = evaluator.runners("verify")
    proc = pool.start_wrapped([exe, "--tool", tool, "--print-limit", "20", "--error-exitcode", str(ERROR_EXIT)])
    error = None
    try:
        ref = evaluator.references.acquire(task)
        try:
            limits = ctx.settings.limits
            runner = RunnerClient(proc, call_timeout_s=limits.call_timeout_s, load_timeout_s=limits.load_timeout_s,
                                  request_timeout_s=limits.request_timeout_s)
            sess = Session(ctx, task, runner, ref)
            try:
                sess.open(root, so_path, [secrets.randbits(31)])
                sess.call(sess.sets.indices()[0], check=False)
                code = pool.finish(proc, limits.request_timeout_s)
            finally:
                if ref.alive and len(sess.sets):
                    sess.sets.drop()
        finally:
            evaluator.references.release(ref)
    except (CandidateDied, CandidateFailed) as exc:
        code, error = ERROR_EXIT, str(exc)
    finally:
        tail = proc.output_tail()
        pool.release(proc)
    result.diagnostics.sanitizer = SanitizerInfo(tool=tool, exit_code=code, output_tail=tail[-2000:], error=error)
    if code == ERROR_EXIT or "ERROR SUMMARY: 0 errors" not in tail:
        result.status = Status.rejected
        result.rule = f"T21.sanitizer.{tool}"
        result.message = f"compute-sanitizer --tool {tool} reported errors:\n{tail[-1500:]}"
    return result
