"""The trusted final grading pass: the only source of rewards.

Fresh seeds drawn here (never the ones the agent's verify/profile used), a fresh sandboxed process, the default
integrity block (or a stricter one the config asked for), re-verification on N input sets, then timing of the
candidate ALTERNATING with the baselines (candidate, eager, compile, candidate, ...) so slow drift of the machine
hits all of them alike; the speedup is t_baseline / t_candidate on medians of all rounds. Baselines are measured
here, not read from the cache (the fastest of many noisy cached measurements would bias the ratio). With the
precision stop on (``standard_fast``), the rounds end once the speedups are decided (:mod:`~cuda_agent.harness.grade_stop`). A strategy over
a session, like ``verify`` and ``profile`` (:mod:`cuda_agent.harness.phases`), using only public methods.
"""

from __future__ import annotations

import secrets
import time
from pathlib import Path
from typing import TYPE_CHECKING

from cuda_agent.harness.fresh_sets import fresh_count
from cuda_agent.harness.grade_stop import stop_check, stop_reason
from cuda_agent.harness.phases import apply_speedups
from cuda_agent.harness.timed_run import settle_fresh_sets, time_candidate
from cuda_agent.harness.timing_stats import summarize
from cuda_agent.harness.unaccounted_wall import RoundWall
from cuda_agent.harness.unaccounted_wall import check as check_unaccounted_wall
from cuda_agent.harness.widened_run import make_recalls, recall_order, round_recalls, verify_widened
from cuda_agent.schemas.result import Baselines, CandidateResult
from cuda_agent.schemas.task import TaskManifest

if TYPE_CHECKING:
    from cuda_agent.harness.evaluator import Evaluator
    from cuda_agent.harness.session import Session


def fresh_seeds(n: int, avoid: set[int] = frozenset()) -> list[int]:  # type: ignore[assignment]
    """``n`` distinct secret seeds, none in ``avoid``."""
    out: list[int] = []
    while len(out) < n:
        s = secrets.randbits(31)
        if s not in avoid and s not in out:
            out.append(s)
    return out


def grade(evaluator: Evaluator, task: TaskManifest, root: Path, so_path: Path | None, *,
          keep_samples: bool = False, torch_compute_allowed: bool = False) -> CandidateResult:
    """Re-verify with fresh seeds in a fresh process (and on widened inputs), then ABAB timing against the
    baselines. ``keep_samples``: keep every per-call time (``Timing.raw_ms``); ``torch_compute_allowed``: only
    :func:`self_check` sets it."""
    timing_settings = evaluator.settings.timing
    compile_mode = timing_settings.compile_mode

    def body(sess: Session, result: CandidateResult) -> None:
        protocol = sess.ctx.protocol
        sess.verify_sets(sess.sets.indices("verify"))
        if sess.failed:
            return
        widened = sess.ctx.integrity.widened_sets
        recall_kinds = recall_order(verify_widened(sess, task, widened) if widened else [])
        if sess.failed:
            return
        ks = sess.timing_sets()
        per_round, rounds = protocol.grade_calls(), protocol.grade_rounds
        # Per variant, each round's per-call times (a fresh-set confirmation round included).
        timed: dict[str, list[list[float]]] = {"candidate": [], "eager": [], "compile": []}
        wall = 0.0
        walls: list[RoundWall] = []  # each round's walls, for the unaccounted-wall rule (harness/unaccounted_wall.py)
        sess.reference.baseline_host_stats(take=True)  # this grade's baseline work only, from here
        if timing_settings.compile_baseline:  # compile (CPU work) before the timing lock is taken
            t = time.perf_counter()
            sess.sets.ensure_in_reference(ks[0])
            sess.reference.prepare_baseline("compile", ks[0], compile_mode)
            sess.tick("prepare_baseline", t)
        cap = protocol.grade_spot_checks
        # The fresh-set calls and the spot-check cap over the rounds sure to run (all of them with the stop off):
        # a pass the precision stop ends early has made every fresh call and check a full one makes.
        spread = protocol.grade_spread_rounds()
        fresh_total = fresh_count(sess.ctx.integrity.fresh_set_calls, sess.sets.input_bytes())  # over all rounds

        def run_round(r: int, fresh: int) -> list[float]:
            """Round ``r``: the candidate's calls (``fresh`` of them on fresh sets), then each baseline's."""
            nonlocal wall
            # The cap spread over the rounds sure to run (the first ones take the remainder); a round past them
            # (the stop on) is checked at the cap's rate over the most rounds, never unchecked.
            if cap is None:
                checks = None
            else:
                checks = cap // spread + (r < cap % spread) if r < spread else max(1, cap // rounds)
            # New widened sets at secret positions among the timed calls (checked, time dropped): each conclusive kind
            # once per 33 calls, or for a big working set one a round, made at its position.
            kinds, lazy = round_recalls(recall_kinds, r, sess.sets.input_bytes(), per_round, spread)
            recalls = make_recalls(sess, task, kinds, lazy=lazy)
            if sess.failed:
                return []
            samples, wall_ms = time_candidate(sess, ks, calls=per_round, max_checks=checks, fresh_calls=fresh,
                                              budget_s=protocol.grade_round_budget_s, widened=recalls)
            if sess.failed:
                return samples
            wall += wall_ms
            rw = RoundWall(calls=list(sess.batch_walls))
            walls.append(rw)
            warm = protocol.warmup_calls if r == 0 else 1
            t = time.perf_counter()
            bks = sess.sets.held_for_baselines(ks)  # the sets the reference holds now (memory-aware sessions)

            def baseline(which: str, warmup: int) -> None:
                t0 = time.perf_counter()
                got = sess.reference.time_baseline(which, bks, per_round, warmup, compile_mode)
                rw.baselines.append(((time.perf_counter() - t0) * 1e3, got, warmup))
                timed[which].append(got)

            with sess.ctx.lock:
                baseline("eager", warm)
                if timing_settings.compile_baseline:
                    baseline("compile", warm + (2 if r == 0 else 0))
            sess.tick("baselines", t)
            timed["candidate"].append(samples)
            return samples

        check = None
        for r in range(rounds):
            run_round(r, fresh_total // spread + (r < fresh_total % spread) if r < spread else 0)
            if sess.failed:
                return
            if protocol.grade_stop():
                check = stop_check(timed["candidate"], {k: timed[k] for k in ("eager", "compile")},
                                   min_rounds=protocol.grade_min_rounds, target_rel_ci=protocol.grade_target_rel_ci or 0.0,
                                   thresholds=protocol.grade_stop_thresholds)
                if check.stop:
                    break
        ran = len(timed["candidate"])
        # A gap on the fresh sets is looked at again in one more round with all of them; when that round shows
        # none, its samples are the candidate's (against the baselines of every round, this one's included).
        cand = settle_fresh_sets(sess, [x for s in timed["candidate"] for x in s],
                                 lambda: run_round(ran, fresh_total))
        if sess.failed:
            return
        # The parent's wall against what the reported times leave of it, against the baselines' timer path (T8)
        check_unaccounted_wall(sess, walls)
        if sess.failed:
            return
        eager = [x for s in timed["eager"] for x in s]
        compiled = [x for s in timed["compile"] for x in s]
        method = protocol.method_id(sess.ctx.kind)
        result.timing = summarize(cand, method, wall_ms=wall)
        result.baselines = Baselines(
            eager=summarize(eager, method),
            compile=summarize(compiled, method) if compiled else None,
            compile_mode=compile_mode,
            ids={"eager": f"graded-{int(time.time())}"},
            backend_flags=dict(sess.reference.backend_flags),
        )
        if keep_samples:  # the suite self-check keeps every per-call time of both sides
            result.timing.raw_ms = list(cand)
            result.baselines.eager.raw_ms = list(eager)  # type: ignore[union-attr]
            if result.baselines.compile is not None:
                result.baselines.compile.raw_ms = list(compiled)
        sess.diagnostics.grade_rounds = rounds
        sess.diagnostics.grade_rounds_run = ran
        sess.diagnostics.grade_stop_reason = stop_reason(check)
        sess.diagnostics.grade_round_calls = {k: [len(s) for s in v] for k, v in timed.items() if v}
        sess.diagnostics.baseline_host = sess.reference.baseline_host_stats(take=True)
        apply_speedups(sess, result, evaluator.provenance().device)

    seeds = fresh_seeds(evaluator.settings.verify.input_sets, set(evaluator.used_seeds))
    return evaluator.run_session("grade", task, root, so_path, body, seeds=seeds, timing=True,
                                 torch_compute_allowed=torch_compute_allowed)


def self_check(evaluator: Evaluator, task: TaskManifest) -> CandidateResult:
    """The suite self-check: ``task``'s own ``Model`` as the candidate, graded by :func:`grade` with every check but
    the runtime rules against PyTorch compute, every per-call time kept. Never a grade: the result's
    ``integrity_weakened`` says so."""
    import tempfile

    with tempfile.TemporaryDirectory(prefix="cuda-agent-self-check-") as tmp:
        root = Path(tmp)
        (root / "model_new.py").write_text(task.code.rstrip("\n") + "\n\n\nModelNew = Model  # suite self-check\n")
        result = grade(evaluator, task, root, None, keep_samples=True, torch_compute_allowed=True)
    result.integrity_weakened = list(dict.fromkeys([*result.integrity_weakened, "self_check:torch_compute_allowed"]))
    return result
