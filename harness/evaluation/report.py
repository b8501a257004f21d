"""``cuda-agent report DIR [DIR ...]``: report.json, report.md and PNG plots, runs side by side.

Every number carries its definition (``definitions``) and every run its provenance: config hash (secrets
excluded), enabled plugins with distributions and versions, the system prompt hashes its results carry, and the
machines and software from the graded results. A per-task table and per-episode rows (with their regraded
speedups) say what happened to each task; exit reasons are counted. GPU-queue utilisation comes from the
runner's session records (``OUT/sessions/*.json``) and is reported for device backends only. Runs over different
task sets are compared with a warning.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import structlog

from cuda_agent import __version__
from cuda_agent.harness.evaluation.metrics import DEFINITIONS, compute_metrics
from cuda_agent.harness.evaluation.records import (
    EpisodeSummary,
    list_episode_dirs,
    read_eval_record,
    summarize_episode,
    write_json_atomic,
)
from cuda_agent.harness.evaluation.report_markdown import fmt, render_markdown
from cuda_agent.harness.evaluation.selection import SELECTION_MODES
from cuda_agent.harness.evaluation.tables import episode_rows, task_rows

__all__ = ["DETERMINISTIC_EPISODE_FIELDS", "build_report", "headline_line", "load_run", "queue_utilisation",
           "render_markdown", "write_report"]

log = structlog.get_logger(__name__)

#: Per-episode fields that do not depend on timing noise: two runs of the same
#: deterministic policy must agree on them (the resume test compares these).
DETERMINISTIC_EPISODE_FIELDS = ("task_id", "seed_index", "exit", "turns", "selections")
#: Backends without a device queue worth reporting (their "device" is the host CPU).
HOST_BACKENDS = frozenset({"cpu"})


def load_run(out_dir: Path) -> tuple[list[EpisodeSummary], int]:
    """Finished episode summaries of an eval folder, and the number of unfinished episode folders."""
    done, unfinished = [], 0
    for ep_dir in list_episode_dirs(out_dir):
        if read_eval_record(ep_dir) is None:
            unfinished += 1
            continue
        done.append(summarize_episode(ep_dir))
    return done, unfinished


def queue_utilisation(out_dir: Path) -> dict[str, Any]:
    """GPU-queue utilisation over the runner's sessions: busy seconds of each device's timing lock / session wall time."""
    sessions = []
    for path in sorted((Path(out_dir) / "sessions").glob("*.json")):
        sessions.append(json.loads(path.read_text()))
    wall = sum(s.get("wall_s", 0.0) for s in sessions)
    devices: dict[str, dict[str, float]] = {}
    for s in sessions:
        for d in s.get("devices", []):
            slot = devices.setdefault(str(d["index"]), {"busy_s": 0.0, "wait_s": 0.0, "calls": 0, "wall_s": 0.0})
            slot["busy_s"] += d.get("busy_s", 0.0)
            slot["wait_s"] += d.get("wait_s", 0.0)
            slot["calls"] += d.get("calls", 0)
            slot["wall_s"] += s.get("wall_s", 0.0)
    for slot in devices.values():
        slot["utilisation"] = slot["busy_s"] / slot["wall_s"] if slot["wall_s"] else None
    return {
        "sessions": len(sessions),
        "wall_s": wall,
        "devices": devices,
        "episodes_run": sum(s.get("episodes_run", 0) for s in sessions),
        "max_in_flight": max((s.get("max_in_flight", 0) for s in sessions), default=0),
        "overlap_s": sum(s.get("overlap_s", 0.0) for s in sessions),
    }


def _provenance(out_dir: Path, episodes: Sequence[EpisodeSummary]) -> dict[str, Any]:
    cfg_path = Path(out_dir) / "config.json"
    saved = json.loads(cfg_path.read_text()) if cfg_path.exists() else {}
    config = saved.get("config", {})
    machines: set[tuple[str, ...]] = set()
    prompts: set[str] = set()
    plugins = dict(saved.get("plugins") or {})
    for ep_dir in list_episode_dirs(out_dir):
        rec = read_eval_record(ep_dir)
        if rec is None:
            continue
        for res in rec.regrades.values():
            p = res.provenance
            machines.add((p.backend, p.device, p.driver or "", p.cuda or "", p.torch, p.package_version, res.isolation))
            if p.system_prompt_hash:
                prompts.add(p.system_prompt_hash)
            if not plugins and p.plugins:
                plugins = dict(p.plugins)
    return {
        "config_hash": saved.get("config_hash"),
        "policy": config.get("policy"),
        "backend": config.get("backend"),
        "tasks": config.get("eval", {}).get("tasks"),
        "max_turns": config.get("agent", {}).get("max_turns"),
        "selections": config.get("eval", {}).get("selections"),
        "plugins": plugins,
        "system_prompt_hashes": sorted(prompts),
        "machines": [
            dict(zip(("backend", "device", "driver", "cuda", "torch", "package_version", "isolation"), m))
            for m in sorted(machines)
        ],
        "episodes_finished": len(episodes),
    }


def task_set_warnings(runs: Sequence[dict[str, Any]]) -> list[str]:
    """One warning per run whose tasks differ from the first run's (compared numbers would mislead)."""
    if len(runs) < 2:
        return []
    first = {row["task_id"] for row in runs[0]["tasks"]}
    out = []
    for run in runs[1:]:
        tasks = {row["task_id"] for row in run["tasks"]}
        if tasks != first:
            only_a, only_b = sorted(first - tasks), sorted(tasks - first)
            out.append(f"runs {runs[0]['name']!r} and {run['name']!r} cover different tasks "
                       f"({len(first & tasks)} shared; only in {runs[0]['name']}: {', '.join(only_a) or '-'}; "
                       f"only in {run['name']}: {', '.join(only_b) or '-'}): their rates are not comparable")
    return out


def build_report(run_dirs: Sequence[Path], max_turns: int | None = None) -> dict[str, Any]:
    """The report of one or more eval folders (not written; see :func:`write_report`)."""
    runs = []
    names = [Path(d).name for d in run_dirs]
    for out_dir in run_dirs:
        out_dir = Path(out_dir)
        # two runs with the same folder name are told apart by their parent folder
        name = out_dir.name if names.count(out_dir.name) == 1 else f"{out_dir.parent.name}/{out_dir.name}"
        if not (out_dir / "episodes").is_dir():
            raise FileNotFoundError(f"{out_dir} is not an eval output folder (no episodes/ inside)")
        episodes, unfinished = load_run(out_dir)
        prov = _provenance(out_dir, episodes)
        turns = max_turns or prov.get("max_turns")
        regraded_modes = set(prov.get("selections") or SELECTION_MODES)
        backend = prov.get("backend")
        runs.append(
            {
                "name": name,
                "path": str(out_dir),
                "episodes_unfinished": unfinished,
                "provenance": prov,
                "metrics": {mode: compute_metrics(episodes, mode=mode, max_turns=turns, regraded_mode=mode in regraded_modes)
                            for mode in SELECTION_MODES},
                "queue": queue_utilisation(out_dir) if backend not in HOST_BACKENDS else None,
                "tasks": task_rows(episodes),
                "episodes": episode_rows(episodes),
                "_summaries": episodes,
            }
        )
    warnings = task_set_warnings(runs)
    for warning in warnings:
        log.warning("report.task_sets_differ", detail=warning)
    return {"generated_by": f"cuda-agent report {__version__}", "definitions": DEFINITIONS, "warnings": warnings,
            "runs": runs}


def headline_line(run: dict[str, Any]) -> str:
    """One line for the terminal: the best-of-trajectory headline of a run, rounded."""
    best = run["metrics"]["best"]
    which = "regraded" if best["regraded"] else "in_trajectory"
    m = best[which]["overall"]
    return (f"best-of-trajectory ({which.replace('_', '-')}): pass {fmt(m['pass_rate'], pct=True)}, "
            f"> eager {fmt(m['faster_than_eager_rate'], pct=True)}, > compile {fmt(m['faster_than_compile_rate'], pct=True)}, "
            f"geomean vs eager {fmt(m['geomean_speedup_eager'], x=True)}, "
            f"vs compile {fmt(m['geomean_speedup_compile'], x=True)}")


def write_report(run_dirs: Sequence[Path], dest: Path, *, plots: bool = True, max_turns: int | None = None) -> dict[str, Any]:
    """Write ``dest/report.json``, ``dest/report.md`` and (``plots``) the PNGs; return the report."""
    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    report = build_report(run_dirs, max_turns=max_turns)
    plot_files: list[str] = []
    if plots:
        from cuda_agent.harness.evaluation.plots import render_plots

        plot_files = [str(p) for p in render_plots(report, dest)]
    for run in report["runs"]:
        run.pop("_summaries", None)
    report["plots"] = [Path(p).name for p in plot_files]
    write_json_atomic(dest / "report.json", report)
    (dest / "report.md").write_text(render_markdown(report, plot_files))
    log.info("report written", dest=str(dest), runs=len(report["runs"]), plots=len(plot_files))
    return report
