"""compute-sanitizer in the harness (T21): the gate of ``verify`` and the pass of trusted grading.

- ``integrity.sanitizer`` (one tool): after a passing ``verify``, one input set runs under that tool;
- ``integrity.grade_sanitizer`` (``memcheck`` or ``memcheck+racecheck``): after a passing grade (and in
  ``cuda-agent score``), one fresh input set runs under memcheck, then under racecheck where it applies (kernels
  that use shared memory; every kernel when that cannot be read from the build).

Each run is a runner started under ``compute-sanitizer --log-file`` in the same sandbox, which loads the candidate
and calls it once; the trusted side reads the report (:func:`parse_report`). A finding fails the evaluation with rule
``T21.sanitizer.<tool>`` and the first report. Findings inside torch's or vendor libraries' kernels are ignored only
through :data:`LIBRARY_KERNELS` (documented in docs/integrity.md), and never for a kernel the candidate's own build
defines. A sanitizer that was asked for but cannot run is a harness error (:class:`SanitizerUnavailable`), never a
silent pass.
"""

from __future__ import annotations

import re
import secrets
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

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
#: Substrings of kernel names whose findings are ignored: torch's own kernels and vendor libraries' (cuBLAS, cuBLASLt
#: 'nvjet'/'xmma' GEMMs, cuDNN, CUB, NCCL). A kernel the candidate's build defines is never ignored, whatever its name.
LIBRARY_KERNELS: tuple[str, ...] = ("at::native::", "at::cuda::", "at::", "c10::", "cub::", "cublas", "cublasLt",
                                    "nvjet", "xmma", "cudnn", "nccl")
#: Report file of a sanitized runner, in its exchange folder.
REPORT_FILE = "sanitizer.log"
#: Bytes of a report read at most (print-limit keeps them small; a runaway report is cut).
REPORT_LIMIT = 1 << 20

_PREFIX = re.compile(r"^=+ ?")
_FRAME = re.compile(r"\bat (?:0x[0-9a-fA-F]+ in )?(?:[^\s:()]+:\d+:)?(?P<fn>[^\s].*?)(?:\+0x[0-9a-fA-F]+)?"
                    r"(?:\s*\[\d+ hazards?\])?$")
_HOST_LINES = ("Saved host backtrace", "Host Frame")
_NOT_FINDINGS = ("COMPUTE-SANITIZER", "ERROR SUMMARY", "RACECHECK SUMMARY", "LEAK SUMMARY", "Target application",
                 "Saved host backtrace", "Host Frame", "No hazards", "Note:")


class SanitizerUnavailable(CudaAgentError):
    """A sanitizer was asked for (``integrity.sanitizer`` / ``grade_sanitizer``) and it cannot run here."""


@dataclass
class Finding:
    """One error record of a sanitizer report."""

    text: str
    """The record as printed (prefix stripped)."""
    kernel: str | None
    """The kernel or function its first frame names (None: a host-side error)."""


@dataclass
class Report:
    """A parsed report: the findings that count, and the kernels the library filter ignored."""

    findings: list[Finding] = field(default_factory=list)
    ignored: list[str] = field(default_factory=list)
    summary: bool = False
    """An ERROR/RACECHECK SUMMARY line was printed (the tool ran to its end)."""


def sanitizer_path(tool: str, kind: str) -> str:
    """The compute-sanitizer binary for ``tool`` on a ``kind`` device (raises :class:`SanitizerUnavailable`)."""
    if kind != "cuda":
        raise SanitizerUnavailable(f"sanitizer {tool!r} needs the cuda backend, or another whose kernels run on a "
                                   f"CUDA device (compute-sanitizer checks CUDA kernels); this backend runs on {kind}: "
                                   "set integrity.sanitizer and integrity.grade_sanitizer to 'off'")
    exe = shutil.which("compute-sanitizer")
    if exe is None:
        raise SanitizerUnavailable(f"sanitizer {tool!r}: compute-sanitizer is not on PATH (it comes with the CUDA "
                                   "toolkit); install it or set integrity.sanitizer / integrity.grade_sanitizer to 'off'")
    return exe


def require_sanitizers(integrity: Any, kind: str) -> None:
    """Raise :class:`SanitizerUnavailable` when a sanitizer the integrity block asks for cannot run on ``kind``."""
    for tool in (integrity.sanitizer, integrity.grade_sanitizer):
        if tool != "off":
            sanitizer_path(tool, kind)


def grade_tools(setting: str) -> list[str]:
    """The tools of ``integrity.grade_sanitizer``: 'memcheck+racecheck' -> ['memcheck', 'racecheck']."""
    return [] if setting == "off" else setting.split("+")


def parse_report(text: str, own_kernels: tuple[str, ...] = ()) -> Report:
    """The error records of a compute-sanitizer report, split into findings and ignored library kernels.

    A record starts at a ``=========`` line that is not indented and ends before the next; its kernel is the first
    ``at ...`` frame. ``own_kernels``: the candidate's kernel names (never filtered).
    """
    from cuda_agent.harness.integrity.runtime import base_kernel_name

    report = Report()
    records: list[list[str]] = []
    for raw in text.splitlines():
        if not raw.startswith("="):
            continue
        line = _PREFIX.sub("", raw)
        if not line.strip():
            continue
        if "SUMMARY" in line:
            report.summary = True
        if not line[:1].isspace():
            records.append([line])
        elif records:
            records[-1].append(line)
    own = {base_kernel_name(k).split("::")[-1] for k in own_kernels}
    for rec in records:
        if rec[0].startswith(_NOT_FINDINGS):
            continue
        frames = (ln.strip() for ln in rec if not ln.strip().startswith(_HOST_LINES))
        kernel = next((m.group("fn").strip() for ln in frames for m in [_FRAME.search(ln)] if m), None)
        base = base_kernel_name(kernel) if kernel else ""
        if kernel and base.split("::")[-1] not in own and any(lib in kernel for lib in LIBRARY_KERNELS):
            if base not in report.ignored:
                report.ignored.append(base)
            continue
        report.findings.append(Finding(text="\n".join(rec), kernel=kernel))
    return report


def racecheck_applies(so_path: Path | None) -> bool:
    """Whether racecheck can find anything: some kernel of the build uses shared memory (``cuobjdump -res-usage``);
    True when that cannot be read (no build of ours, no cuobjdump)."""
    tool = shutil.which("cuobjdump")
    if so_path is None or tool is None:
        return True
    try:
        out = subprocess.run([tool, "-res-usage", str(so_path)], capture_output=True, text=True, timeout=120).stdout
    except (OSError, subprocess.TimeoutExpired):
        return True
    shared = [int(v) for v in re.findall(r"SHARED:(\d+)", out)]
    return not shared or any(shared)


def sanitized_run(evaluator: Evaluator, phase: str, tool: str, task: TaskManifest, root: Path,
                  so_path: Path | None, own_kernels: tuple[str, ...] = ()) -> tuple[SanitizerInfo, Report]:
    """One input set from a fresh secret seed, called once in a runner started under ``tool``."""
    ctx = evaluator.context(phase)
    exe = sanitizer_path(tool, ctx.kind)
    pool = evaluator.runners(phase)
    # Without torch's caching allocator every tensor is its own allocation, so memcheck sees a write past a
    # tensor's end (inside a cached segment it would be in bounds); torch's documented setting for the sanitizer.
    proc = pool.start_wrapped(lambda exchange: ["env", "PYTORCH_NO_CUDA_MEMORY_CACHING=1", exe, "--tool", tool,
                                                "--print-limit", "20", "--show-backtrace", "device",
                                                "--error-exitcode", str(ERROR_EXIT),
                                                "--log-file", str(exchange / REPORT_FILE)])
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
        log = _read_report(proc.exchange / REPORT_FILE)
        pool.release(proc)
    report = parse_report(log or tail, own_kernels)
    first = report.findings[0].text if report.findings else ""
    info = SanitizerInfo(tool=tool, exit_code=code, output_tail=(log or tail)[-2000:], error=error, phase=phase,
                         findings=len(report.findings), ignored=report.ignored, first_report=first[:2000])
    return info, report


def _read_report(path: Path) -> str:
    try:
        with open(path, "rb") as f:  # written by the sandboxed process: read as bytes, bounded
            return f.read(REPORT_LIMIT).decode(errors="replace")
    except OSError:
        return ""


def _reject(result: CandidateResult, info: SanitizerInfo, report: Report) -> bool:
    """Fail ``result`` when the sanitized run found something that counts (or did not run to its end)."""
    result.diagnostics.sanitizer = info
    if report.findings:
        reason = f"compute-sanitizer --tool {info.tool} reported:\n{report.findings[0].text[:1500]}"
    elif info.error or not report.summary or (info.exit_code not in (0, ERROR_EXIT) and info.exit_code is not None):
        reason = (f"the run under compute-sanitizer --tool {info.tool} did not finish "
                  f"(exit code {info.exit_code}{'; ' + info.error if info.error else ''}):\n{info.output_tail[-800:]}")
    else:
        return False
    result.status = Status.rejected
    result.rule = f"T21.sanitizer.{info.tool}"
    result.message = reason
    result.timing = None
    result.speedup_eager = result.speedup_compile = None
    return True


def sanitizer_gate(evaluator: Evaluator, task: TaskManifest, root: Path, so_path: Path | None,
                   result: CandidateResult) -> CandidateResult:
    """``verify``'s gate: one input set under ``integrity.sanitizer``; a finding rejects (T21)."""
    tool = evaluator.context("verify").integrity.sanitizer
    info, report = sanitized_run(evaluator, "verify", tool, task, root, so_path, _own_kernels(so_path))
    _reject(result, info, report)
    return result


def sanitize_graded(evaluator: Evaluator, task: TaskManifest, root: Path, so_path: Path | None,
                    result: CandidateResult) -> CandidateResult:
    """The grading pass's sanitizer (``integrity.grade_sanitizer``) on a solution that graded correct."""
    tools = grade_tools(evaluator.settings.integrity.grade_sanitizer)
    if not tools or not result.passed:
        return result
    own = _own_kernels(so_path)
    for tool in tools:
        if tool == "racecheck" and not racecheck_applies(so_path):
            result.flags.append("racecheck_not_applicable")
            continue
        info, report = sanitized_run(evaluator, "grade", tool, task, root, so_path, own)
        if _reject(result, info, report):
            break
    return result


def _own_kernels(so_path: Path | None) -> tuple[str, ...]:
    """Kernel names the candidate's build defines (kept out of the library filter)."""
    if so_path is None or not Path(so_path).is_file():
        return ()
    from cuda_agent.harness.integrity.binary import defined_symbols

    return tuple(defined_symbols(Path(so_path)))
