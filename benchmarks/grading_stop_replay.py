"""Replay the grading pass's precision stop on recorded self-check rows (issue 21): what would it save, what would
it change?

The suite self-check (``cuda-agent tasks check``) keeps every per-call time of the grading pass (``samples_ms`` of
each row). This script cuts them back into the pass's rounds and replays :func:`cuda_agent.harness.grade_stop.stop_check`
(the rule the grading pass runs) under a timing preset's stop (default ``standard_fast`` on CUDA): after each round it
asks whether the pass would have stopped, and compares the speedups at that point with those of the full pass.

Rounds: a row written since interfaces 3.7 says how many calls each round timed (``grade_rounds.calls``; one the
stop already ended is replayed against its own rounds, not a full pass); an older
row is split by the protocol that recorded it (``--recorded-calls`` per variant and round, default 33, the
``standard`` preset on CUDA; the candidate's fresh-set calls, beyond those, went to the first rounds as the grading
pass deals them). Rows whose samples do not split (a fresh-set confirmation round replaced the candidate's samples;
a slow candidate's rounds cut to its time budget) are skipped and counted. ``--calls-per-round`` below the recorded
round size splits each recorded round into consecutive parts (a recorded round of 33 into three of 11: a protocol
with shorter rounds; its samples keep their order, the interleaving is that of the recorded rounds).

Printed and written (``--out``): the share of timed calls and of timed seconds saved against the full recorded pass
(warm-up calls counted at their round's median: the first round's 3 for each variant, 2 more for compile, one per
later round and per candidate round); the device hold saved, estimated as timed ms plus a per-call cost of the
protocol (the median over the rows that recorded ``device_lock.exclusive_s``: spin, flush, hand-over, round trip;
a batch's fixed cost, a lock take and a message, is not counted, so shorter rounds read a little better than they
are); the error of each early speedup against the full pass's (median, p95, max); every change of a
verdict: a milestone (> 1.05 vs eager, vs compile), the +-5% band vs eager, and faster than 1.0 (reported; a line the
preset does not protect unless it is in its thresholds).

    python benchmarks/grading_stop_replay.py --out results/stop_replay.json
    python benchmarks/grading_stop_replay.py --thresholds 0.95,1.0,1.05 --out results/stop_replay_with_1.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any

from cuda_agent.harness.grade_stop import stop_check
from cuda_agent.harness.suite_check import BAND
from cuda_agent.harness.timing_protocol import resolve_protocol

DEFAULT_ROWS = [Path("gpu-state/kb_check/rows.jsonl")]
KINDS = ("eager", "compile")
MILESTONE = 1.05


def _chunks(xs: list[float], sizes: list[int]) -> list[list[float]]:
    out, i = [], 0
    for n in sizes:
        out.append(xs[i:i + n])
        i += n
    return out


def split_rounds(row: dict[str, Any], recorded_calls: int) -> tuple[dict[str, list[list[float]]] | None, str]:
    """Per variant, the row's per-call times by recorded round; (None, why) when they do not split."""
    samples = row.get("samples_ms") or {}
    if not samples.get("candidate") or not samples.get("eager"):
        return None, "no timed samples (not correct)"
    recorded = (row.get("grade_rounds") or {}).get("calls")
    if recorded:  # rows since interfaces 3.7 say how their rounds split
        if any(sum(recorded.get(k, [])) != len(v) for k, v in samples.items() if v):
            return None, "samples do not add up to the recorded rounds (fresh-set rule replaced them)"
        return {k: _chunks(v, recorded[k]) for k, v in samples.items() if v}, ""
    n_base = len(samples["eager"])
    if n_base % recorded_calls or any(len(samples[k]) != n_base for k in KINDS if samples.get(k)):
        return None, f"baseline calls {n_base} are not whole rounds of {recorded_calls}"
    rounds = n_base // recorded_calls
    fresh = len(samples["candidate"]) - n_base
    if rounds != 3 or fresh < 0:
        why = ("a fresh-set confirmation round ran (its samples replaced the candidate's)" if rounds > 3
               else "a candidate round cut to its time budget" if fresh < 0 else f"{rounds} rounds")
        return None, why
    cand_sizes = [recorded_calls + fresh // rounds + (r < fresh % rounds) for r in range(rounds)]
    out = {"candidate": _chunks(samples["candidate"], cand_sizes)}
    for k in KINDS:
        if samples.get(k):
            out[k] = _chunks(samples[k], [recorded_calls] * rounds)
    return out, ""


def subdivide(rounds: dict[str, list[list[float]]], parts: int) -> dict[str, list[list[float]]]:
    """Each recorded round cut into ``parts`` consecutive rounds (as even as possible)."""
    out: dict[str, list[list[float]]] = {}
    for k, rs in rounds.items():
        out[k] = []
        for r in rs:
            n = len(r)
            sizes = [n // parts + (i < n % parts) for i in range(parts)]
            out[k] += _chunks(r, sizes)
    return out


def _cost(rounds: dict[str, list[list[float]]], upto: int, warmup_calls: int) -> tuple[int, float]:
    """(timed calls, timed ms) of the first ``upto`` rounds, warm-up calls counted at their round's median."""
    calls, ms = 0, 0.0
    for k, rs in rounds.items():
        for i, r in enumerate(rs[:upto]):
            warm = 1 if k == "candidate" else (warmup_calls if i == 0 else 1) + (2 if k == "compile" and i == 0 else 0)
            calls += len(r) + warm
            ms += sum(r) + warm * statistics.median(r)
    return calls, ms


def _speedup(rounds: dict[str, list[list[float]]], kind: str, upto: int) -> float | None:
    if not rounds.get(kind):
        return None
    base = [x for r in rounds[kind][:upto] for x in r]
    cand = [x for r in rounds["candidate"][:upto] for x in r]
    return statistics.median(base) / statistics.median(cand)


def _verdicts(s: dict[str, float | None]) -> dict[str, bool]:
    out: dict[str, bool] = {}
    for k, v in s.items():
        if v is not None:
            out[f"milestone_{k}"] = v > MILESTONE
            out[f"faster_{k}"] = v > 1.0
    if s.get("eager") is not None:
        out["band_eager"] = abs(s["eager"] - 1.0) <= BAND  # type: ignore[operator]
    return out


def replay_row(rounds: dict[str, list[list[float]]], *, max_rounds: int, min_rounds: int, target: float,
               thresholds: list[float], warmup_calls: int) -> dict[str, Any]:
    """The stop replayed on one row's rounds: rounds run, why, speedups early and full, calls and ms both ways."""
    total = len(rounds["candidate"])
    limit = min(max_rounds, total)
    check = None
    ran = limit
    for k in range(1, limit + 1):
        check = stop_check([r for r in rounds["candidate"][:k]], {b: rounds[b][:k] for b in KINDS if b in rounds},
                           min_rounds=min_rounds, target_rel_ci=target, thresholds=thresholds)
        if check.stop:
            ran = k
            break
    full = {b: _speedup(rounds, b, total) for b in KINDS}
    early = {b: _speedup(rounds, b, ran) for b in KINDS}
    first = {b: _speedup(rounds, b, 1) for b in KINDS}
    calls_full, ms_full = _cost(rounds, total, warmup_calls)
    calls_early, ms_early = _cost(rounds, ran, warmup_calls)
    return {"rounds": total, "ran": ran, "stopped": bool(check and check.stop), "why": check.why if check else "",
            "full": full, "early": early, "first_round": first, "calls_full": calls_full, "calls_early": calls_early,
            "ms_full": ms_full, "ms_early": ms_early}


def _pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q * (len(xs) - 1))))]


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=Path, action="append", help="rows.jsonl of a self-check (repeatable); default: "
                    "gpu-state/kb_check/rows.jsonl")
    ap.add_argument("--preset", default="standard_fast", help="Timing preset whose stop is replayed (CUDA).")
    ap.add_argument("--recorded-calls", type=int, default=33, help="Calls per variant and round of rows that do not "
                    "record their rounds (the standard preset on CUDA: 33).")
    ap.add_argument("--calls-per-round", type=int, help="Replay rounds of this many calls (a divisor of the "
                    "recorded round); default: the preset's.")
    ap.add_argument("--max-rounds", type=int, help="Most rounds (default: the preset's grade_rounds; give it with "
                    "--calls-per-round).")
    ap.add_argument("--min-rounds", type=int, help="grade_min_rounds (default: the preset's).")
    ap.add_argument("--target", type=float, help="grade_target_rel_ci (default: the preset's).")
    ap.add_argument("--thresholds", help="grade_stop_thresholds, comma-separated (default: the preset's).")
    ap.add_argument("--out", type=Path, help="Write the JSON here.")
    args = ap.parse_args(argv)

    p = resolve_protocol(args.preset, "cuda")
    per_round = args.calls_per_round or p.grade_calls()
    if args.recorded_calls % per_round:
        ap.error(f"--calls-per-round {per_round} does not divide the recorded round of {args.recorded_calls}")
    config = {"preset": args.preset, "calls_per_round": per_round,
              "max_rounds": args.max_rounds or p.grade_rounds,
              "min_rounds": args.min_rounds or p.grade_min_rounds,
              "target": args.target if args.target is not None else p.grade_target_rel_ci,
              "thresholds": ([float(t) for t in args.thresholds.split(",")] if args.thresholds
                             else list(p.grade_stop_thresholds)),
              "warmup_calls": p.warmup_calls}
    if config["target"] is None:
        ap.error(f"preset {args.preset!r} has the stop off: give --target")

    rows: dict[tuple[str, str], dict[str, Any]] = {}
    for path in args.rows or DEFAULT_ROWS:
        for line in path.read_text().splitlines():
            if line.strip():
                r = json.loads(line)
                rows[(str(path), r["task_id"])] = r  # a task checked again: its last row
    skipped: dict[str, int] = {}
    results: list[dict[str, Any]] = []
    for (path, task), row in rows.items():
        rounds, why = split_rounds(row, args.recorded_calls)
        if rounds is None:
            skipped[why] = skipped.get(why, 0) + 1
            continue
        # The full pass is the recorded one (its rounds, its warm-ups), whatever rounds are replayed.
        calls_full, ms_full = _cost(rounds, len(rounds["candidate"]), config["warmup_calls"])
        size = len(rounds["eager"][0])  # a recorded round of this row (33 for the standard preset on CUDA)
        parts = size // per_round if size % per_round == 0 else 1
        if parts > 1:
            rounds = subdivide(rounds, parts)
        res = replay_row(rounds, max_rounds=config["max_rounds"], min_rounds=config["min_rounds"],
                         target=config["target"], thresholds=config["thresholds"],
                         warmup_calls=config["warmup_calls"])
        res.update(calls_full=calls_full, ms_full=ms_full)
        hold = (row.get("device_lock") or {}).get("exclusive_s")
        res.update(task_id=task, rows=path, hold_s=hold)
        results.append(res)

    errors = [abs(r["early"][k] / r["full"][k] - 1) for r in results for k in KINDS if r["full"][k]]
    changes = []
    for r in results:
        before, after = _verdicts(r["full"]), _verdicts(r["early"])
        changes += [{"task_id": r["task_id"], "verdict": v, "full": before[v], "early": after[v],
                     "speedups_full": r["full"], "speedups_early": r["early"]} for v in before if before[v] != after[v]]
    held = [r for r in results if r["hold_s"] and r["hold_s"] * 1e3 > r["ms_full"]]
    # The device hold of a row: its timed ms plus a per-call cost of the protocol (spin, flush, hand-over, round
    # trip), that cost the median over the rows that recorded their hold.
    per_call_s = statistics.median((r["hold_s"] - r["ms_full"] / 1e3) / r["calls_full"] for r in held) if held else 0.0
    for r in results:
        a = (r["hold_s"] - r["ms_full"] / 1e3) / r["calls_full"] if r in held else per_call_s
        r["hold_full_est_s"] = a * r["calls_full"] + r["ms_full"] / 1e3
        r["hold_early_est_s"] = a * r["calls_early"] + r["ms_early"] / 1e3
    calls_full = sum(r["calls_full"] for r in results)
    ms_full = sum(r["ms_full"] for r in results)
    summary = {
        "rows_replayed": len(results),
        "rows_skipped": skipped,
        "stopped_early": sum(r["ran"] < r["rounds"] for r in results),
        "rounds_run": {str(n): sum(r["ran"] == n for r in results) for n in sorted({r["ran"] for r in results})},
        "calls_saved_share": round(1 - sum(r["calls_early"] for r in results) / calls_full, 4) if calls_full else None,
        "timed_s_full": round(ms_full / 1e3, 2),
        "timed_s_saved": round((ms_full - sum(r["ms_early"] for r in results)) / 1e3, 2),
        "hold_rows": len(held),
        "hold_per_call_s": round(per_call_s, 6),
        "hold_s_full_est": round(sum(r["hold_full_est_s"] for r in results), 1),
        "hold_s_saved_est": round(sum(r["hold_full_est_s"] - r["hold_early_est_s"] for r in results), 1),
        "error_median": round(statistics.median(errors), 5) if errors else None,
        "error_p95": round(_pct(errors, 0.95), 5) if errors else None,
        "error_max": round(max(errors), 5) if errors else None,
        "verdict_changes": {v: sum(c["verdict"].startswith(v) for c in changes) for v in ("milestone", "band", "faster")},
        # The first round alone against the full pass: why grade_min_rounds is at least 2.
        "first_round_off_by_5pct": sorted(
            (r["task_id"], round(r["first_round"]["eager"], 3), round(r["full"]["eager"], 3)) for r in results
            if r["full"]["eager"] and abs(r["first_round"]["eager"] / r["full"]["eager"] - 1) > BAND),
    }
    out = {"config": config, "summary": summary, "verdict_changes": changes, "rows": results}
    print(f"stop replay ({args.preset}: {per_round} calls/round, rounds {config['min_rounds']}-{config['max_rounds']}, "
          f"target +-{config['target']:.2%}, lines {config['thresholds']}) on {len(results)} rows "
          f"(skipped {sum(skipped.values())}: {skipped})")
    print(f"  stopped early: {summary['stopped_early']}; rounds run: {summary['rounds_run']}")
    print(f"  timed calls saved: {summary['calls_saved_share']:.1%}; timed seconds saved: {summary['timed_s_saved']} "
          f"of {summary['timed_s_full']}")
    basis = (f"timed ms + {per_call_s * 1e3:.2f} ms a call, the median of {len(held)} rows recording it" if held
             else "timed ms only: no row recorded its hold")
    print(f"  device hold ({basis}): {summary['hold_s_saved_est']} of {summary['hold_s_full_est']} s saved "
          f"({summary['hold_s_saved_est'] / max(summary['hold_s_full_est'], 1e-9):.1%})")
    print(f"  speedup error vs the full pass: median {summary['error_median']:.3%}, p95 {summary['error_p95']:.3%}, "
          f"max {summary['error_max']:.3%}")
    print(f"  verdict changes: {summary['verdict_changes']}" + "".join(
        f"\n    {c['task_id']}: {c['verdict']} {c['full']} -> {c['early']} ({c['speedups_full']} -> "
        f"{c['speedups_early']})" for c in changes))
    print(f"  first round alone off the full pass by > {BAND:.0%}: {len(summary['first_round_off_by_5pct'])} rows "
          + ", ".join(f"{t} {a}->{b}" for t, a, b in summary["first_round_off_by_5pct"][:8]))
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(out, indent=1))
        print(f"wrote {args.out}", file=sys.stderr)
    return out


if __name__ == "__main__":
    main()
