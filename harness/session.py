"""One evaluation session: one runner, one reference process, the input sets, what was found.

A :class:`Session` opens (makes the sets in the reference process, loads the candidate, gets the inputs to it),
runs calls (:meth:`Session.call`: one forward under the timing protocol, its outputs described, checked when asked),
and closes with the checks made once the calls are done (the guard snapshot, the pristine inputs). What it finds
goes to ``errors`` (wrong outputs), ``violations`` (integrity rules) and ``flags``; how it went to ``diagnostics``.
:mod:`cuda_agent.harness.session_run` folds that into a :class:`~cuda_agent.schemas.CandidateResult`.
"""

from __future__ import annotations

import secrets
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cuda_agent.harness.input_sets import Role, SetStore
from cuda_agent.harness.messages import Violation
from cuda_agent.harness.module_state import state_carried
from cuda_agent.harness.output_checks import check_call
from cuda_agent.harness.runner_client import RunnerClient
from cuda_agent.harness.settings import HarnessSettings, IntegritySettings
from cuda_agent.harness.timing import add_call_host
from cuda_agent.harness.timing_protocol import TimingProtocol
from cuda_agent.harness.timing_stats import TimingLock, net_of_overhead
from cuda_agent.harness.transport import Transport
from cuda_agent.schemas.result import CheckError, Diagnostics, InputSetsInfo
from cuda_agent.schemas.task import TaskManifest

#: Working sets above this many bytes rotate through only enough sets for :data:`MIN_ROTATION_SETS` (memory).
BIG_WORKING_SET = 256 * 2**20
#: Fewest input sets a timed loop rotates over, whatever the working set (a result cache keyed on one input misses).
MIN_ROTATION_SETS = 3


@dataclass
class SessionContext:
    """What every session of one evaluator and phase shares."""

    kind: str
    device: str
    settings: HarnessSettings
    protocol: TimingProtocol
    #: The integrity block of this phase: the settings' own for the tools, the defaults (or stricter) for grading.
    integrity: IntegritySettings
    transport: Transport
    lock: TimingLock
    input_transport: str = "seeded"
    init_seed: int = 42
    #: Timed calls are reported net of the protocol's per-process cost (experiments; CUDA only).
    net_overhead: bool = False

    def tolerance_table(self, task: TaskManifest) -> dict[str, tuple[float, float]]:
        """dtype -> (atol, rtol) for ``task`` (:meth:`~cuda_agent.harness.settings.VerifySettings.tolerance_table`)."""
        return self.settings.verify.tolerance_table(task.precision)


def stage_candidate(stage: Path, root: Path, so_path: Path | None) -> tuple[Path, Path]:
    """Copy the workspace and the built module into the runner's read-only stage folder."""
    ws = stage / "ws"
    so_dir = stage / "so"
    shutil.copytree(root, ws, ignore=shutil.ignore_patterns("__pycache__", "build", ".snapshots", "*.o"), symlinks=False)
    so_dir.mkdir()
    if so_path is not None:
        shutil.copy2(so_path, so_dir / Path(so_path).name)
    return ws, so_dir


class Session:
    """One evaluation (see the module docstring)."""

    def __init__(self, ctx: SessionContext, task: TaskManifest, runner: RunnerClient, reference: Any, *,
                 reference_sets: int | None = None, runner_sets: int | None = None,
                 torch_compute_allowed: bool = False) -> None:
        """``reference_sets`` / ``runner_sets``: how many input sets each process may hold at once (None: all of
        them; harness/memory_budget.py sizes these for tasks whose sets do not all fit). ``torch_compute_allowed``:
        the suite self-check, never a grade."""
        self.ctx = ctx
        self.task = task
        self.runner = runner
        self.reference = reference
        self.sets = SetStore(reference, str(runner.exchange), reference_sets=reference_sets, runner_sets=runner_sets)
        self.torch_compute_allowed = torch_compute_allowed
        self.errors: list[CheckError] = []
        self.violations: list[Violation] = []
        self.flags: list[str] = []
        self.diagnostics = Diagnostics()
        self.calls = 0
        #: Timed calls on fresh sets (harness/fresh_sets.py): (fresh ms, its rotated neighbours' median).
        self.fresh_pairs: list[tuple[float, float]] = []
        #: The protocol's own cost per call in this runner (measured only with ``net_overhead``).
        self.overhead_ms = 0.0
        #: The module's state after the last call that asked for it (harness/module_state.py).
        self.last_state: dict[str, str] | None = None
        #: The runner's peak device bytes, as it reported at the closing guard (a diagnostic).
        self.runner_peak_bytes: int | None = None
        #: (the parent's wall of the runner's round trip, the reported ms) of the last call, and of each timed call of
        #: the last timed batch (harness/unaccounted_wall.py).
        self.last_call_wall: tuple[float, float] = (0.0, 0.0)
        self.batch_walls: list[tuple[float, float]] = []

    @property
    def failed(self) -> bool:
        """A wrong output or an integrity violation was found: the session's further work is moot."""
        return bool(self.errors or self.violations)

    def tick(self, phase: str, since: float) -> float:
        """Add the seconds since ``since`` to the diagnostics' ``phase_s[phase]``; returns now."""
        return self.diagnostics.tick(phase, since)

    @property
    def output_mode(self) -> str:
        """How this session's outputs (and inputs handed over) cross: 'ipc', 'vmm' or 'host'."""
        return self.ctx.transport.output_mode(self.runner.isolation)

    # ------------------------------------------------------------------ opening
    def open(self, root: Path, so_path: Path | None, seeds: list[int], *, timing: bool = False) -> None:
        """Make the input sets (reference first), load the candidate, get the inputs to it.

        ``timing``: also make the sets the timed calls rotate over, so they reach the runner with the others. With
        seeded inputs the runner makes every set itself from its seed before the candidate's code is imported; a
        set whose fingerprints differ from the reference's (or that failed there) is handed over instead.
        """
        seeded = self.ctx.input_transport == "seeded"
        t = time.perf_counter()
        for seed in seeds:
            self.sets.make(seed, "verify", stage=not seeded, transport=self.output_mode)
        if timing:
            for _ in range(self.extra_timing_sets()):
                self.sets.make(secrets.randbits(31), "timing", stage=not seeded, transport=self.output_mode)
        t = self.tick("make_sets", t)
        if timing and self.ctx.net_overhead:
            with self.ctx.lock:  # alone on the device, and before any candidate code exists in the runner
                calibrated = self.runner.calibrate()
            self.overhead_ms = calibrated.overhead_ms
            self.diagnostics.timing_overhead_ms = calibrated.overhead_ms
            self.diagnostics.runner_spin_recalibrated = calibrated.spin
            t = self.tick("calibrate", t)
        first = self.sets[self.sets.indices()[0]]
        # With a runner cap only the first sets are made there up front; the others are handed over when a call
        # needs them (:meth:`ensure_in_runner`).
        up_front = self.sets.indices()[: self.sets.runner_cap] if self.sets.runner_cap else self.sets.indices()
        ws_stage, so_stage = stage_candidate(self.runner.stage, root, so_path)
        loaded = self.runner.load(
            workspace=str(ws_stage), so_dir=str(so_stage), require_extension=so_path is not None,
            init_inputs=self.reference.init_inputs or [], init_seed=self.ctx.init_seed,
            exchange=str(self.runner.exchange), output_specs=[o for o in first.outputs if o.shape is not None],
            task_code=self.task.code if seeded else None,
            seeded_sets={str(k): self.sets[k].seed for k in up_front} if seeded else {},
            torch_compute_allowed=self.torch_compute_allowed,
        )
        self.violations += loaded.violations
        t = self.tick("load", t)
        staged = []
        for k in self.sets.indices():
            made = loaded.seeded.get(str(k))
            if made is not None and made.fingerprints == self.sets[k].fingerprints:
                self.sets.handed_over(k)
                continue
            if k not in up_front:
                continue
            staged.append(k)
            if seeded:
                self.sets.ensure_in_reference(k)
                self.sets.stage(k, self.output_mode)
            self.send_inputs(k)
        self.diagnostics.input_sets = InputSetsInfo(seeded=len(self.sets) - len(staged), staged=len(staged))
        self.tick("send_inputs", t)

    def extra_timing_sets(self) -> int:
        """Sets beyond the verify sets that timed calls rotate over: ``rotation_sets`` when the working set is
        small, else enough for :data:`MIN_ROTATION_SETS` (device memory)."""
        if self.sets.input_bytes() <= BIG_WORKING_SET:
            return self.ctx.protocol.rotation_sets
        return max(0, MIN_ROTATION_SETS - len(self.sets))

    def send_inputs(self, k: int) -> None:
        """Give the runner set ``k`` as staged (it keeps it pristine and copies it per call)."""
        self.make_room_in_runner(keep=(k,))
        self.runner.inputs(k, self.sets[k].tensors)
        self.sets.handed_over(k)

    # ------------------------------------------------------------------ memory-aware sets
    @property
    def constrained(self) -> bool:
        """Either process holds fewer sets than the session uses (harness/memory_budget.py)."""
        return self.sets.runner_cap is not None or self.sets.reference_cap is not None

    def make_room_in_runner(self, keep: tuple[int, ...] = ()) -> None:
        """Have the runner forget its least recently used sets until one more fits its cap."""
        cap = self.sets.runner_cap
        if cap is None:
            return
        while len(self.sets.in_runner) >= cap:
            victim = next((k for k in self.sets.in_runner if k not in keep), None)
            if victim is None:
                return
            self.runner.drop_inputs([victim])
            self.sets.in_runner.pop(victim, None)
            self.sets.release_exports([victim])

    def ensure_in_runner(self, k: int) -> None:
        """The runner holds set ``k``: handed over now when it was dropped (or never sent) to save memory, by
        descriptor where the transport allows (one device copy on CUDA), else through the reusable slot files."""
        if k in self.sets.in_runner:
            self.sets.in_runner.move_to_end(k)
            return
        t = time.perf_counter()
        self.sets.ensure_in_reference(k)
        self.make_room_in_runner(keep=(k,))
        kind = self.ctx.transport.fresh_set_kind(self.runner.isolation)
        if kind:
            from cuda_agent.harness.timed_run import hand_over_fds

            vmm_error = self.sets.stage_fds(k, kind == "vmm")
            if vmm_error:
                self.ctx.transport.fd_failed("vmm", f"the reference could not export device memory: {vmm_error}")
            fds = self.sets.take_fds(k)
            if fds is not None and hand_over_fds(self, k, fds):
                self.tick("set_hand_over", t)
                return
        self.sets.stage(k, self.output_mode, reuse=True)
        self.send_inputs(k)
        self.tick("set_hand_over", t)

    def release(self, k: int) -> None:
        """Free set ``k`` on both sides now (a fresh set after its call, in a memory-aware session)."""
        if not self.constrained:
            return
        if k in self.sets.in_runner:
            self.runner.drop_inputs([k])
            self.sets.in_runner.pop(k, None)
        if k in self.sets.in_reference:
            self.sets.drop([k])

    def add_sets(self, count: int, role: Role = "timing") -> list[int]:
        """Make ``count`` more sets from fresh secret seeds and hand them over."""
        t = time.perf_counter()
        new = []
        for _ in range(count):
            k = self.sets.make(secrets.randbits(31), role, stage=True, transport=self.output_mode)
            self.send_inputs(k)
            new.append(k)
        self.tick("extra_sets", t)
        return new

    # ------------------------------------------------------------------ calls
    def call(self, k: int, *, check: bool, audit: bool = False, state: bool = False) -> float:
        """One forward on set ``k`` under the timing protocol, its outputs checked when asked (``state``: the
        module's state digested after it, kept in :attr:`last_state`). Returns ms (net of the protocol's own cost
        with ``net_overhead``; the wall-clock cross-check is made on the raw figure)."""
        self.ensure_in_runner(k)
        wall0 = time.perf_counter()
        called = self.runner.call(k, audit=audit, state=state)
        self.last_state = called.state
        wall_ms = (time.perf_counter() - wall0) * 1e3
        self.last_call_wall = (wall_ms, called.ms)
        self.tick("forward_calls", wall0)
        self.calls += 1
        work = self.diagnostics.call_work_s
        for part, ms in called.work_ms.items():
            work[part] = work.get(part, 0.0) + ms / 1e3
        work["round_trip"] = work.get("round_trip", 0.0) + max(0.0, wall_ms - sum(called.work_ms.values())) / 1e3
        add_call_host(self.diagnostics.candidate_host, called.enqueue_ms, called.spin_us, called.spin_blocked)
        check_call(self, k, called, wall_ms, check=check)
        return net_of_overhead(called.ms, self.overhead_ms) if self.ctx.net_overhead else called.ms

    def verify_sets(self, ks: Any) -> None:
        """Check every set in ``ks``; then the first set again (determinism, T21)."""
        ks = list(ks)
        # The op audit on the first call and on one more at a secret position: a call counter cannot step round it.
        extra = secrets.randbelow(len(ks)) if ks else 0
        first_state = None
        for j, k in enumerate(ks):
            self.call(k, check=True, audit=(j == 0 or j == extra), state=j == 0)
            first_state = first_state if j else self.last_state
            if self.violations:
                return
        if self.ctx.integrity.determinism_check and ks and not self.errors:
            self.call(ks[0], check=True, state=first_state is not None)
            if first_state is not None and self.last_state is not None and len(ks) > 1:
                self.violations += state_carried(first_state, self.last_state)

    def timing_sets(self) -> list[int]:
        """Sets rotated through timed calls: the verify and timing sets (made now when the session was opened
        without ``timing``). Where the runner holds fewer sets than that, the rotation keeps to the sets it holds
        (padded to :data:`MIN_ROTATION_SETS` from the others), so timed calls do not wait for hand-overs."""
        ks = self.sets.indices("verify") + self.sets.indices("timing")
        if not self.sets.indices("timing"):
            ks += self.add_sets(self.extra_timing_sets())
        if self.constrained:
            # Rotate over the sets both processes hold (at least one): a timed call then waits for no hand-over and
            # no set made again. Fewer distinct sets than MIN_ROTATION_SETS is sound here because every batch also
            # makes calls on fresh sets, compared with their rotated neighbours (harness/fresh_sets.py).
            cap = min(self.sets.runner_cap or len(ks), self.sets.reference_cap or len(ks))
            both = [k for k in self.sets.in_runner if k in ks and k in self.sets.in_reference]
            ks = (both[-cap:] or ks[:1]) if cap < len(ks) else ks
        return ks

    # ------------------------------------------------------------------ closing
    def close_checks(self) -> None:
        """After the calls: guard snapshot, pristine inputs intact (T5/T10/T16)."""
        t = time.perf_counter()
        guarded = self.runner.guard()
        self.violations += guarded.violations
        self.runner_peak_bytes = guarded.peak_bytes
        changed = sorted(set(self.reference.inputs_intact()) | set(self.sets.changed))
        if changed:
            self.violations.append(Violation(rule="T5.outside.pristine_inputs_changed",
                                             message=f"the trusted copies of input sets {changed} changed"))
        self.tick("close_checks", t)
