"""``cuda-agent report DIR [DIR ...]``: report.json, report.md and PNG plots, runs side by side.

Every number carries its definition (``definitions``) and every run its
provenance (config hash, policy, backend, devices and software from the
graded results). GPU-queue utilisation comes from the runner's session
records (``OUT/sessions/*.json``).
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
from cuda_agent.harness.evaluation.selection import SELECTION_MODES

log = structlog.get_logger(__name__)

#: Per-episode fields that do not depend on timing noise: two runs of the same
#: deterministic policy must agree on them (the resume test compares these).
DETERMINISTIC_EPISODE_FIELDS = ("task_id", "seed_index", "exit", "turns", "selections")


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
    config = json.loads(cfg_path.read_text()) if cfg_path.exists() else {}
    machines: set[tuple[str, ...]] = set()
    for ep_dir in list_episode_dirs(out_dir):
        rec = read_eval_record(ep_dir)
        if rec is None:
            continue
        for res in rec.regrades.values():
            p = res.provenance
            machines.add((p.backend, p.device, p.driver or "", p.cuda or "", p.torch, p.package_version, res.isolation))
    return {
        "config_hash": config.get("config_hash"),
        "policy": config.get("config", {}).get("policy"),
        "backend": config.get("config", {}).get("backend"),
        "tasks": config.get("config", {}).get("eval", {}).get("tasks"),
        "max_turns": config.get("config", {}).get("agent", {}).get("max_turns"),
        "selections": config.get("config", {}).get("eval", {}).get("selections"),
        "machines": [
            dict(zip(("backend", "device", "driver", "cuda", "torch", "package_version", "isolation"), m))
            for m in sorted(machines)
        ],
        "episodes_finished": len(episodes),
    }


def episode_table(episodes: Sequence[EpisodeSummary]) -> list[dict[str, Any]]:
    """Per-episode rows of the timing-independent fields (statuses, selections, exits)."""
    rows = []
    for ep in sorted(episodes, key=lambda e: (e.task_id, e.seed_index)):
        rows.append(
            {
                "task_id": ep.task_id,
                "seed_index": ep.seed_index,
                "exit": ep.exit,
                "turns": ep.turns,
                "selections": {
                    mode: {
                        "turn": o.turn,
                        "snapshot_id": o.snapshot_id,
                        "in_trajectory": o.in_trajectory.status if o.in_trajectory else None,
                        "regraded": o.regraded.status if o.regraded else None,
                        "hidden_heldout_pass": o.hidden_heldout_pass,
                        "hidden_widened_pass": o.hidden_widened_pass,
                    }
                    for mode, o in sorted(ep.selections.items())
                },
            }
        )
    return rows


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
        runs.append(
            {
                "name": name,
                "path": str(out_dir),
                "episodes_unfinished": unfinished,
                "provenance": prov,
                "metrics": {mode: compute_metrics(episodes, mode=mode, max_turns=turns, regraded_mode=mode in regraded_modes)
                            for mode in SELECTION_MODES},
                "queue": queue_utilisation(out_dir),
                "episodes": episode_table(episodes),
                "_summaries": episodes,
            }
        )
    return {"generated_by": f"cuda-agent report {__version__}", "definitions": DEFINITIONS, "runs": runs}


def _fmt(x: Any, pct: bool = False, digits: int = 3) -> str:
    if x is None:
        return "–"
    if pct:
        return f"{100 * x:.1f}%"
    if isinstance(x, float):
        return f"{x:.{digits}f}"
    return str(x)


def render_markdown(report: dict[str, Any], plot_files: Sequence[str] = ()) -> str:
    """report.md: headline table per selection mode, per level, hidden checks, cost, budget, queue."""
    lines = ["# cuda-agent evaluation report", "", report["generated_by"], ""]
    lines += ["## Headline (trusted regrading; in-trajectory in parentheses)", ""]
    lines += ["| run | selection | episodes | pass | > eager | > compile | geomean vs eager | geomean vs compile | held-out false pass | widened false pass |",
              "|---|---|---|---|---|---|---|---|---|---|"]
    for run in report["runs"]:
        for mode, m in run["metrics"].items():
            t = m["in_trajectory"]["overall"]
            if m["regraded"] is None:
                lines.append(
                    f"| {run['name']} | {mode} | {m['n_episodes']} | not regraded ({_fmt(t['pass_rate'], True)}) "
                    f"| ({_fmt(t['faster_than_eager_rate'], True)}) | ({_fmt(t['faster_than_compile_rate'], True)}) "
                    f"| ({_fmt(t['geomean_speedup_eager'])}) | ({_fmt(t['geomean_speedup_compile'])}) | – | – |"
                )
                continue
            r, h = m["regraded"]["overall"], m["hidden"]
            lines.append(
                f"| {run['name']} | {mode} | {m['n_episodes']} | {_fmt(r['pass_rate'], True)} ({_fmt(t['pass_rate'], True)}) "
                f"| {_fmt(r['faster_than_eager_rate'], True)} ({_fmt(t['faster_than_eager_rate'], True)}) "
                f"| {_fmt(r['faster_than_compile_rate'], True)} ({_fmt(t['faster_than_compile_rate'], True)}) "
                f"| {_fmt(r['geomean_speedup_eager'])} ({_fmt(t['geomean_speedup_eager'])}) "
                f"| {_fmt(r['geomean_speedup_compile'])} ({_fmt(t['geomean_speedup_compile'])}) "
                f"| {_fmt(h['heldout_false_pass_rate'], True)} ({h['heldout_failed']}/{h['heldout_checked']}) "
                f"| {_fmt(h['widened_false_pass_rate'], True)} ({h['widened_failed']}/{h['widened_checked']}) |"
            )
    lines += ["", "## Per level (best-of-trajectory, regraded)", "",
              "| run | level | episodes | pass | > eager | > compile | geomean vs compile | milestones -1/1/2/3 |",
              "|---|---|---|---|---|---|---|---|"]
    for run in report["runs"]:
        regraded = run["metrics"]["best"]["regraded"]
        for lvl, b in (regraded["per_level"] if regraded else {}).items():
            ms = b["milestones"]
            lines.append(
                f"| {run['name']} | {lvl} | {b['n']} | {_fmt(b['pass_rate'], True)} | {_fmt(b['faster_than_eager_rate'], True)} "
                f"| {_fmt(b['faster_than_compile_rate'], True)} | {_fmt(b['geomean_speedup_compile'])} "
                f"| {ms['-1']}/{ms['1']}/{ms['2']}/{ms['3']} |"
            )
    lines += ["", "## Cost, turns to best, spread over seeds (best-of-trajectory)", "",
              "| run | wall s / episode (mean, median) | tokens / episode | device s / episode | turns to best (median [q1, q3]) | pass rate over seeds (mean ± std [min, max]) | GPU-queue utilisation |",
              "|---|---|---|---|---|---|---|"]
    for run in report["runs"]:
        m = run["metrics"]["best"]
        c, tt, s = m["cost"], m["turns_to_best"], m["seeds"]["pass_rate"] or {"mean": None, "std": None, "min": None, "max": None}
        util = ", ".join(f"dev{k}: {_fmt(v['utilisation'], True)}" for k, v in run["queue"]["devices"].items()) or "–"
        lines.append(
            f"| {run['name']} | {_fmt(c['wall_s_per_episode']['mean'], digits=1)}, {_fmt(c['wall_s_per_episode']['median'], digits=1)} "
            f"| {_fmt(c['tokens_per_episode']['mean'], digits=0)} | {_fmt(c['gpu_s_per_episode']['mean'], digits=2)} "
            f"| {_fmt(tt['median'], digits=1)} [{_fmt(tt['q1'], digits=1)}, {_fmt(tt['q3'], digits=1)}] "
            f"| {_fmt(s['mean'], True)} ± {_fmt(s['std'], True)} [{_fmt(s['min'], True)}, {_fmt(s['max'], True)}] | {util} |"
        )
    lines += ["", "## Budget curve (best-of-first-k turns, in-trajectory)", ""]
    for run in report["runs"]:
        bc = run["metrics"]["best"]["budget_curve"]
        if not bc:
            continue
        picks = sorted({1, len(bc["turns"]) // 4 or 1, len(bc["turns"]) // 2 or 1, len(bc["turns"])})
        cells = ", ".join(f"k={bc['turns'][i - 1]}: {_fmt(bc['pass_rate'][i - 1], True)} pass / "
                          f"{_fmt(bc['faster_than_compile_rate'][i - 1], True)} > compile" for i in picks)
        lines.append(f"- {run['name']}: {cells}")
    lines += ["", "## Provenance", ""]
    for run in report["runs"]:
        p = run["provenance"]
        lines.append(f"- **{run['name']}** ({run['path']}): config {p['config_hash']}, policy `{p['policy']}`, "
                     f"backend `{p['backend']}`, tasks `{p['tasks']}`, max turns {p['max_turns']}, "
                     f"{p['episodes_finished']} episodes finished, {run['episodes_unfinished']} unfinished")
        for mach in p["machines"]:
            lines.append("  - " + ", ".join(f"{k}={v}" for k, v in mach.items() if v))
    lines += ["", "## Definitions", ""]
    lines += [f"- **{k}**: {v}" for k, v in report["definitions"].items()]
    if plot_files:
        lines += ["", "## Plots", ""] + [f"![{Path(f).stem}]({Path(f).name})" for f in plot_files]
    return "\n".join(lines) + "\n"


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
