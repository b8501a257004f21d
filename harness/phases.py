"""The in-episode evaluations as small strategies over a session: ``verify`` and ``profile``.

A strategy is a function ``(session, result) -> None`` that :meth:`Evaluator.run_session
<cuda_agent.harness.evaluator.Evaluator.run_session>` calls between opening and closing a session. ``verify`` checks
every input set (then the first again: determinism); ``profile`` verifies, then times the candidate (spot-checked,
with fresh sets), takes the baselines from the cache or measures them, and applies the speedups. The trusted final
grading pass is :mod:`cuda_agent.harness.grading`.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from cuda_agent.harness.baselines import cached_baselines
from cuda_agent.harness.runner_client import CandidateFailed
from cuda_agent.harness.timed_run import settle_fresh_sets, time_candidate
from cuda_agent.harness.timing_stats import speed_of_light_ms, summarize
from cuda_agent.schemas.result import CandidateResult, Timing

if TYPE_CHECKING:
    from cuda_agent.harness.evaluator import Evaluator
    from cuda_agent.harness.session import Session


def verify_body(sess: Session, result: CandidateResult) -> None:
    """Check every verify set of the session."""
    sess.verify_sets(sess.sets.indices("verify"))


def profile_body(evaluator: Evaluator):  # type: ignore[no-untyped-def]
    """The strategy of ``profile`` on ``evaluator`` (baselines come from its cache)."""

    def body(sess: Session, result: CandidateResult) -> None:
        verify_body(sess, result)
        if not sess.failed:
            time_session(evaluator, sess, result)

    return body


def time_session(evaluator: Evaluator, sess: Session, result: CandidateResult) -> None:
    """Candidate timing, per-kernel breakdown, baselines (cached), speedups."""
    ctx = sess.ctx
    protocol = ctx.protocol
    ks = sess.timing_sets()
    method = protocol.method_id(ctx.kind)
    if protocol.method == "profiler_sum":
        times = sess.runner.kernels(ks[0], profiler_sum=True)
        sess.violations += times.violations
        result.timing = Timing(median_ms=float(times.profiler_sum_ms or 0.0), samples=10, method="profiler_sum")
    else:
        walls: list[float] = []

        def batch() -> list[float]:
            samples, wall_ms = time_candidate(sess, ks, max_checks=protocol.spot_check_max)
            walls.append(wall_ms)
            return samples

        samples = batch()
        if sess.failed:
            return
        samples = settle_fresh_sets(sess, samples, batch)
        if sess.failed:
            return
        result.timing = summarize(samples, method, wall_ms=sum(walls))
    if ctx.kind == "cuda" and protocol.per_kernel_breakdown:
        t = time.perf_counter()
        try:
            times = sess.runner.kernels(ks[0], breakdown=True)
        except CandidateFailed:  # a report, not a check: the closing guard still runs
            pass
        else:
            result.timing.per_kernel = times.per_kernel or []
            sess.violations += times.violations
        sess.tick("kernel_breakdown", t)
    t = time.perf_counter()
    prov = evaluator.provenance()
    settings = ctx.settings
    result.baselines, cached = cached_baselines(
        sess.reference, code_hash=sess.task.code_hash, device_name=prov.device, torch_version=prov.torch,
        sets=sess.sets.held_for_baselines(ks),
        protocol=protocol, timing=settings.timing, threads=settings.sandbox.cpu_threads,
        timing_cpus=evaluator.experiments.timing_cpus, lock=ctx.lock, cache=evaluator.cache, method=method)
    sess.tick("baselines", t)
    result.baselines.backend_flags = dict(sess.reference.backend_flags)
    sess.diagnostics.baselines_cached = cached
    apply_speedups(sess, result, prov.device)


def apply_speedups(sess: Session, result: CandidateResult, device_name: str) -> None:
    """speedup = t_baseline / t_candidate on medians, after the speed-of-light cap (T22)."""
    if result.timing is None or result.baselines is None:
        return
    t = result.timing.median_ms
    floor = (speed_of_light_ms(sess.task.flops, sess.task.bytes_moved, device_name)
             if sess.ctx.integrity.speed_of_light else None)
    if floor is not None and t < floor:
        sess.flags.append("speed_of_light_capped")
        sess.diagnostics.speed_of_light_ms = floor
        t = floor
    if result.baselines.eager:
        result.speedup_eager = result.baselines.eager.median_ms / t if t > 0 else None
    if result.baselines.compile:
        result.speedup_compile = result.baselines.compile.median_ms / t if t > 0 else None
