"""The trusted final grading pass: the only source of rewards.

Fresh seeds drawn here (never the ones the agent's verify/profile used), a fresh sandboxed process, the default
integrity block (or a stricter one the config asked for), re-verification on N input sets, then timing of the
candidate ALTERNATING with the baselines (candidate, eager, compile, candidate, ...) so slow drift of the machine
hits all of them alike; the speedup is t_baseline / t_candidate on medians of all rounds. Baselines are measured
here, not read from the cache (the fastest of many noisy cached measurements would bias the ratio). A strategy over
a session, like ``verify`` and ``profile`` (:mod:`cuda_agent.harness.phases`), using only public methods.
"""

from __future__ import annotations

import secrets
import time
from pathlib import Path
from typing import TYPE_CHECKING

from cuda_agent.harness.fresh_sets import fresh_count
from cuda_agent.harness.phases import apply_speedups
from cuda_agent.harness.timed_run import settle_fresh_sets, time_candidate
from cuda_agent.harness.timing_stats import summarize
from cuda_agent.harness.widened_run import verify_widened
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
        if widened:
            verify_widened(sess, task, widened)
            if sess.failed:
                return
        ks = sess.timing_sets()
        per_round, rounds = protocol.grade_calls(), protocol.grade_rounds
        cand: list[float] = []
        eager: list[float] = []
        compiled: list[float] = []
        wall = 0.0
        sess.reference.baseline_host_stats(take=True)  # this grade's baseline work only, from here
        if timing_settings.compile_baseline:  # compile (CPU work) before the timing lock is taken
            t = time.perf_counter()
            sess.sets.ensure_in_reference(ks[0])
            sess.reference.prepare_baseline("compile", ks[0], compile_mode)
            sess.tick("prepare_baseline", t)
        cap = protocol.grade_spot_checks
        fresh_total = fresh_count(sess.ctx.integrity.fresh_set_calls, sess.sets.input_bytes())  # over all rounds

        def run_round(r: int, fresh: int) -> list[float]:
            """Round ``r``: the candidate's calls (``fresh`` of them on fresh sets), then each baseline's."""
            nonlocal wall
            # The cap spread over the rounds (the first rounds take the remainder).
            checks = None if cap is None else cap // rounds + (r < cap % rounds)
            samples, wall_ms = time_candidate(sess, ks, calls=per_round, max_checks=checks, fresh_calls=fresh,
                                              budget_s=protocol.grade_round_budget_s)
            if sess.failed:
                return samples
            wall += wall_ms
            warm = protocol.warmup_calls if r == 0 else 1
            t = time.perf_counter()
            bks = sess.sets.held_for_baselines(ks)  # the sets the reference holds now (memory-aware sessions)
            with sess.ctx.lock:
                eager.extend(sess.reference.time_baseline("eager", bks, per_round, warm, compile_mode))
                if timing_settings.compile_baseline:
                    compiled.extend(sess.reference.time_baseline("compile", bks, per_round, warm + (2 if r == 0 else 0),
                                                                 compile_mode))
            sess.tick("baselines", t)
            return samples

        for r in range(rounds):
            cand += run_round(r, fresh_total // rounds + (r < fresh_total % rounds))
            if sess.failed:
                return
        # A gap on the fresh sets is looked at again in one more round with all of them; when that round shows
        # none, its samples are the candidate's (against the baselines of every round, this one's included).
        cand = settle_fresh_sets(sess, cand, lambda: run_round(rounds, fresh_total))
        if sess.failed:
            return
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
