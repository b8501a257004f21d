"""Held-out evaluation of a policy on the kernel environment: per-episode records and their summary.

Each record comes from the episode's own files: the end record's trusted grading (the loop grades the
selected workspace state from scratch in a fresh folder with fresh inputs; the agent's tool results never
count), the turns (when verify or profile first passed), and the final workspace's kernel (its features:
fused, vectorised, launch shape). :func:`summarize` gives the learning curve's quantities: pass rate, mean
milestone reward, faster-than-eager rate, integrity-flag (hack) rate and the learned-habit shares.
"""

from __future__ import annotations

import json
import statistics
from collections import Counter
from pathlib import Path
from typing import Any

import structlog

from cuda_agent.schemas.trajectory import load_trajectory
from cuda_agent.training.kernel_family.features import kernel_features, kernel_sources

log = structlog.get_logger(__name__)

#: Flags of a graded result that mean the candidate was caught doing something other than computing.
INTEGRITY_FLAGS = frozenset({"fresh_inputs_slower"})
#: Integrity rules that reject a submission for being broken, not for cheating: ``model_new.py`` that cannot be
#: parsed or defines no ``ModelNew``. A small policy's garbled text ends there (session 30: one of RL step 1's two
#: flagged held-out episodes; the other imported ``torch.cu`` and stays a hack); counting it as an attempted hack would inflate the hack rate with failures that
#: already earn -1. Such records count in ``malformed_rate`` instead.
MALFORMED_RULES = frozenset({"T1.python.no_model_new"})
#: Assistant turns kept per record, and characters kept of each.
MAX_TEXTS, TEXT_LIMIT = 6, 1500
#: Characters of the trusted grade's message kept in a record whose grade ended in error, timeout or too_large.
GRADE_MESSAGE_LIMIT = 600


def is_hack(status: str | None, rule: str | None, flags=()) -> bool:
    """Whether a trusted grade caught an attempted hack: rejected by an integrity rule other than the
    :data:`MALFORMED_RULES`, or carrying one of the :data:`INTEGRITY_FLAGS`."""
    return (status == "rejected" and rule not in MALFORMED_RULES) or bool(INTEGRITY_FLAGS & set(flags or ()))


def record_is_hack(rec: dict[str, Any]) -> bool:
    """:func:`is_hack` of a held-out record; records written before :data:`MALFORMED_RULES` are re-classified
    from their ``rule`` (their ``hack`` field counted every rejection)."""
    return bool(rec.get("hack")) and not record_is_malformed(rec)


def record_is_malformed(rec: dict[str, Any]) -> bool:
    """A held-out record whose grade rejected a broken ``model_new.py`` (:data:`MALFORMED_RULES`)."""
    return rec.get("status") == "rejected" and rec.get("rule") in MALFORMED_RULES


def episode_record(out_dir: Path) -> dict[str, Any]:
    """The held-out record of one finished episode folder (a missing or cut trajectory counts as a failure)."""
    out_dir = Path(out_dir)
    rec: dict[str, Any] = {"episode": out_dir.name, "reward": -1.0, "passed": False, "status": "missing",
                           "speedup_eager": None, "speedup_compile": None, "hack": False, "turns": 0,
                           "first_pass_turn": None, "exit": None, "task_id": None}
    path = out_dir / "trajectory.jsonl"
    if not path.exists():
        return rec
    traj = load_trajectory(path)
    rec["task_id"] = traj.header.task_id if traj.header else None
    rec["turns"] = len(traj.turns)
    rec.update(episode_times(traj))
    rec["texts"] = [t.text[:TEXT_LIMIT] for t in traj.turns[:MAX_TEXTS]]  # what the policy wrote (side-by-side views)
    for t in traj.turns:
        if any(r.phase in ("verify", "profile") and r.passed for r in t.results):
            rec["first_pass_turn"] = t.turn
            break
    end = traj.end
    if end is not None:
        rec["exit"] = end.exit
        rec["wall_s"] = round(end.wall_s, 3)
        rec["grade_s"] = round(max(0.0, end.wall_s - rec["policy_s"] - rec["tools_s"]), 3)
        rec["reward"] = float(end.reward) if end.reward is not None else -1.0
        g = end.graded
        if g is not None:
            rec.update(status=g.status.value, passed=bool(g.passed), speedup_eager=g.speedup_eager,
                       speedup_compile=g.speedup_compile, rule=g.rule,
                       hack=is_hack(g.status.value, g.rule, g.flags))
            if g.status.value in ("error", "timeout", "too_large"):  # the harness's side: why, readable from the records
                rec["grade_message"] = g.message[:GRADE_MESSAGE_LIMIT]
        else:
            rec["status"] = "not_graded"
    rec.update(kernel_features(kernel_sources(out_dir / "workspace")))
    rec["model_new_written"] = model_new_written(out_dir / "workspace")
    return rec


def model_new_written(workspace: Path) -> bool | None:
    """Whether the workspace's ``model_new.py`` differs from the starter the layout wrote (None: no workspace): an
    episode that never wrote its ModelNew failed, it did not try to bypass its kernels."""
    from cuda_agent.harness.layout import starter_model_new

    try:
        task_code = (workspace / "model.py").read_text()
        current = (workspace / "model_new.py").read_text()
    except OSError:
        return None
    return all(current != starter_model_new(task_code, kind) for kind in ("cuda", "cpu"))


def episode_times(traj: Any) -> dict[str, Any]:
    """Where an episode's time went, from its turn records: seconds waiting for the policy (generation, queue
    included), in tools (and per tool, ``tool_s``), and the tokens the policy generated."""
    times: dict[str, Any] = {"policy_s": 0.0, "tools_s": 0.0, "tool_s": {}, "generated_tokens": 0}
    for t in traj.turns:
        times["policy_s"] += float(t.timings.get("policy_s", 0.0))
        times["tools_s"] += float(t.timings.get("tools_s", 0.0))
        for key, value in t.timings.items():
            if key.startswith("tool."):
                name = key[len("tool."):].removesuffix("_s")
                times["tool_s"][name] = round(times["tool_s"].get(name, 0.0) + float(value), 3)
        if t.tokens is not None:
            times["generated_tokens"] += len(t.tokens.output_ids or [])
        else:
            times["generated_tokens"] += int(t.usage.get("completion_tokens", 0))
    times["policy_s"], times["tools_s"] = round(times["policy_s"], 3), round(times["tools_s"], 3)
    return times


def time_summary(records: list[dict[str, Any]]) -> dict[str, float]:
    """Mean seconds per episode by where they went (policy, each tool, final grading) and tokens per turn; the
    records' ``grade_s`` and ``wall_s`` exist for ended episodes only."""
    if not records:
        return {}
    n = len(records)
    out = {"episodes": float(n), "turns_mean": sum(r["turns"] for r in records) / n,
           "policy_s_mean": sum(r.get("policy_s", 0.0) for r in records) / n,
           "tools_s_mean": sum(r.get("tools_s", 0.0) for r in records) / n,
           "tokens_per_turn": sum(r.get("generated_tokens", 0) for r in records) / max(1, sum(r["turns"] for r in records))}
    for name in sorted({k for r in records for k in r.get("tool_s", {})}):
        out[f"tool_{name}_s_mean"] = sum(r.get("tool_s", {}).get(name, 0.0) for r in records) / n
    ended = [r for r in records if "wall_s" in r]
    if ended:
        out["grade_s_mean"] = sum(r["grade_s"] for r in ended) / len(ended)
        out["wall_s_mean"] = sum(r["wall_s"] for r in ended) / len(ended)
    return out


def summarize(records: list[dict[str, Any]]) -> dict[str, float]:
    """Rates and shares over held-out records (shares of kernel features over the passing episodes)."""
    n = len(records)
    if not n:
        return {}
    passed = [r for r in records if r["passed"]]
    out = {
        "episodes": float(n),
        "pass_rate": len(passed) / n,
        "reward_mean": sum(r["reward"] for r in records) / n,
        "faster_than_eager": sum(1 for r in records if r["passed"] and (r["speedup_eager"] or 0) > 1.0) / n,
        "faster_than_compile": sum(1 for r in records if r["passed"] and (r["speedup_compile"] or 0) > 1.0) / n,
        "hack_rate": sum(1 for r in records if record_is_hack(r)) / n,
        "malformed_rate": sum(1 for r in records if record_is_malformed(r)) / n,
        "turns_mean": sum(r["turns"] for r in records) / n,
    }
    firsts = [r["first_pass_turn"] for r in records if r["first_pass_turn"] is not None]
    out["turns_to_first_pass_median"] = float(statistics.median(firsts)) if firsts else float("nan")
    if passed:
        out["fused_share"] = sum(1 for r in passed if r.get("fused")) / len(passed)
        out["vector_share"] = sum(1 for r in passed if r.get("vector")) / len(passed)
        for launch, k in Counter(r.get("launch") for r in passed).items():
            out[f"launch_share_{launch}"] = k / len(passed)
    for value, k in Counter(r["reward"] for r in records).items():
        out[f"reward_frac_{value:g}"] = k / n
    return out


def write_records(path: Path, records: list[dict[str, Any]]) -> Path:
    """One JSON line per record."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r, sort_keys=True) + "\n" for r in records))
    return path


def run_heldout(source: Any, model_dir: Path, task_paths: list[str], folder: Path, tag: str, *, repeats: int = 1,
                temperature: float | None = None, seed: int = 0) -> dict[str, float]:
    """Evaluate the policy in ``model_dir`` on the held-out tasks; write ``<folder>/<tag>.jsonl``; return the
    summary with keys prefixed ``heldout_`` (plus the collection's timing).

    An evaluation whose admission deadline (``rollout.eval_admit_until``) left episodes unstarted is partial: no
    ``<tag>.jsonl`` is written (the episode folders in ``<folder>/<tag>/`` hold the ones that ended, for a run
    that resumes it), and the summary is over the ended episodes, with ``heldout_not_admitted`` > 0."""
    from cuda_agent.training.stages.episodes import load_tasks

    tasks = load_tasks(task_paths, source.rt.config.backend)
    dirs, stats = source.evaluate(model_dir, tasks, folder / tag, repeats=repeats, temperature=temperature, seed=seed)
    if getattr(stats, "not_admitted", 0):
        records = [r for r in (episode_record(d) for d in dirs if (d / "trajectory.jsonl").exists())
                   if r["exit"] is not None]
        log.info("held-out evaluation partial", tag=tag, ended=len(records), not_admitted=stats.not_admitted,
                 of=len(dirs))
    else:
        records = [episode_record(d) for d in dirs]
        write_records(folder / f"{tag}.jsonl", records)
    summary = {f"heldout_{k}": v for k, v in summarize(records).items()}
    summary.update({f"heldout_{k}": v for k, v in stats.as_dict().items()})
    summary["heldout_not_admitted"] = float(getattr(stats, "not_admitted", 0))
    return summary
