"""``cuda-agent score``: grade existing solutions with the trusted pass.

``cuda-agent score SOLUTIONS --tasks TASKS --backend NAME --out DIR``

- ``SOLUTIONS/<name>/``: a workspace (at least ``model_new.py`` and
  ``kernels/``) for task ``TASKS/<name>.py``; it is copied over a fresh
  release layout (our protected ``model.py``/``binding.cpp``/
  ``binding_registry.h`` win), compiled (integrity source + binary rules),
  then graded.
- ``SOLUTIONS/<name>.py``: a KernelBench single-file solution (``ModelNew``,
  typically building its kernels with ``load_inline`` at import); its inline
  C++/CUDA sources and ``ModelNew.forward`` pass the static integrity rules
  (:mod:`~cuda_agent.harness.single_file_integrity`), then it builds inside
  the sandboxed runner and is graded the same way.

- ``--tasks 'kernelbench:KB'``: ``SOLUTIONS`` is a KernelBench run folder
  (``level_{L}_problem_{P}_sample_{S}_kernel.py``), each file mapped to its
  problem by level and id, several samples per problem, KernelBench's
  ``fast_p`` beside our metrics (:mod:`~cuda_agent.harness.score_kernelbench`).

Writes ``DIR/report.json`` = ``{"tasks": [{"task", "status", "rule",
"reward", "speedup_eager", "speedup_compile", "message", "sanitizer", ...}], "summary":
{...}}`` and ``DIR/report.md``. One bad solution never stops the others.
Before anything runs or is written, the backend must be usable and every
``--only`` name must exist (exit code 2 otherwise); the exit code is 0 when
every solution graded correct, 1 when any did not.
"""

from __future__ import annotations

import argparse
import json
import sys
import math
import shutil
import time
from pathlib import Path
from typing import Any

import structlog

from cuda_agent.config import RunConfig, load_config
from cuda_agent.schemas.result import CandidateResult, Status

log = structlog.get_logger(__name__)

#: Solution files copied over the fresh layout; everything else of ours stays.
_SOLUTION_PARTS = ("model_new.py", "kernels")


def register_command(subparsers: Any) -> None:
    """Add the ``score`` parser."""
    from cuda_agent.cli import add_config_options
    from cuda_agent.harness.timing_protocol import PRESETS

    p = subparsers.add_parser(
        "score",
        help="Grade existing solutions (workspaces or KernelBench single files) with the trusted pass.",
        description=__doc__.split("\n\n")[0] if __doc__ else None,
    )
    p.add_argument("solutions", type=Path, help="Folder of solutions: <name>/ workspaces or <name>.py single files.")
    p.add_argument("--tasks", required=True,
                   help="Folder of KernelBench-format task files <name>.py, or kernelbench:KB[?levels=..&sizes=reduced] "
                        "for a KernelBench run folder (level_L_problem_P_sample_S_kernel.py).")
    p.add_argument("--backend", default=None, help="Backend name ('cpu', 'cuda', ...); default: the config's.")
    p.add_argument("--out", type=Path, required=True, help="Output folder for report.json and report.md.")
    p.add_argument("--only", action="append", default=[], metavar="NAME", help="Score only these solution names.")
    p.add_argument("--sanitizer", choices=["off", "memcheck", "memcheck+racecheck"], default=None,
                   help="Run compute-sanitizer on one input set of every solution that grades correct (integrity."
                        "grade_sanitizer of the backend's harness block); a finding fails it. Default: the config's.")
    p.add_argument("--timing-preset", choices=PRESETS, default=None,
                   help="Timing preset of the backend's harness block (timing.preset); 'standard_fast' stops each "
                        "grading pass once its speedups are decided (docs/sandbox-and-evaluator.md). Default: the "
                        "config's.")
    add_config_options(p)
    p.set_defaults(func=handle)


def handle(args: argparse.Namespace) -> int:
    """Run ``score``; exit code 0 when the report was written (whatever the verdicts)."""
    from cuda_agent.cli import make_plugin_manager

    import sys

    overrides = list(args.override) + ([f"backend={args.backend}"] if args.backend else [])
    config = load_config(RunConfig, args.config, overrides)
    harness = f"plugins.{config.backend}.harness"  # the backend's block
    extra = ([f"{harness}.integrity.grade_sanitizer={args.sanitizer}"] if args.sanitizer is not None else []) + (
        [f"{harness}.timing.preset={args.timing_preset}"] if args.timing_preset is not None else [])
    if extra:
        overrides += extra
        config = load_config(RunConfig, args.config, overrides)
    pm = make_plugin_manager(args, config)
    try:
        preflight(args.solutions, args.tasks, config, pm, args.only)
    except ValueError as exc:
        print(f"cuda-agent score: {exc}", file=sys.stderr)
        return 2
    report = score_solutions(args.solutions, args.tasks, args.out, config=config, plugin_manager=pm, only=args.only)
    s = report["summary"]
    counts = ", ".join(f"{v} {k}" for k, v in s["by_status"].items() if v) or "nothing"
    print(
        f"scored {s['n']} solution(s) on backend {s['backend']}: {counts}; "
        f"geomean speedup vs eager {s['geomean_speedup_eager']}, report: {Path(args.out) / 'report.json'}"
    )
    if "kernelbench" in s:
        print("KernelBench " + ", ".join(f"{k} {v}" for k, v in s["kernelbench"]["fast_p"].items())
              + ("" if s["kernelbench"]["comparable_to_published"] else " (reduced sizes: not comparable to published)"))
    return 0 if s["n"] and s["correct"] == s["n"] else 1


def preflight(solutions: Path, tasks: str, config: RunConfig, plugin_manager: Any, only: list[str] | None) -> None:
    """Fail before anything runs or is written: an unusable backend, unknown --only names, a bad task source.

    :raises ValueError: saying what is wrong and what is valid.
    """
    from cuda_agent.harness import score_kernelbench as kb

    backend = plugin_manager.registry.build("backend", config.backend, config.plugins.get(config.backend),
                                            where="backend")
    try:
        usable, why = backend.availability()
    finally:
        backend.close()
    if not usable:
        raise ValueError(f"backend {config.backend!r} is not usable here: {why}")
    harness = getattr(getattr(backend, "config", None), "harness", None)
    if harness is not None:  # a sanitizer asked for that cannot run: refused before anything runs
        from cuda_agent.harness.sanitizer import SanitizerUnavailable, require_sanitizers

        try:
            require_sanitizers(harness.integrity, backend.kind)
        except SanitizerUnavailable as exc:
            raise ValueError(str(exc)) from exc
    if kb.is_kernelbench_spec(tasks):
        names = [s.name for s in kb.map_solutions(Path(solutions), kb.problem_index(tasks))[0]]
    elif not Path(tasks).is_dir():
        raise ValueError(f"--tasks {tasks}: not a folder of task files nor kernelbench:PATH")
    else:
        names = [n for n, _ in discover(Path(solutions))]
    unknown = sorted(set(only or []) - set(names))
    if unknown:
        raise ValueError(f"--only {', '.join(unknown)}: no such solution in {solutions}; valid: "
                         f"{', '.join(sorted(names, key=kb.sort_key)) or '(none)'}")


def discover(solutions: Path, only: list[str] | None = None) -> list[tuple[str, Path]]:
    """(name, path) of every solution: sub-folders and ``*.py`` files, sorted by name."""
    if not solutions.is_dir():
        raise FileNotFoundError(f"solutions folder {solutions} does not exist")
    found = []
    for p in sorted(solutions.iterdir()):
        if p.name.startswith((".", "_")):
            continue
        if p.is_dir() or p.suffix == ".py":
            name = p.stem if p.is_file() else p.name
            if not only or name in only:
                found.append((name, p))
    return found


def score_solutions(
    solutions: Path,
    tasks: Path | str,
    out: Path,
    *,
    config: RunConfig,
    plugin_manager: Any,
    only: list[str] | None = None,
) -> dict[str, Any]:
    """Grade every solution; write and return the report."""
    from rich.progress import Progress

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    registry = plugin_manager.registry
    backend = registry.build("backend", config.backend, config.plugins.get(config.backend), where="backend")
    reward = registry.build("reward", config.reward, config.plugins.get(config.reward), where="reward")
    rows: list[dict[str, Any]] = []
    from cuda_agent.harness.score_tasks import TaskResolver

    resolve = TaskResolver(Path(solutions), tasks)
    entries = [(n, p) for n, p in resolve.entries if not only or n in only]
    try:
        with Progress(transient=True) as progress:
            bar = progress.add_task("scoring", total=len(entries))
            for name, path in entries:
                progress.update(bar, description=f"scoring {name}")
                started = time.monotonic()
                try:
                    row = _score_one(name, path, resolve, out, backend, reward, config)
                except Exception as exc:  # noqa: BLE001 - one bad solution never stops the others
                    log.warning("score.solution_failed", solution=name, error=str(exc))
                    row = _row(name, None, status="error", message=f"harness error while scoring: {type(exc).__name__}: {exc}")
                row["duration_s"] = round(time.monotonic() - started, 3)
                rows.append(row)
                print(f"scored {name}: {row['status']} in {row['duration_s']:.1f} s", file=sys.stderr, flush=True)
                progress.advance(bar)
    finally:
        try:
            backend.close()
        except Exception:  # noqa: BLE001
            pass
    # A file that maps to no task is an error row, but only where it was asked for: `--only` leaves the rest out.
    rows += [_row(n, None, status="error", message=why) for n, why in resolve.unmapped if not only or n in only]
    report = {"tasks": rows, "summary": summarize_rows(rows, config, backend)}
    from cuda_agent.provenance import run_stamp  # config hash (no secrets), enabled plugins: as on every result

    report["provenance"] = run_stamp(config, plugin_manager).as_dict()
    markdown = render_markdown(report)
    if resolve.kernelbench:
        from cuda_agent.harness.score_kernelbench import kernelbench_summary, render_kernelbench_markdown

        report["summary"]["kernelbench"] = kernelbench_summary(rows)
        markdown += render_kernelbench_markdown(report["summary"]["kernelbench"])
    (out / "report.json").write_text(json.dumps(report, indent=2, default=str))
    (out / "report.md").write_text(markdown)
    return report


def _score_one(name: str, path: Path, resolve: Any, out: Path, backend: Any, reward: Any,
               config: RunConfig) -> dict[str, Any]:
    from cuda_agent.harness.tasks import TaskProbeError

    try:
        task, extra = resolve.task(name)
    except ValueError as exc:
        return _row(name, None, status="error", message=str(exc))
    except TaskProbeError as exc:
        if exc.kind != "too_large":
            raise
        # Not even one input set fits this machine: its own status (no reward), never a harness error.
        graded = CandidateResult(task_id=f"tasks/{name}", phase="grade", status=Status.too_large, message=str(exc))
        return {**_row(name, graded, reward=reward.score(graded)), **resolve.kernelbench_fields(name)}
    except Exception as exc:  # noqa: BLE001
        return {**_row(name, None, status="error", message=f"the task of {path.name} could not be loaded: {exc}"),
                **resolve.kernelbench_fields(name)}
    ws_root = out / "workspaces" / name
    if ws_root.exists():
        shutil.rmtree(ws_root)
    if path.is_dir():
        graded, kind = _grade_workspace(path, ws_root, task, backend), "workspace"
    else:
        graded, kind = _grade_single_file(path, ws_root, task, backend), "single_file"
    value = reward.score(graded) if graded.phase == "grade" or graded.status is not Status.correct else None
    row = _row(name, graded, reward=value)
    row["kind"] = kind
    row["flags"] = list(row.get("flags", [])) + extra.pop("flags_extra", [])
    row.update(extra)
    return row


def _grade_workspace(src: Path, ws_root: Path, task: Any, backend: Any) -> CandidateResult:
    """Fresh layout, the solution's model_new.py + kernels/ copied over, grade (build, integrity rules, verify, time)."""
    ws = backend.prepare_workspace(task, ws_root)
    missing = [p for p in _SOLUTION_PARTS if not (src / p).exists()]
    if "model_new.py" in missing:
        return CandidateResult(
            task_id=task.id, phase="grade", status=Status.error, message=f"solution {src} has no model_new.py"
        )
    for part in _SOLUTION_PARTS:
        s = src / part
        if s.is_dir():
            shutil.copytree(s, ws_root / part, dirs_exist_ok=True)
        elif s.is_file():
            shutil.copy2(s, ws_root / part)
    # grade builds from scratch and applies the source and binary rules itself (a failure is its result):
    # a separate compile first would build every solution twice.
    return backend.grade(ws, task)


def _grade_single_file(src: Path, ws_root: Path, task: Any, backend: Any) -> CandidateResult:
    """A KernelBench single file: static checks of its inline sources and forward, then it builds
    itself (load_inline) inside the sandboxed runner and is graded with the runtime checks."""
    grade = getattr(backend, "grade_single_file", None)
    if grade is not None:  # a DeviceBackend: the single-file form of its own language (docs/backends.md)
        return grade(src, ws_root, task)
    from cuda_agent.harness.single_file_integrity import check_single_file

    started = time.monotonic()
    static = check_single_file(src.read_text(errors="replace"), src.name)
    not_static = "; ".join(static.notes)
    if static.violations:
        return _static_rejection(task, static.violations, not_static, time.monotonic() - started)
    ws_root.mkdir(parents=True)
    shutil.copy2(src, ws_root / "model_new.py")
    task_for = getattr(backend, "task_for", None)
    task = task_for(task) if task_for else task
    (ws_root / "model.py").write_text(task.code)
    evaluator = backend.evaluator() if hasattr(backend, "evaluator") else None
    if evaluator is None:
        from cuda_agent.harness.evaluator import Evaluator

        evaluator = Evaluator(getattr(backend, "kind", backend.name))
    result = evaluator.grade(task, ws_root, None)
    result.flags.append("single_file_static_checks")
    if not_static:
        result.flags.append("single_file_sources_not_static")
        result.message = f"{result.message}\nstatic checks incomplete (runtime checks applied): {not_static}".strip()
    result.diagnostics.static_sources_checked = len(static.sources)
    return result


def _static_rejection(task: Any, violations: list[Any], notes: str, seconds: float) -> CandidateResult:
    """A ``rejected`` result naming the first broken rule (all of them in ``errors``)."""
    from cuda_agent.schemas.result import CheckError

    first = violations[0]
    errors = [
        CheckError(check=v.rule, message=(f"{v.file}:{v.line}: " if v.line else f"{v.file}: ") + v.message,
                   details={"file": v.file, "line": v.line})
        for v in violations[:20]
    ]
    message = f"rejected by integrity rule {first.rule}: {first.file}" + (f":{first.line}" if first.line else "")
    message += f": {first.message}"
    if notes:
        message += f"\nnot statically recoverable: {notes}"
    return CandidateResult(task_id=task.id, phase="grade", status=Status.rejected, rule=first.rule, message=message,
                           errors=errors, duration_s=seconds, flags=["single_file_static_checks"])


def _finite(x: float | None) -> float | None:
    return None if x is None or not math.isfinite(x) else round(float(x), 6)


def _row(
    name: str, result: CandidateResult | None, *, status: str | None = None, message: str = "", reward: float | None = None
) -> dict[str, Any]:
    if result is None:
        return {
            "task": name,
            "status": status or "error",
            "rule": None,
            "reward": None,
            "speedup_eager": None,
            "speedup_compile": None,
            "message": message,
        }
    return {
        "task": name,
        "status": result.status.value,
        "rule": result.rule,
        "reward": reward,
        "speedup_eager": _finite(result.speedup_eager),
        "speedup_compile": _finite(result.speedup_compile),
        "message": result.message[:2000],
        "phase": result.phase,
        "candidate_ms": result.timing.median_ms if result.timing else None,
        "eager_ms": result.baselines.eager.median_ms if result.baselines and result.baselines.eager else None,
        "compile_ms": result.baselines.compile.median_ms if result.baselines and result.baselines.compile else None,
        "isolation": result.isolation,
        "flags": result.flags,
        "errors": [e.model_dump(mode="json") for e in result.errors[:10]],
        "sanitizer": _sanitizer_summary(result),
    }


def _sanitizer_summary(result: CandidateResult) -> dict[str, Any] | None:
    """What the grading pass's sanitizer saw (``--sanitizer``): the last tool run, findings that count, kernels
    the library filter ignored; None where it did not run."""
    info = result.diagnostics.sanitizer if result.diagnostics is not None else None
    if info is None:
        return None
    return {"tool": info.tool, "phase": info.phase, "findings": info.findings, "ignored": info.ignored[:20],
            "error": info.error}


def _geomean(xs: list[float]) -> float | None:
    xs = [x for x in xs if x and x > 0]
    return round(math.exp(sum(math.log(x) for x in xs) / len(xs)), 4) if xs else None


def summarize_rows(rows: list[dict[str, Any]], config: RunConfig, backend: Any) -> dict[str, Any]:
    """Counts per status, pass and faster-than rates, geomean speedups, mean reward."""
    n = len(rows)
    by_status = {s.value: sum(1 for r in rows if r["status"] == s.value) for s in Status}
    correct = [r for r in rows if r["status"] == "correct"]
    eager = [r["speedup_eager"] for r in correct if r.get("speedup_eager")]
    comp = [r["speedup_compile"] for r in correct if r.get("speedup_compile")]
    rewards = [r["reward"] for r in rows if r.get("reward") is not None]
    return {
        "n": n,
        "backend": config.backend,
        "reward_name": config.reward,
        "by_status": by_status,
        "correct": len(correct),
        "pass_rate": round(len(correct) / n, 4) if n else None,
        "faster_than_eager_rate": round(sum(1 for x in eager if x > 1.0) / n, 4) if n else None,
        "faster_than_compile_rate": round(sum(1 for x in comp if x > 1.0) / n, 4) if n else None,
        "milestone_eager_rate": round(sum(1 for x in eager if x > 1.05) / n, 4) if n else None,
        "geomean_speedup_eager": _geomean(eager),
        "geomean_speedup_compile": _geomean(comp),
        "mean_reward": round(sum(rewards) / len(rewards), 4) if rewards else None,
    }


def render_markdown(report: dict[str, Any]) -> str:
    """report.md: the summary and one table row per solution."""
    s = report["summary"]
    lines = [
        f"# Score report ({s['backend']})",
        "",
        f"{s['n']} solution(s): {s['correct']} correct (pass rate {s['pass_rate']}), "
        f"faster than eager {s['faster_than_eager_rate']}, faster than compile {s['faster_than_compile_rate']}; "
        f"geomean speedup vs eager {s['geomean_speedup_eager']}, vs compile {s['geomean_speedup_compile']}; "
        f"mean reward ({s['reward_name']}) {s['mean_reward']}.",
        "",
        "| task | status | rule | reward | speedup eager | speedup compile | message |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in report["tasks"]:
        msg = (r.get("message") or "").replace("\n", " ").replace("|", "\\|")[:160]
        lines.append(
            f"| {r['task']} | {r['status']} | {r['rule'] or ''} | {r['reward'] if r['reward'] is not None else ''} | "
            f"{r['speedup_eager'] if r['speedup_eager'] is not None else ''} | "
            f"{r['speedup_compile'] if r['speedup_compile'] is not None else ''} | {msg} |"
        )
    return "\n".join(lines) + "\n"
