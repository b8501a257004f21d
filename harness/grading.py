"""The trusted final grading pass: the only source of rewards.

Fresh seeds drawn here (never the ones the agent's verify/profile used), a
fresh sandboxed process, re-verification on N input sets, then timing of the
candidate ALTERNATING with the baselines (candidate, eager, compile,
candidate, ...) so slow drift of the machine hits all of them alike; the
speedup is t_baseline / t_candidate on medians of all rounds. Baselines are
measured here, not read from the cache (the fastest of many noisy cached
measurements would bias the ratio).
"""

from __future__ import annotations

import secrets
import time
from pathlib import Path
from typing import TYPE_CHECKING

from cuda_agent.harness.fresh_sets import fresh_count
from cuda_agent.harness.timing import method_id, summarize
from cuda_agent.schemas.result import Baselines, CandidateResult
from cuda_agent.schemas.task import TaskManifest

if TYPE_CHECKING:
    from cuda_agent.harness.evaluator import Evaluator, _Session


def fresh_seeds(n: int, avoid: set[int] = frozenset()) -> list[int]:  # type: ignore[assignment]
    """``n`` distinct secret seeds, none in ``avoid``."""
    out: list[int] = []
    while len(out) < n:
        s = secrets.randbits(31)
        if s not in avoid and s not in out:
            out.append(s)
    return out


def grade(evaluator: Evaluator, task: TaskManifest, root: Path, so_path: Path | None) -> CandidateResult:
    """Re-verify with fresh seeds in a fresh process, then ABAB timing against the baselines."""
    settings = evaluator.settings
    used = set(getattr(evaluator, "used_seeds", set()))

    def body(sess: _Session, result: CandidateResult) -> None:
        evaluator.verify_sets(sess, range(sess.n_verify))
        if sess.errors or sess.violations:
            return
        ks = evaluator.timing_sets(sess)
        per_round = settings.grade_calls()
        cand: list[float] = []
        eager: list[float] = []
        compiled: list[float] = []
        wall = 0.0
        method = method_id(evaluator.kind, evaluator.net_overhead)
        if settings.with_compile_baseline:  # compile (CPU work) before the timing lock is taken
            t = time.perf_counter()
            sess.ref.call("prepare_baseline", "compile", ks[0], settings.compile_mode)
            sess.tick("prepare_baseline", t)
        cap = settings.grade_spot_checks
        fresh_total = fresh_count(settings, sess.sets[0].get("input_bytes", 0))  # over all rounds, like the cap

        def run_round(r: int, fresh: int) -> list[float]:
            """Round ``r``: the candidate's calls (``fresh`` of them on fresh sets), then each baseline's."""
            nonlocal wall
            # The cap spread over the rounds (the first rounds take the remainder).
            checks = None if cap is None else cap // settings.grade_rounds + (r < cap % settings.grade_rounds)
            samples, wall_ms = evaluator.time_candidate(sess, ks, calls=per_round, max_checks=checks, fresh_calls=fresh)
            if sess.errors or sess.violations:
                return samples
            wall += wall_ms
            warm = settings.warmup_calls if r == 0 else 1
            t = time.perf_counter()
            with evaluator.lock:
                eager.extend(sess.ref.call("time_baseline", "eager", ks, per_round, warm, settings.compile_mode))
                if settings.with_compile_baseline:
                    compiled.extend(sess.ref.call(
                        "time_baseline", "compile", ks, per_round, warm + (2 if r == 0 else 0), settings.compile_mode
                    ))
            sess.tick("baselines", t)
            return samples

        for r in range(settings.grade_rounds):
            cand += run_round(r, fresh_total // settings.grade_rounds + (r < fresh_total % settings.grade_rounds))
            if sess.errors or sess.violations:
                return
        # A gap on the fresh sets is looked at again in one more round with all of them; when that round shows
        # none, its samples are the candidate's (against the baselines of every round, this one's included).
        cand = evaluator.settle_fresh_sets(sess, cand, lambda: run_round(settings.grade_rounds, fresh_total))
        if sess.errors or sess.violations:
            return
        result.timing = summarize(cand, method, wall_ms=wall)
        result.baselines = Baselines(
            eager=summarize(eager, method),
            compile=summarize(compiled, method) if compiled else None,
            compile_mode=settings.compile_mode,
            ids={"eager": f"graded-{int(time.time())}"},
        )
        sess.extra["grade_rounds"] = settings.grade_rounds
        evaluator.apply_speedups(sess, result)

    seeds = fresh_seeds(settings.n_input_sets, used)
    return evaluator.run_protocol("grade", task, root, so_path, body, seeds=seeds, timing=True)
