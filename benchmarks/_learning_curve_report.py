"""The learning curve's report: held-out records per point and seed, paired bootstrap comparisons, the PNG.

Used by ``benchmarks/learning_curve.py``; reads the run folders it made (and, after ``--phase rl`` on another
device run, the SFT-phase records it carried in ``records_sft.json``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from cuda_agent.training.kernel_family.curve_stats import keyed, metric, paired_bootstrap, point_summary

METRICS = ("reward", "passed", "faster_than_eager", "hack")


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()] if path.exists() else []


def _heldout_records(folder: Path, tag: str) -> tuple[list[dict[str, Any]], bool]:
    """``(records, partial)`` of one held-out evaluation: ``<folder>/<tag>.jsonl`` when it finished, else the
    records of the episodes that ended in ``<folder>/<tag>/`` (an evaluation cut by the device budget)."""
    recs = _read_jsonl(folder / f"{tag}.jsonl")
    if recs or not (folder / tag).is_dir():
        return recs, False
    from cuda_agent.training.stages.heldout import episode_record

    ended = [episode_record(d) for d in sorted((folder / tag).iterdir()) if (d / "trajectory.jsonl").exists()]
    return [r for r in ended if r["exit"] is not None], True


def collect_records(work: Path, seeds: list[int], phase: str, rl_steps: int = 0) -> dict[str, Any]:
    """One phase's held-out records in this work folder: ``{point: {seed: records}}`` plus stage outputs.

    ``sft`` -> point ``sft``; ``control`` -> ``control``; ``rl`` -> ``rl_1``..``rl_<rl_steps>`` (and the RL runs'
    training metrics under ``train_metrics``). An evaluation the budget cut short contributes the episodes that
    ended, and ``partial.<point>.<seed>`` counts them (the faster episodes: read such a point with care).
    """
    points: dict[str, dict[str, list[dict[str, Any]]]] = {}
    extra: dict[str, Any] = {}

    def add(point: str, s: int, folder: Path, tag: str) -> None:
        recs, partial = _heldout_records(folder, tag)
        if recs:
            points.setdefault(point, {})[str(s)] = recs
        if partial:
            extra.setdefault("partial", {}).setdefault(point, {})[str(s)] = len(recs)

    for s in seeds:
        if phase in ("sft", "control", "sft_eval", "rl_eval", "control_eval"):
            stage = work / f"{phase}_seed{s}" / "0_sft"
            # the resumed evaluations join their phase's point (rl_eval: each seed's own step, joined by the caller)
            point = {"sft_eval": "sft", "rl_eval": "rl_eval", "control_eval": "control"}.get(phase, phase)
            add(point, s, stage / "heldout", "final")
            if (stage / "outputs.json").exists():
                extra.setdefault("outputs", {})[str(s)] = {k: v for k, v in json.loads((stage / "outputs.json").read_text()).items()
                                                          if k != "metrics"}
        else:
            for k in range(1, rl_steps + 1):
                add(f"rl_{k}", s, work / f"rl_seed{s}" / "1_ppo_agentic" / "heldout", f"step_{k:05d}")
    if phase == "rl":
        extra["train_metrics"] = _train_metrics(work, seeds)
    return {"phase": phase, "points": points, **extra}


def rl_stage_folder(step: int) -> str:
    """The PPO stage's folder in a ``rl_step`` run (the only stage of its run folder ``rl_seed<s>``: value
    pretraining runs in ``rl_vp_seed<s>``); the same for every step."""
    return "0_ppo_agentic"


def collect_vp(work: Path, seeds: list[int]) -> dict[str, Any]:
    """What the value pretraining of a ``rl_step`` run gives ``records_rl.json`` for the seeds whose pretraining
    ended (``seeds``): their training metrics (``rl_vp_seed<s>/metrics.jsonl``)."""
    return {"train_metrics": _train_metrics(work, seeds, folder="rl_vp_seed{s}"), "pretrained": list(seeds)}


def merge_vp(carried: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    """``records_rl.json`` once value pretraining ended: the seeds' ``critic_pretrained`` set (their critic is carried
    as ``rl_critic_seed<s>.safetensors``) and the pretraining's metrics appended to their ``train_metrics``."""
    merged = json.loads(json.dumps(carried))
    merged.setdefault("phase", "rl")
    for s in new.get("pretrained", []):
        merged.setdefault("critic_pretrained", {})[str(s)] = True
        merged.setdefault("steps_done", {}).setdefault(str(s), 0)
    for s, rows in new.get("train_metrics", {}).items():
        merged.setdefault("train_metrics", {}).setdefault(s, []).extend(rows)
    return merged


def critic_pretrained(records_rl: dict[str, Any]) -> set[int]:
    """The seeds whose value pretraining ended in an earlier run (their critic is carried)."""
    return {int(s) for s, v in records_rl.get("critic_pretrained", {}).items() if v}


def collect_rl_step(work: Path, steps: dict[int, int], run_steps: dict[int, int] | None = None) -> dict[str, Any]:
    """Records of one ``rl_step`` run: per seed, the held-out evaluation after its last PPO step, as point
    ``rl_<step>`` (``steps[seed]`` = that step's number over the whole run; the run took ``run_steps[seed]`` steps,
    default 1, and evaluated after the last of them), and the run's training metrics."""
    points: dict[str, dict[str, list[dict[str, Any]]]] = {}
    extra: dict[str, Any] = {}
    for s, step in steps.items():
        tag = f"step_{(run_steps or {}).get(s, 1):05d}"
        recs, partial = _heldout_records(work / f"rl_seed{s}" / rl_stage_folder(step) / "heldout", tag)
        if recs:
            points.setdefault(f"rl_{step}", {})[str(s)] = recs
        if partial:
            extra.setdefault("partial", {}).setdefault(f"rl_{step}", {})[str(s)] = len(recs)
    return {"phase": "rl", "points": points, "train_metrics": _train_metrics(work, list(steps)), **extra}


def merge_rl_step(carried: dict[str, Any], new: dict[str, Any], done: dict[int, int],
                  recipe: dict[str, Any] | None = None) -> dict[str, Any]:
    """``records_rl.json`` after a ``rl_step`` run: the carried points plus the new ones, training metrics
    appended per seed, and ``steps_done`` (per seed, the PPO steps whose actor and critic are carried).
    ``recipe`` (the PPO settings the run stepped with) is kept on each of its PPO rows, so a curve whose recipe
    changed between device runs says which steps ran with which. A PPO row's ``step`` is the seed's step (the
    run's own count, from 1 in every run, is kept as ``run_step``)."""
    merged = merge_seeds(carried, {k: v for k, v in new.items() if k != "train_metrics"})
    for s, rows in new.get("train_metrics", {}).items():
        kept = merged.setdefault("train_metrics", {}).setdefault(s, [])
        before = sum(1 for r in kept if r.get("stage") == "ppo_agentic")
        out = []
        for r in rows:
            if r.get("stage") == "ppo_agentic":  # a run counts its steps from 1: the row says the seed's step
                before += 1
                r = dict(r, step=before, run_step=r.get("step"), **({"recipe": dict(recipe)} if recipe else {}))
            out.append(r)
        kept.extend(out)
    merged.setdefault("steps_done", {}).update({str(s): k for s, k in done.items()})
    return merged


def restart_rl(records_rl: dict[str, Any], reason: str, restart_settings: dict[str, Any] | None = None) -> dict[str, Any]:
    """``records_rl.json`` for RL started again from the SFT actors, with the critics kept.

    The PPO steps taken so far are retired, not deleted: their points, ``partial`` counts, PPO training metrics and
    step counts move to ``retired_runs`` with ``reason`` and ``restart_settings`` (those the new steps run with; the
    retired steps' own are in ``reason``), every seed's
    ``steps_done`` is 0, and the next ``rl_step`` run takes step 1 from the SFT actor again. ``critic_pretrained``
    and the value-pretraining metrics stay: the carried critic (pretrained, then updated during the retired steps on
    the SFT policy's own episodes) is as valid a start for the new step 1 as the pretrained one.
    """
    merged = json.loads(json.dumps(records_rl))
    ppo_rows = {s: [m for m in rows if m.get("stage") != "value_pretrain"]
                for s, rows in merged.get("train_metrics", {}).items()}
    retired = {"reason": reason, "restart_settings": restart_settings or {},
               "points": {k: v for k, v in merged.get("points", {}).items() if k.startswith("rl_")},
               "partial": {k: v for k, v in merged.get("partial", {}).items() if k.startswith("rl_")},
               "steps_done": merged.get("steps_done", {}), "train_metrics": {s: r for s, r in ppo_rows.items() if r}}
    merged.setdefault("retired_runs", []).append(retired)
    merged["points"] = {k: v for k, v in merged.get("points", {}).items() if not k.startswith("rl_")}
    merged["partial"] = {k: v for k, v in merged.get("partial", {}).items() if not k.startswith("rl_")}
    merged["train_metrics"] = {s: [m for m in rows if m.get("stage") == "value_pretrain"]
                               for s, rows in merged.get("train_metrics", {}).items()}
    merged["steps_done"] = {s: 0 for s in merged.get("steps_done", {})}
    return merged


def rl_eval_due(step: int, rl_steps: int, every: int = 1) -> bool:
    """Whether RL step ``step`` gets a held-out evaluation (point ``rl_<step>``): every ``every``-th step (the
    preset's ``rl_eval_every``, default 1: every step) and the last of ``rl_steps``. A step that is not due is taken
    and carried like any other; the curve simply has no point there (its evaluation costs more device time than
    the step's rollouts: skipping it nearly halves a step call)."""
    return every <= 1 or step % every == 0 or step >= rl_steps


def pending_rl_evals(carried_rl: dict[str, Any], seeds: list[int], n_tasks: int, rl_steps: int = 0,
                     every: int = 1) -> dict[int, int]:
    """Per seed, the RL step whose held-out evaluation is unfinished (its point has fewer than ``n_tasks`` records
    for the seed), for the seeds that took at least one step and whose last step is due an evaluation
    (:func:`rl_eval_due`; only the carried actor, the last step's, can be evaluated)."""
    out: dict[int, int] = {}
    for s in seeds:
        k = int(carried_rl.get("steps_done", {}).get(str(s), 0))
        if not k or not rl_eval_due(k, rl_steps or k, every):
            continue
        if len(carried_rl.get("points", {}).get(f"rl_{k}", {}).get(str(s), [])) < n_tasks:
            out[s] = k
    return out


def merge_rl_eval(carried_rl: dict[str, Any], resumed: dict[str, Any], pending: dict[int, int],
                  n_tasks: int) -> dict[str, Any]:
    """``records_rl.json`` after an ``rl_eval`` run: each seed's resumed records (``resumed`` from
    ``collect_records(..., "rl_eval")``, point ``rl_eval``) joined to its step's point ``rl_<k>``."""
    merged = carried_rl
    records = resumed.get("points", {}).get("rl_eval", {})
    for k in sorted(set(pending.values())):
        seeds = {str(s): records.get(str(s), []) for s, step in pending.items() if step == k}
        merged = merge_resumed(merged, {"points": {f"rl_{k}": seeds}}, f"rl_{k}", n_tasks)
    return merged


def merge_resumed(carried: dict[str, Any], resumed: dict[str, Any], point: str, n_tasks: int) -> dict[str, Any]:
    """A phase's records after a resumed evaluation: per seed, the carried records of the tasks reached before plus
    the resumed run's (on the tasks that were left); ``partial`` keeps the seeds still short of ``n_tasks``."""
    merged = json.loads(json.dumps(carried))
    points = merged.setdefault("points", {}).setdefault(point, {})
    for s, recs in resumed.get("points", {}).get(point, {}).items():
        have = {r["task_id"] for r in points.get(s, [])}
        points[s] = points.get(s, []) + [r for r in recs if r["task_id"] not in have]
    merged.setdefault("partial", {})[point] = {s: len(recs) for s, recs in points.items() if len(recs) < n_tasks}
    _drop_empty_partial(merged)
    merged.setdefault("resumed", []).append({"point": point, "episodes": {s: len(r) for s, r in
                                                                          resumed.get("points", {}).get(point, {}).items()}})
    return merged


def _drop_empty_partial(merged: dict[str, Any]) -> None:
    """Remove points no seed is short of from ``partial``, and ``partial`` itself when none is left."""
    partial = {pt: v for pt, v in merged.get("partial", {}).items() if v}
    if partial:
        merged["partial"] = partial
    else:
        merged.pop("partial", None)


def merge_seeds(carried: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    """A phase's records when its seeds ran in separate device runs (``--seeds``): the carried record file's seeds
    plus this run's, this run's winning for a seed both hold."""
    merged = json.loads(json.dumps(carried))
    for key in ("points", "partial"):
        for point, by_seed in new.get(key, {}).items():
            merged.setdefault(key, {}).setdefault(point, {}).update(by_seed)
    for key in ("outputs", "train_metrics"):
        if key in new:
            merged.setdefault(key, {}).update(new[key])
    for point, by_seed in new.get("points", {}).items():  # a seed that ended its evaluation is no longer partial
        for s in by_seed:
            if s not in new.get("partial", {}).get(point, {}):
                merged.get("partial", {}).get(point, {}).pop(s, None)
    _drop_empty_partial(merged)
    if "history" in new:  # continued SFT's earlier training records
        merged["history"] = new["history"]
    merged["phase"] = new.get("phase", carried.get("phase"))
    return merged


def _train_metrics(work: Path, seeds: list[int], folder: str = "rl_seed{s}") -> dict[str, list[dict[str, Any]]]:
    """Per seed, the RL rows (value pretraining, PPO) of ``work/<folder>/metrics.jsonl``, the figures the curve
    reads."""
    out: dict[str, list[dict[str, Any]]] = {}
    for s in seeds:
        path = work / folder.format(s=s) / "metrics.jsonl"
        rows = [r for r in _read_jsonl(path) if r.get("stage") in ("ppo_agentic", "value_pretrain")]
        keep = ("stage", "step", "reward_mean", "pass_rate", "explained_variance", "policy_loss", "value_loss",
                "rollout_wall_s", "rollout_env_share", "rollout_device_busy_s", "step_s", "heldout_reward_mean",
                "heldout_pass_rate", "gen_rows_per_batch", "gen_rows_per_step", "gen_latency_s_mean",
                # the update's size and recipe: a step's trust region, and 'groups' when the group baseline ran
                "approx_kl", "approx_kl_max", "collapsed_frac_max", "log_ratio_min", "update_minibatches", "kl_stopped",
                "groups", "rollout_episodes",
                # ppo.max_kl's whole-batch trust region: the kept policy's k3/k1/worst fall, and whether (and from
                # which k3) a step was taken back
                "trust_kl_k3", "trust_kl_k1", "trust_max_drop", "trust_rolled_back", "trust_minibatches_kept",
                "trust_rejected_kl_k3", "trust_rejected_max_drop",
                # whether the step's AdamW continued the previous run's (moments carried) or started afresh
                "actor_moments_carried", "actor_steps_carried")
        out[str(s)] = [{k: r[k] for k in keep if k in r} for r in rows]
    return out


def _side_by_side(before: dict[tuple[str, int], dict], after: dict[tuple[str, int], dict]) -> list[dict[str, Any]]:
    """Up to two (task, seed) pairs where RL raised the reward most: what each policy wrote."""
    pairs = sorted((after[k]["reward"] - before[k]["reward"], k) for k in set(before) & set(after))
    out = []
    for gain, key in reversed(pairs[-2:]):
        if gain <= 0:
            continue
        b, a = before[key], after[key]
        out.append({"task_id": key[0], "seed": key[1], "reward_before": b["reward"], "reward_after": a["reward"],
                    "features_before": {k: b.get(k) for k in ("fused", "vector", "launch")},
                    "features_after": {k: a.get(k) for k in ("fused", "vector", "launch")},
                    "turns_before": b.get("texts", []), "turns_after": a.get("texts", [])})
    return out


def build_report(work: Path, seeds: list[int], preset: dict[str, Any], data_summary: dict[str, Any],
                 timings: dict[str, float], record_dirs: list[Path]) -> dict[str, Any]:
    """Everything ``learning_curve.json`` holds (see docs/training.md for the fields), from the phases' record
    files found in ``record_dirs`` (later folders win: this run's ``--out`` after the carried ``--state``)."""
    phases: dict[str, dict[str, Any]] = {}
    for d in record_dirs:
        for name in ("sft", "control", "rl"):
            f = Path(d) / f"records_{name}.json"
            if f.exists():
                phases[name] = json.loads(f.read_text())
    points: dict[str, dict[int, list[dict[str, Any]]]] = {}
    for ph in phases.values():
        for point, by_seed in ph.get("points", {}).items():
            points[point] = {int(s): r for s, r in by_seed.items()}
    order = ["sft"] + [f"rl_{k}" for k in range(1, preset["rl_steps"] + 1)] + ["control"]
    summaries: dict[str, Any] = {}
    for name in order:
        by_seed = points.get(name, {})
        if not by_seed:
            continue
        pooled = [r for recs in by_seed.values() for r in recs]
        summaries[name] = {"pooled": point_summary(pooled),
                           "per_seed": {str(s): point_summary(r) for s, r in by_seed.items()}}
    last = next((f"rl_{k}" for k in range(preset["rl_steps"], 0, -1) if f"rl_{k}" in points), None)
    comparisons: dict[str, Any] = {}
    if last is not None:
        after = keyed(points[last])
        for base in ("sft", "control"):
            if points.get(base):
                comparisons[f"{last}_vs_{base}"] = {m: paired_bootstrap(after, keyed(points[base]), metric(m))
                                                    for m in METRICS}
    side = _side_by_side(keyed(points["sft"]), keyed(points[last])) if last and points.get("sft") else []
    retired = []  # RL steps taken with settings given up since (--restart-rl): shown, never part of the curve
    for run in phases.get("rl", {}).get("retired_runs", []):
        pts = {pt: {int(s): r for s, r in by_seed.items()} for pt, by_seed in run.get("points", {}).items()}
        retired.append({
            "reason": run.get("reason"), "restart_settings": run.get("restart_settings"),
            "points": {pt: point_summary([r for recs in by_seed.values() for r in recs]) for pt, by_seed in pts.items()},
            "vs_sft": {pt: {m: paired_bootstrap(keyed(by_seed), keyed(points["sft"]), metric(m)) for m in METRICS}
                       for pt, by_seed in pts.items()} if points.get("sft") else {},
            "train_metrics": run.get("train_metrics", {})})
    throughput = Path(record_dirs[-1]) / "rollout_episodes.json" if record_dirs else None
    return {
        "preset": preset, "seeds": seeds, "order": [o for o in order if o in summaries], "points": summaries,
        "comparisons": comparisons, "side_by_side": side, "retired_runs": retired,
        "sft": phases.get("sft", {}).get("outputs", {}), "control": phases.get("control", {}).get("outputs", {}),
        "train_metrics": phases.get("rl", {}).get("train_metrics", {}),
        "partial": {pt: n for ph in phases.values() for pt, n in ph.get("partial", {}).items()},
        "rollout_throughput": json.loads(throughput.read_text()) if throughput and throughput.exists() else None,
        "data": {"tasks": data_summary.get("tasks"), "styles": data_summary.get("styles"),
                 "bugs": data_summary.get("bugs"), "expert_train": data_summary.get("expert_train.pt"),
                 "vocab": data_summary.get("vocab")},
        "timings": timings,
    }


def write_png(result: dict[str, Any], path: Path) -> Path | None:
    """Four panels (pass rate, mean milestone reward, faster-than-eager, hack rate) over the points; control as a
    separate marker; error bars = spread over seeds."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    order = [o for o in result.get("order", []) if o != "control"]
    if not order:
        return None
    fig, axes = plt.subplots(1, 5, figsize=(22, 4))
    panels = [("pass_rate", "pass rate"), ("reward_mean", "mean milestone reward"),
              ("faster_than_eager", "faster than eager"), ("hack_rate", "integrity flags (hack) rate")]
    for ax, (key, title) in zip(axes, panels):
        ys = [result["points"][o]["pooled"].get(key, float("nan")) for o in order]
        per_seed = [[v.get(key, float("nan")) for v in result["points"][o]["per_seed"].values()] for o in order]
        lo = [y - min(s) for y, s in zip(ys, per_seed)]
        hi = [max(s) - y for y, s in zip(ys, per_seed)]
        ax.errorbar(range(len(order)), ys, yerr=[lo, hi], marker="o", capsize=3, label="SFT -> RL")
        if "control" in result["points"]:
            c = result["points"]["control"]["pooled"].get(key, float("nan"))
            ax.scatter([len(order) - 1], [c], marker="s", color="tab:red", zorder=3, label="control (more SFT)")
        ax.set_xticks(range(len(order)), order)
        ax.set_title(title)
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=8)
    ax = axes[4]
    shares = ["fused_share", "vector_share", "launch_share_narrow"]
    for key in shares:
        ax.plot(range(len(order)), [result["points"][o]["pooled"].get(key, 0.0) for o in order], marker="o", label=key)
    ax.set_xticks(range(len(order)), order)
    ax.set_title("habits of passing kernels (share)")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    first = result["points"][order[0]]["pooled"].get("episodes", 0)
    fig.suptitle(f"held-out tasks (trusted grading of each episode's final state): {int(first)} episodes per point, "
                 f"{len(result.get('seeds', []))} seeds")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def diagnostics(work: Path, seeds: list[int], sample_chars: int = 1200) -> dict[str, Any]:
    """Where a device run's time went, readable after the run folder is gone: per run folder (``sft_seed0``,
    ``rl_seed1``...) its training metrics (first, last and every 25th row) and, per episode folder group (a held-out
    evaluation or a step's rollouts), how many episodes ended or were still running and the mean seconds per
    episode by where they went (``heldout.time_summary``; ``usage_mean`` and ``device_phase_s_mean`` from the
    episodes' ``usage.json``), how their runners started (``runner_start_s``, ``runner_start_cpu_s``: n, median,
    max; ``runner_start_phases``: median wall and CPU seconds per phase), with one episode's turns as a sample."""
    from cuda_agent.schemas.trajectory import load_trajectory
    from cuda_agent.training.stages.heldout import episode_record, time_summary

    out: dict[str, Any] = {}
    for run in sorted(p for p in work.glob("*_seed*") if p.is_dir() and any(p.name.endswith(f"_seed{s}") for s in seeds)):
        rows = _read_jsonl(run / "metrics.jsonl")
        entry: dict[str, Any] = {"metrics": [r for i, r in enumerate(rows) if i == 0 or i == len(rows) - 1 or i % 25 == 0],
                                 "metrics_rows": len(rows), "episodes": {}}
        groups: dict[Path, list[Path]] = {}
        for traj in run.rglob("trajectory.jsonl"):
            if "graded" in traj.parent.name:
                continue
            groups.setdefault(traj.parent.parent, []).append(traj.parent)
        for group, dirs in sorted(groups.items()):
            recs = [episode_record(d) for d in sorted(dirs)]
            ended = [r for r in recs if r["exit"] is not None]
            info: dict[str, Any] = {"ended": len(ended), "running": len(recs) - len(ended),
                                    "passed": sum(1 for r in ended if r["passed"]), "times": time_summary(recs),
                                    "statuses": {}}
            for r in ended:
                info["statuses"][r["status"]] = info["statuses"].get(r["status"], 0) + 1
            usages = [json.loads((d / "usage.json").read_text()) for d in dirs if (d / "usage.json").exists()]
            if usages:  # per ended episode: build seconds, device seconds held and waited for
                info["usage_mean"] = {k: round(sum(u.get(k, 0.0) for u in usages) / len(usages), 2)
                                      for k in ("build_s", "build_wait_s", "warm_wait_s", "device_busy_s",
                                                "device_wait_s", "wall_s")}
                phases: dict[str, float] = {}
                for u in usages:  # the device steps' evaluator sub-phases, mean seconds per ended episode
                    for name, seconds in (u.get("device_phase_s") or {}).items():
                        phases[name] = phases.get(name, 0.0) + seconds / len(usages)
                info["device_phase_s_mean"] = {k: round(v, 2) for k, v in sorted(phases.items(), key=lambda kv: -kv[1])}
                starts = sorted(x for u in usages for x in u.get("runner_start_s") or [])
                if starts:  # how long a runner took to start on the loaded host (spares refill that fast)
                    info["runner_start_s"] = {"n": len(starts), "median": starts[len(starts) // 2], "max": starts[-1]}
                cpus = sorted(x for u in usages for x in u.get("runner_start_cpu_s") or [])
                if cpus:  # a runner's CPU seconds when ready: what each start took from the host's cores
                    info["runner_start_cpu_s"] = {"n": len(cpus), "median": cpus[len(cpus) // 2], "max": cpus[-1]}
                by_phase: dict[str, list[dict[str, float]]] = {}
                for start in (one for u in usages for one in u.get("runner_start_phases") or []):
                    for name, cost in start.items():  # in the runner's order: interpreter, setup, imports...
                        by_phase.setdefault(name, []).append(cost)
                if by_phase:  # where those starts went, phase by phase (median over the runners)
                    info["runner_start_phases"] = {
                        name: {"wall_median": sorted(c["wall_s"] for c in costs)[len(costs) // 2],
                               "cpu_median": sorted(c["cpu_s"] for c in costs)[len(costs) // 2]}
                        for name, costs in by_phase.items()}
            sample = load_trajectory(sorted(dirs)[0] / "trajectory.jsonl")
            info["sample"] = [{"turn": t.turn, "text": t.text[:sample_chars],
                               "observations": [o.content[:400] for o in t.observations], "timings": t.timings}
                              for t in sample.turns[:8]]
            entry["episodes"][str(group.relative_to(run))] = info
        if rows or groups:
            out[run.name] = entry
    return out
