"""The timing protocol: an internal object resolved from a named preset and the device kind.

Users pick a preset (``harness.timing.preset``); everything the trusted side's timing loops and the child
processes' timers do follows from the :class:`TimingProtocol` it resolves to. Its per-process part
(:class:`~cuda_agent.harness.messages.TimerSpec`) is sent to the candidate runner and the reference process in their
first message. Benchmarks and tests may override single fields through
:class:`~cuda_agent.harness.experiments.ExperimentSettings`; the measurements behind the defaults are in
``docs/timing-experiments.md``.

Presets:

- ``standard``: our protocol (per-call device-wide sync, L2 flush, fresh inputs rotated, median to a precision
  target). CUDA: medians to +-0.3% (95% CI) with up to 600 calls, a 200 us pre-roll spin so sub-100 us tasks time
  device work rather than launch latency, two retakes of a baseline call whose host side outlasted the spin, 33
  calls per variant and grading round. CPU (host-timed, noisier): a wider fresh-set slack.
- ``standard_fast``: ``standard`` with the grading pass's precision-targeted stop on (:mod:`cuda_agent.harness.grade_stop`):
  rounds of 11 calls, at least 3 and at most 9 (the standard pass's 33 and 99 calls); after the third, the pass stops
  once both speedups are known to +-1% and neither interval holds 0.95 or 1.05 (the self-check's +-5% band, the
  paper's milestone), so it never stops with a milestone or band verdict undecided (the 1.0 line of faster-than
  rates is not guarded: grade agents' kernels for a report with ``standard``). For the suite self-check (issue 21); replayed on recorded rows by ``benchmarks/grading_stop_replay.py``.
- ``quick``: few calls and one grading round (smoke runs, CI); the integrity checks are unchanged.
- ``release``: the CUDA-Agent release's profiler-sum method, for comparison only.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from cuda_agent.harness.messages import TimerSpec

PRESETS = ("standard", "standard_fast", "quick", "release")


class TimingProtocol(BaseModel):
    """How candidates and baselines are timed (resolved; see :func:`resolve_protocol`)."""

    model_config = ConfigDict(extra="forbid")

    method: Literal["events", "profiler_sum"] = Field(
        "events", description="'events': our protocol; 'profiler_sum': the release's torch.profiler kernel-time sum.")
    warmup_calls: int = Field(3, ge=0, description="Untimed calls before timing.")
    min_calls: int = Field(10, ge=3, description="Timed calls at least.")
    max_calls: int = Field(100, ge=3, description="Timed calls at most (cap of the adaptive loop).")
    target_rel_ci: float = Field(0.01, gt=0, description="Stop once the median's 95% CI half-width is this fraction.")
    max_batch_s: float = Field(20.0, gt=0, description="Time budget of one timed batch, seconds.")
    min_batch_s: float = Field(0.0, ge=0, description="Keep timing at least this long even once precise.")
    rotation_sets: int = Field(4, ge=1, description="Input sets beyond the verify sets rotated through timed calls.")
    spot_check_every: int = Field(4, ge=1, description="Compare the output of every k-th timed call (T12/T13).")
    spot_check_max: int | None = Field(3, ge=1, description="Most spot checks of one profile (None: no cap).")
    grade_rounds: int = Field(
        3, ge=1, description="Interleaved rounds (candidate, eager, compile) of grading: all of them, or with the "
        "precision stop on (grade_target_rel_ci), the most that run.")
    grade_min_rounds: int = Field(
        2, ge=2, description="With the precision stop on, rounds that always run before it may stop: at least 2, so "
        "one noisy round cannot decide (KernelBench level3/7_GoogleNet read 0.55 in its first round, 1.02 in the next "
        "two). The pass's fresh-set calls and its spot-check cap are spread over these rounds (a later round is "
        "checked at the cap's rate over grade_rounds, at least once). Unused with the stop off.")
    grade_target_rel_ci: float | None = Field(
        None, gt=0, description="The precision stop: after grade_min_rounds, grading stops at the end of the "
        "first round where every speedup's 95% interval (its medians' per-call intervals, widened to cover each "
        "round's own speedup) has a relative half-width within this and holds no line of grade_stop_thresholds. "
        "None = off: every one of grade_rounds runs.")
    grade_stop_thresholds: list[float] = Field(
        default_factory=lambda: [1.0, 1.05], description="Speedup lines the precision stop guards: "
        "while a speedup's interval (vs eager or vs compile) holds one, grading goes on, so the pass never stops with "
        "the verdict at that line undecided (1.0: faster-than rates; 1.05: the paper's milestones; 0.95 and 1.05: "
        "the suite self-check's +-5% band).")
    grade_calls_per_round: int | None = Field(
        None, ge=1, description="Timed calls per variant and round; None = max(min_calls, max_calls // rounds).")
    grade_spot_checks: int | None = Field(12, ge=1, description="Random spot checks over a grading pass.")
    grade_round_budget_s: float | None = Field(
        10.0, gt=0, description="Seconds the candidate's calls of one grading round may take: a candidate slower "
        "than budget / grade_calls_per_round per call (timed on the round's warm-up call) gets fewer calls, at "
        "least 5, with the same share checked. A starved 2.3 s kernel's regrade took 258 s of 33-call rounds. "
        "None = never cut.")
    fresh_set_slack: float = Field(0.05, ge=0, description="Fresh-set calls slower than this fraction look again.")
    reverify_sets: int = Field(1, ge=1, description="Sets a profile re-checks when the same build just passed verify.")
    per_kernel_breakdown: bool = Field(True, description="Record a per-kernel breakdown via torch.profiler (CUDA).")
    net_overhead: bool = Field(False, description="Report calls net of the protocol's own cost (experiments only).")
    baseline_clone_inputs: bool = Field(False, description="Time baselines on a clone of the inputs per call.")
    timer: TimerSpec = Field(default_factory=lambda: TimerSpec(warm_input_pages=True),
                             description="The per-process part, sent to the runner and the reference process.")

    @model_validator(mode="after")
    def _stop_fits_rounds(self) -> TimingProtocol:
        if self.grade_target_rel_ci is not None and self.grade_min_rounds > self.grade_rounds:
            raise ValueError(
                f"timing protocol: grade_min_rounds {self.grade_min_rounds} is more than grade_rounds "
                f"{self.grade_rounds} with the precision stop on (grade_target_rel_ci {self.grade_target_rel_ci}); "
                "valid: 2 <= grade_min_rounds <= grade_rounds (grade_rounds is the most that run), or "
                "grade_target_rel_ci None (the stop off)")
        bad = [t for t in self.grade_stop_thresholds if not t > 0]
        if bad:
            raise ValueError(f"timing protocol: grade_stop_thresholds {bad} are not speedups; valid: positive "
                             "numbers such as [1.0, 1.05]")
        return self

    def grade_stop(self) -> bool:
        """The grading pass's precision stop is on."""
        return self.grade_target_rel_ci is not None

    def grade_spread_rounds(self) -> int:
        """Rounds the grading pass's fresh-set calls and spot-check cap are spread over: the rounds sure to run."""
        return self.grade_min_rounds if self.grade_stop() else self.grade_rounds

    def grade_calls(self) -> int:
        """Timed calls per variant and round of the grading pass."""
        if self.grade_calls_per_round is not None:
            return self.grade_calls_per_round
        return max(self.min_calls, self.max_calls // self.grade_rounds)

    def method_id(self, kind: str) -> str:
        """The id recorded in :class:`~cuda_agent.schemas.Timing` for timed calls: 'host_sync' (CPU),
        'events_l2flush' (CUDA) or 'events_l2flush_net' (net of the protocol's cost). Profiler sums are recorded as
        'profiler_sum'; grading always times calls."""
        if kind != "cuda":
            return "host_sync"
        return "events_l2flush_net" if self.net_overhead else "events_l2flush"


#: Per preset and device kind: the fields that differ from :class:`TimingProtocol`'s defaults.
_PRESET_FIELDS: dict[str, dict[str, dict[str, Any]]] = {
    "standard": {
        "cuda": {"target_rel_ci": 0.003, "min_calls": 20, "max_calls": 600, "grade_calls_per_round": 33,
                 "timer": {"preroll_us": 200.0, "preroll_retakes": 2, "warm_input_pages": True}},
        "cpu": {"fresh_set_slack": 0.25},
    },
    "quick": {
        "cuda": {"warmup_calls": 1, "min_calls": 5, "max_calls": 30, "target_rel_ci": 0.02, "max_batch_s": 5.0,
                 "rotation_sets": 2, "grade_rounds": 1,
                 "timer": {"preroll_us": 200.0, "preroll_retakes": 2, "warm_input_pages": True}},
        "cpu": {"warmup_calls": 1, "min_calls": 3, "max_calls": 12, "target_rel_ci": 0.05, "max_batch_s": 5.0,
                "rotation_sets": 2, "grade_rounds": 1, "fresh_set_slack": 0.25},
    },
}
#: The precision stop of ``standard_fast`` (measured: benchmarks/grading_stop_replay.py, docs/timing-experiments.md).
#: Rounds of 11 calls, 3 to 9 of them: the minimum is the standard pass's 33 calls in three batches (its fresh-set
#: calls and spot checks spread over them as the standard pass spreads them over its three rounds), the maximum its 99.
_FAST_STOP: dict[str, Any] = {"grade_calls_per_round": 11, "grade_rounds": 9, "grade_min_rounds": 3,
                              "grade_target_rel_ci": 0.01, "grade_stop_thresholds": [0.95, 1.05]}
_PRESET_FIELDS["standard_fast"] = {kind: {**fields, **_FAST_STOP} for kind, fields in _PRESET_FIELDS["standard"].items()}
_PRESET_FIELDS["release"] = {kind: {**fields, "method": "profiler_sum"}
                             for kind, fields in _PRESET_FIELDS["standard"].items()}


def _merge(base: dict[str, Any], top: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in top.items():
        out[key] = _merge(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


def resolve_protocol(preset: str, kind: str, overrides: dict[str, Any] | None = None) -> TimingProtocol:
    """The protocol of ``preset`` on a ``kind`` ('cpu'/'cuda') device, with ``overrides`` (experiments, tests)
    merged over it field by field (``{"timer": {"preroll_us": 0}}`` changes one field of the timer)."""
    if preset not in _PRESET_FIELDS:
        raise ValueError(f"timing preset {preset!r}: valid are {', '.join(PRESETS)}")
    fields = _merge(TimingProtocol().model_dump(), _PRESET_FIELDS[preset].get(kind, {}))
    return TimingProtocol.model_validate(_merge(fields, overrides or {}))
