"""Device slots, the timing lock, the build pool, resume refusals and episode markers."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from cuda_agent.harness.evaluation.config import EvalConfig
from cuda_agent.harness.evaluation.records import write_json_atomic
from cuda_agent.harness.evaluation.resume import (
    ResumeRefused,
    check_or_save_config,
    clear_partial,
    episode_name,
    is_done,
)
from cuda_agent.harness.evaluation.runner import interval_overlap
from cuda_agent.harness.evaluation.scheduling import DevicePool, EpisodeUsage, ScheduledBackend
from cuda_agent.schemas.result import CandidateResult, Status


class LockProbeBackend:
    """A minimal third-party-style backend that reports whether its slot's lock is held during each call."""

    name, skill, kernel_suffix = "probe", "cpu", ".cpp"

    def __init__(self) -> None:
        self.slot = None
        self.hold: threading.Event | None = None
        self.inside = threading.Event()
        self.seen: list[tuple[str, bool]] = []

    def _call(self, phase: str) -> CandidateResult:
        self.seen.append((phase, self.slot.lock.locked()))
        if phase == "verify" and self.hold is not None:
            self.inside.set()
            assert self.hold.wait(timeout=30), "the other device's call never completed"
        return CandidateResult(task_id="t", phase=phase, status=Status.correct)

    def compile(self, ws, task):
        return self._call("compile")

    def verify(self, ws, task):
        return self._call("verify")

    def profile(self, ws, task):
        return self._call("profile")

    def grade(self, ws, task):
        return self._call("grade")

    def close(self):
        pass


@pytest.fixture
def pool():
    backends = {0: LockProbeBackend(), 1: LockProbeBackend()}
    p = DevicePool(backends, build_workers=1)
    for slot in p.slots:
        slot.backend.slot = slot
    return p


def test_least_loaded_placement(pool):
    a, b, c = pool.acquire(), pool.acquire(), pool.acquire()
    assert [a.index, b.index, c.index] == [0, 1, 0]
    pool.release(b)
    assert pool.acquire().index == 1
    assert [s.placed for s in pool.slots] == [2, 2]


def test_timed_calls_hold_the_device_lock_and_compiles_do_not(pool):
    slot = pool.acquire()
    usage = EpisodeUsage()
    be = ScheduledBackend(pool, slot, usage)
    for phase in ("compile", "verify", "profile", "grade"):
        assert getattr(be, phase)(None, None).phase == phase
    assert slot.backend.seen == [("compile", False), ("verify", True), ("profile", True), ("grade", True)]
    assert slot.calls == 3 and slot.busy_s >= 0 and usage.gpu_busy_s == pytest.approx(slot.busy_s)


def test_a_backends_warm_up_runs_before_each_timed_call_without_the_lock(pool):
    class WarmingProbe(LockProbeBackend):
        def warm(self, task):
            self.seen.append(("warm", self.slot.lock.locked()))

    slot = pool.acquire()
    slot.backend = WarmingProbe()
    slot.backend.slot = slot
    be = ScheduledBackend(pool, slot, EpisodeUsage())
    for phase in ("compile", "verify", "profile", "grade"):
        getattr(be, phase)(None, None)
    assert slot.backend.seen == [("compile", False), ("warm", False), ("verify", True), ("warm", False),
                                 ("profile", True), ("warm", False), ("grade", True)]


def test_a_failing_warm_up_leaves_the_call_to_report(pool):
    class BrokenWarm(LockProbeBackend):
        def warm(self, task):
            raise RuntimeError("reference process died")

    slot = pool.acquire()
    slot.backend = BrokenWarm()
    slot.backend.slot = slot
    assert ScheduledBackend(pool, slot, EpisodeUsage()).verify(None, None).status is Status.correct
    assert slot.backend.seen == [("verify", True)]


def test_devices_queue_independently(pool):
    s0, s1 = pool.acquire(), pool.acquire()
    b0, b1 = ScheduledBackend(pool, s0, EpisodeUsage()), ScheduledBackend(pool, s1, EpisodeUsage())
    s0.backend.hold = threading.Event()
    t = threading.Thread(target=b0.verify, args=(None, None))
    t.start()
    assert s0.backend.inside.wait(timeout=30)
    # device 0 is busy (its verify waits for us); device 1 must still serve a call
    assert b1.verify(None, None).status is Status.correct
    assert s0.lock.locked() and not s1.lock.locked()
    s0.backend.hold.set()
    t.join(timeout=30)
    assert not t.is_alive()


def test_interval_overlap():
    assert interval_overlap([(0, 10), (5, 15), (20, 30)]) == (5.0, 2)
    assert interval_overlap([(0, 10), (1, 9), (2, 3)]) == (8.0, 3)
    assert interval_overlap([(0, 1), (1, 2)]) == (0.0, 1)


def test_resume_refuses_a_changed_config_and_prints_the_difference(tmp_path: Path):
    cfg = EvalConfig.model_validate({"eval": {"tasks": "folder:examples/tasks", "seeds": 2}, "agent": {"max_turns": 5}})
    assert check_or_save_config(tmp_path, cfg) is False
    assert check_or_save_config(tmp_path, cfg) is True
    # scheduling-only fields may change
    fast = cfg.model_copy(update={"eval": cfg.eval.model_copy(update={"concurrency": 16, "devices": [0, 1]})})
    assert check_or_save_config(tmp_path, fast) is True
    changed = EvalConfig.model_validate({"eval": {"tasks": "folder:examples/tasks", "seeds": 3}, "agent": {"max_turns": 5}})
    with pytest.raises(ResumeRefused) as err:
        check_or_save_config(tmp_path, changed)
    assert err.value.diff == ["eval.seeds: saved 2 != now 3"]
    assert "refusing to resume" in str(err.value)


def test_episode_markers(tmp_path: Path):
    name = episode_name("kernelbench/level1/19_ReLU", 1)
    assert name == "kernelbench--level1--19_ReLU__seed1"
    ep = tmp_path / name
    assert not is_done(ep) and not clear_partial(ep)
    ep.mkdir()
    (ep / "trajectory.jsonl").write_text('{"cut')
    assert not is_done(ep)
    assert clear_partial(ep) and not ep.exists()
    ep.mkdir()
    write_json_atomic(ep / "eval.json", {"schema": "eval/1", "task_id": "t", "seed_index": 1, "seed": 1,
                                         "started_at": 0.0, "ended_at": 1.0, "runner_error": "boom"})
    assert is_done(ep) and not is_done(ep, retry_errors=True)
    assert [p.name for p in ep.iterdir()] == ["eval.json"]  # no temporary file left behind


class SplitProbeBackend(LockProbeBackend):
    """A backend with the split protocol: the build step must run without the device lock, the device step with it."""

    def __init__(self, build_fails: bool = False) -> None:
        super().__init__()
        self.build_fails = build_fails
        self.closed: list[str] = []

    def warm(self, task):
        self.seen.append(("warm", self.slot.lock.locked()))

    def build_for(self, phase, ws, task):
        self.seen.append((f"build:{phase}", self.slot.lock.locked()))
        outer = self

        class Prepared:
            def __init__(self):
                self.phase = phase
                self.compiled = CandidateResult(task_id="t", phase=phase, status=Status.compile_error) if outer.build_fails else None
                self.outcome = None if outer.build_fails else object()

            def close(self):
                outer.closed.append(phase)

        return Prepared()

    def evaluate_built(self, prepared):
        if prepared.outcome is None:
            self.seen.append((f"failed:{prepared.phase}", self.slot.lock.locked()))
            return prepared.compiled
        return self._call(prepared.phase)


def test_split_backends_build_outside_the_lock_and_evaluate_inside(pool):
    slot = pool.acquire()
    slot.backend = SplitProbeBackend()
    slot.backend.slot = slot
    usage = EpisodeUsage()
    be = ScheduledBackend(pool, slot, usage)
    for phase in ("verify", "profile", "grade"):
        assert getattr(be, phase)(None, None).status is Status.correct
    # the warm-up runs beside each build (either may come first), always without the lock, and before the device step
    seen = slot.backend.seen
    assert [e for e in seen if e[0] != "warm"] == [
        ("build:verify", False), ("verify", True), ("build:profile", False), ("profile", True),
        ("build:grade", False), ("grade", True),
    ]
    device_steps = [i for i, e in enumerate(seen) if e[1]]
    warms = [i for i, e in enumerate(seen) if e[0] == "warm"]
    assert len(warms) == 3 and all(not seen[i][1] for i in warms)
    assert [sum(w < d for w in warms) for d in device_steps] == [1, 2, 3]
    assert slot.backend.closed == ["verify", "profile", "grade"]
    assert slot.calls == 3


def test_the_warm_up_overlaps_the_build_and_finishes_before_the_device_step(pool):
    """A warm-up that waits for the build to start and a build that waits for the warm-up to start: run one after
    the other they would time out; the device step sees the warm-up finished."""

    class Overlapping(SplitProbeBackend):
        def __init__(self):
            super().__init__()
            self.build_started, self.warm_started, self.warm_done = threading.Event(), threading.Event(), threading.Event()

        def warm(self, task):
            self.warm_started.set()
            assert self.build_started.wait(timeout=30)
            self.warm_done.set()

        def build_for(self, phase, ws, task):
            self.build_started.set()
            assert self.warm_started.wait(timeout=30), "the warm-up did not start before the build ended"
            return super().build_for(phase, ws, task)

        def _call(self, phase):
            assert self.warm_done.is_set(), "the device step began before the warm-up finished"
            return super()._call(phase)

    slot = pool.acquire()
    slot.backend = Overlapping()
    slot.backend.slot = slot
    assert ScheduledBackend(pool, slot, EpisodeUsage()).grade(None, None).status is Status.correct


def test_prepare_workspace_starts_the_warm_up_in_the_background(pool):
    class Preparing(SplitProbeBackend):
        def __init__(self):
            super().__init__()
            self.warmed = threading.Event()

        def prepare_workspace(self, task, root):
            return "ws"

        def warm(self, task):
            self.warmed.set()

    slot = pool.acquire()
    slot.backend = Preparing()
    slot.backend.slot = slot
    assert ScheduledBackend(pool, slot, EpisodeUsage()).prepare_workspace(None, Path("x")) == "ws"
    assert slot.backend.warmed.wait(timeout=30)


def test_a_build_that_fails_never_takes_the_device(pool):
    slot = pool.acquire()
    slot.backend = SplitProbeBackend(build_fails=True)
    slot.backend.slot = slot
    be = ScheduledBackend(pool, slot, EpisodeUsage())
    assert be.grade(None, None).status is Status.compile_error
    # (the warm-up that started beside the build may finish later: it is the task's, not this call's)
    assert [e for e in slot.backend.seen if e[0] != "warm"] == [("build:grade", False), ("failed:grade", False)]
    assert slot.calls == 0 and slot.backend.closed == ["grade"]


@pytest.mark.slow
def test_a_real_cpu_grade_rebuilds_from_scratch_outside_the_device_lock(tmp_path):
    """The cpu backend's grade through the scheduler: its fresh-folder build sees the lock free, the evaluation
    holds it, the result is the honest solution's and the grade's build folder is gone afterwards."""
    from cuda_agent.harness.build import default_cache_dir
    from cuda_agent.harness.tasks import load_task_file
    from cuda_agent.plugins.backends._common import KernelBackendConfig
    from cuda_agent.plugins.backends.cpu import CpuBackend
    from tests.backends.conftest import SOLUTIONS, TASKS

    class RecordingCpu(CpuBackend):
        def __init__(self, *a, **kw):
            super().__init__(*a, **kw)
            self.slot = None
            self.builds: list[tuple[Path, bool]] = []
            self.evaluations: list[bool] = []

        def build(self, root, build_dir):
            self.builds.append((Path(build_dir), self.slot.lock.locked()))
            return super().build(root, build_dir)

        def evaluate_built(self, prepared):
            self.evaluations.append(self.slot.lock.locked())
            return super().evaluate_built(prepared)

    backend = RecordingCpu(KernelBackendConfig(build_cache=default_cache_dir(), build_root=tmp_path / "builds"))
    p = DevicePool({0: backend}, build_workers=1)
    slot = p.acquire()
    backend.slot = slot
    try:
        task = load_task_file(TASKS / "swish.py", id="examples/swish", sizes="cpu")
        ws = backend.prepare_workspace(task, tmp_path / "ws")
        import shutil

        shutil.copytree(SOLUTIONS / "cpu" / "swish", ws.root, dirs_exist_ok=True)
        graded = ScheduledBackend(p, slot, EpisodeUsage()).grade(ws, task)
        assert graded.phase == "grade" and graded.status is Status.correct, (graded.summary_for_agent(), graded.model_dump_json()[:3000])
        assert graded.timing is not None and graded.baselines is not None
        (grade_dir, locked), = backend.builds
        assert grade_dir.name.startswith("grade-") and locked is False
        assert not grade_dir.exists()
        assert backend.evaluations == [True]  # the device step alone holds the lock
        assert slot.calls == 1
    finally:
        p.close()


def test_a_device_step_shares_the_device_across_processes_but_never_with_a_timed_batch(tmp_path: Path):
    """Seeds side by side are separate processes: each one's device steps (checks, set making) hold the machine's
    device lock shared, so another process's timed batch waits for them and they wait for it; another process's
    untimed work runs beside them."""
    import subprocess
    import sys
    import time

    from cuda_agent.harness.device_lock import device_timing_lock

    class CpuBackend:
        name, skill, kernel_suffix, kind = "cpu-probe", "cpu", ".cpp", "cpu"

    pool = DevicePool({0: CpuBackend()}, build_workers=1)
    slot = pool.acquire()
    stamp = tmp_path / "timed_in"
    script = ("import sys, time\nfrom cuda_agent.harness.device_lock import device_timing_lock\n"
              "with device_timing_lock('cpu', 0):\n"
              f"    open({str(stamp)!r}, 'w').write(repr(time.time()))\n")
    with pool.on_device(slot, EpisodeUsage()):
        timed = subprocess.Popen([sys.executable, "-c", script])
        time.sleep(1.0)
        assert not stamp.exists()  # the other process's timed batch waits for this device step
        with device_timing_lock("cpu", 0).shared():  # (this thread) untimed work nests in the step's hold
            pass
        step_end = time.time()
    timed.wait(timeout=30)
    assert float(stamp.read_text()) >= step_end
    entered: list[float] = []

    def step() -> None:
        with pool.on_device(slot, EpisodeUsage()):
            entered.append(time.time())

    with device_timing_lock("cpu", 0):  # and a step waits while a timed batch runs (here: this thread's)
        holder = threading.Thread(target=step, daemon=True)
        holder.start()
        holder.join(timeout=0.8)
        assert holder.is_alive() and not entered
        released = time.time()
    holder.join(timeout=30)
    assert entered and entered[0] >= released


class PhasedBackend(LockProbeBackend):
    """Device steps that report evaluator sub-phases and wait at a barrier of ``meet`` steps (when set)."""

    def __init__(self, meet: int = 0) -> None:
        super().__init__()
        self.barrier = threading.Barrier(meet) if meet else None
        self.concurrent = 0
        self.peak = 0
        self._count = threading.Lock()

    def _call(self, phase: str) -> CandidateResult:
        with self._count:
            self.concurrent += 1
            self.peak = max(self.peak, self.concurrent)
        try:
            if self.barrier is not None:
                self.barrier.wait(timeout=5)  # BrokenBarrierError when fewer steps can be inside at once
            result = CandidateResult(task_id="t", phase=phase, status=Status.correct)
            result.diagnostics.phase_s.update({"acquire": 0.25, "forward_calls": 1.5})
            return result
        finally:
            with self._count:
                self.concurrent -= 1


def _steps_at_once(device_steps: int, episodes: int) -> tuple[PhasedBackend, list[BaseException]]:
    backend = PhasedBackend(meet=episodes)
    pool = DevicePool({0: backend}, build_workers=1, device_steps=device_steps)
    backend.slot = pool.slots[0]
    errors: list[BaseException] = []

    def episode() -> None:
        try:
            ScheduledBackend(pool, pool.acquire(), EpisodeUsage()).verify(None, None)
        except BaseException as exc:  # noqa: BLE001 - the barrier's verdict, read by the test
            errors.append(exc)

    threads = [threading.Thread(target=episode) for _ in range(episodes)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    return backend, errors


def test_device_steps_lets_that_many_device_steps_of_one_slot_run_at_once():
    backend, errors = _steps_at_once(device_steps=3, episodes=3)
    assert errors == [] and backend.peak == 3
    backend, errors = _steps_at_once(device_steps=2, episodes=3)  # the third waits: the barrier of 3 breaks
    assert errors and backend.peak == 2


def test_a_pool_refuses_zero_device_steps():
    with pytest.raises(ValueError, match="device_steps must be at least 1, got 0"):
        DevicePool({0: LockProbeBackend()}, build_workers=1, device_steps=0)


def test_device_steps_account_their_sub_phases_per_episode_and_slot(pool):
    slot = pool.acquire()
    slot.backend = PhasedBackend()
    slot.backend.slot = slot
    usage = EpisodeUsage()
    be = ScheduledBackend(pool, slot, usage)
    be.verify(None, None)
    be.profile(None, None)
    be.compile(None, None)  # a build: no device step, no sub-phases
    assert usage.device_phase_s == {"acquire": 0.5, "forward_calls": 3.0}
    assert slot.top_phases(1) == {"forward_calls": 3.0}
    assert usage.build_wait_s >= 0 and usage.warm_wait_s >= 0
