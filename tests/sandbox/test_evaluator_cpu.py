"""Evaluator on the CPU backend: honest candidates pass, cheats are caught by rule.

Every test runs real processes: a sandboxed runner (bubblewrap where usable)
loading a real built ``cuda_extension``, and the trusted reference process.
"""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.slow

HONEST_RELU = """
import torch
import torch.nn as nn
import cuda_extension


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        out = torch.empty_like(x)
        cuda_extension.relu_forward(x, out)
        return out
"""

HONEST_ADD_RELU = """
import torch
import torch.nn as nn
import cuda_extension


class ModelNew(nn.Module):
    def __init__(self, scale):
        super().__init__()
        self.scale = scale

    def forward(self, a, b):
        s = torch.empty(a.shape, dtype=a.dtype)
        cuda_extension.add_forward(a, b, s)
        r = torch.empty_like(s)
        cuda_extension.relu_forward(s, r)
        scaled = torch.empty_like(s)
        cuda_extension.scale_forward(s, scaled, self.scale)
        return r, scaled
"""


def _relu_variant(body: str, prelude: str = "") -> str:
    return f"""
import torch
import torch.nn as nn
import cuda_extension
{prelude}

class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
{body}
"""


def test_honest_relu_passes_verify(cpu_evaluator, make_ws, kit, tasks) -> None:  # type: ignore[no-untyped-def]
    r = cpu_evaluator.verify(tasks.relu, make_ws(HONEST_RELU), kit)
    assert r.status.value == "correct", r.summary_for_agent()
    assert r.phase == "verify" and r.rule is None
    assert len(r.seeds) == 3 and len(set(r.seeds)) == 3
    assert r.isolation in ("bwrap", "process")
    assert r.provenance.torch


def test_honest_multi_output_several_kernels_passes(cpu_evaluator, make_ws, kit, tasks) -> None:  # type: ignore[no-untyped-def]
    r = cpu_evaluator.verify(tasks.add_relu, make_ws(HONEST_ADD_RELU, tasks.add_relu.code), kit)
    assert r.status.value == "correct", r.summary_for_agent()


def test_profile_times_and_second_profile_hits_baseline_cache(cpu_evaluator, make_ws, kit, tasks) -> None:  # type: ignore[no-untyped-def]
    ws = make_ws(HONEST_RELU)
    first = cpu_evaluator.profile(tasks.relu, ws, kit)
    assert first.status.value == "correct", first.summary_for_agent()
    assert first.timing is not None and first.timing.samples >= 5
    assert first.timing.wall_ms is not None and first.timing.wall_ms >= first.timing.median_ms
    assert first.baselines is not None and first.baselines.eager is not None
    assert first.speedup_eager is not None and first.speedup_eager > 0
    # where the forward calls' seconds went: the runner's parts and the round trip add up to the phase's wall
    work, calls_s = first.diagnostics.call_work_s, first.diagnostics.phase_s["forward_calls"]
    assert set(work) == {"copy_inputs", "poison", "timed", "outputs", "input_fingerprints", "round_trip"}
    assert all(v >= 0 for v in work.values()) and work["timed"] > 0
    assert sum(work.values()) == pytest.approx(calls_s, rel=0.05, abs=0.01)
    hits = cpu_evaluator.cache.hits
    second = cpu_evaluator.profile(tasks.relu, ws, kit)
    assert second.status.value == "correct"
    assert second.diagnostics.baselines_cached is True
    assert cpu_evaluator.cache.hits > hits
    assert second.baselines.ids["eager"] == first.baselines.ids["eager"]
    assert set(second.seeds).isdisjoint(first.seeds)


def test_wrong_result_is_incorrect_with_actionable_report(cpu_evaluator, make_ws, kit, tasks) -> None:  # type: ignore[no-untyped-def]
    code = _relu_variant("        out = torch.empty_like(x)\n        cuda_extension.scale_forward(x, out, 1.0)\n        return out")
    r = cpu_evaluator.verify(tasks.relu, make_ws(code), kit)
    assert r.status.value == "incorrect"
    tol = [e for e in r.errors if e.check == "tolerance"]
    assert tol and "max abs error" in tol[0].message and "atol=0.01" in tol[0].message
    assert tol[0].details["mismatched"] > 0
    assert "input set" in r.message


def test_nan_output_never_passes(cpu_evaluator, make_ws, kit, tasks) -> None:  # type: ignore[no-untyped-def]
    code = _relu_variant("        out = torch.empty_like(x)\n        cuda_extension.scale_forward(x, out, float('nan'))\n        return out")
    r = cpu_evaluator.verify(tasks.relu, make_ws(code), kit)
    assert r.status.value == "incorrect"
    assert any(e.check == "nan" for e in r.errors)


def test_returning_the_input_is_rejected(cpu_evaluator, make_ws, kit, tasks) -> None:  # type: ignore[no-untyped-def]
    code = _relu_variant("        return x")
    r = cpu_evaluator.verify(tasks.relu, make_ws(code), kit)
    assert r.status.value == "rejected"
    assert r.rule is not None and r.rule.startswith("T19")


def test_view_of_input_is_rejected(cpu_evaluator, make_ws, kit, tasks) -> None:  # type: ignore[no-untyped-def]
    code = _relu_variant("        cuda_extension.relu_forward(x, x)\n        return x.view(x.shape)")
    r = cpu_evaluator.verify(tasks.relu, make_ws(code), kit)
    assert r.status.value == "rejected" and r.rule.startswith("T19")


def test_tensor_subclass_output_is_rejected(cpu_evaluator, make_ws, kit, tasks) -> None:  # type: ignore[no-untyped-def]
    prelude = "class Fake(torch.Tensor):\n    pass\n"
    code = _relu_variant(
        "        out = torch.empty_like(x)\n        cuda_extension.relu_forward(x, out)\n        return out.as_subclass(Fake)",
        prelude,
    )
    r = cpu_evaluator.verify(tasks.relu, make_ws(code), kit)
    assert r.status.value == "rejected" and r.rule.startswith("T11")


def test_input_mutation_is_detected(cpu_evaluator, make_ws, kit, tasks) -> None:  # type: ignore[no-untyped-def]
    code = _relu_variant(
        "        out = torch.empty_like(x)\n        cuda_extension.relu_forward(x, out)\n"
        "        cuda_extension.scale_forward(x, x, 0.0)\n        return out"
    )
    r = cpu_evaluator.verify(tasks.relu, make_ws(code), kit)
    assert r.status.value == "rejected" and r.rule.startswith("T5")


def test_patching_allclose_has_no_effect(cpu_evaluator, make_ws, kit, tasks) -> None:  # type: ignore[no-untyped-def]
    prelude = "torch.allclose = lambda *a, **k: True\ntorch.testing.assert_close = lambda *a, **k: None\n"
    code = _relu_variant("        return torch.zeros(x.shape)", prelude)
    r = cpu_evaluator.verify(tasks.relu, make_ws(code), kit)
    assert r.status.value != "correct"


def test_timer_patching_is_detected(cpu_evaluator, make_ws, kit, tasks) -> None:  # type: ignore[no-untyped-def]
    prelude = "import time\n_t = [0.0]\ndef _fake():\n    _t[0] += 1e-9\n    return _t[0]\ntime.perf_counter = _fake\n"
    code = _relu_variant("        out = torch.empty_like(x)\n        cuda_extension.relu_forward(x, out)\n        return out", prelude)
    r = cpu_evaluator.verify(tasks.relu, make_ws(code), kit)
    assert r.status.value == "rejected" and r.rule.startswith("T8")


def test_thread_left_running_is_detected(cpu_evaluator, make_ws, kit, tasks) -> None:  # type: ignore[no-untyped-def]
    prelude = "import threading\n_stop = threading.Event()\n"
    body = (
        "        out = torch.empty_like(x)\n"
        "        cuda_extension.relu_forward(x, out)\n"
        "        if not getattr(self, '_t', None):\n"
        "            self._t = threading.Thread(target=_stop.wait, daemon=True)\n"
        "            self._t.start()\n"
        "        return out"
    )
    r = cpu_evaluator.verify(tasks.relu, make_ws(_relu_variant(body, prelude)), kit)
    assert r.status.value == "rejected" and r.rule.startswith("T10")


def test_memoising_by_data_ptr_is_caught(cpu_evaluator, make_ws, kit, tasks) -> None:  # type: ignore[no-untyped-def]
    prelude = "_memo = {}\n"
    body = (
        "        key = (x.data_ptr(), tuple(x.shape))\n"
        "        if key not in _memo:\n"
        "            out = torch.empty_like(x)\n"
        "            cuda_extension.relu_forward(x, out)\n"
        "            _memo[key] = out\n"
        "        return _memo[key].clone()"
    )
    r = cpu_evaluator.verify(tasks.relu, make_ws(_relu_variant(body, prelude)), kit)
    # The first set computes honestly; later sets reuse the same address with other data.
    assert r.status.value in ("incorrect", "rejected"), r.summary_for_agent()


def test_import_error_is_reported(cpu_evaluator, make_ws, kit, tasks) -> None:  # type: ignore[no-untyped-def]
    r = cpu_evaluator.verify(tasks.relu, make_ws("import nonexistent_module_xyz\n"), kit)
    assert r.status.value == "error"
    assert "nonexistent_module_xyz" in r.message


def test_grade_uses_fresh_seeds_and_alternates(cpu_evaluator, make_ws, kit, tasks) -> None:  # type: ignore[no-untyped-def]
    ws = make_ws(HONEST_RELU)
    v = cpu_evaluator.verify(tasks.relu, ws, kit)
    g = cpu_evaluator.grade(tasks.relu, ws, kit)
    assert g.phase == "grade" and g.status.value == "correct", g.summary_for_agent()
    assert set(g.seeds).isdisjoint(v.seeds)
    assert g.timing is not None and g.baselines is not None and g.baselines.eager is not None
    assert g.diagnostics.grade_rounds == cpu_evaluator.protocol.grade_rounds
    assert g.speedup_eager is not None and g.speedup_eager > 0
    # the reference's own batches of this grade: as many eager calls as eager samples plus warm-ups, no others
    host = g.diagnostics.baseline_host
    assert host["eager"]["calls"] >= g.baselines.eager.samples and "alloc_retries" not in host["eager"]  # CPU
    again = cpu_evaluator.grade(tasks.relu, ws, kit).diagnostics.baseline_host
    assert again["eager"]["calls"] == host["eager"]["calls"]  # taken per grade, not summed over the process


def test_grade_of_wrong_candidate_has_no_speedup(cpu_evaluator, make_ws, kit, tasks) -> None:  # type: ignore[no-untyped-def]
    code = _relu_variant("        return torch.zeros(x.shape)")
    g = cpu_evaluator.grade(tasks.relu, make_ws(code), kit)
    assert g.status.value in ("incorrect", "rejected")
    assert g.speedup_eager is None and g.timing is None


def test_release_profiler_sum_preset(make_evaluator, make_ws, kit, tasks) -> None:  # type: ignore[no-untyped-def]
    with make_evaluator(timing={"preset": "release"}) as ev:
        r = ev.profile(tasks.relu, make_ws(HONEST_RELU), kit)
    assert r.status.value == "correct", r.summary_for_agent()
    assert r.timing is not None and r.timing.method == "profiler_sum"
    assert r.baselines is not None and r.baselines.eager is not None and r.baselines.eager.method == "profiler_sum"
    assert r.baselines.ids["eager"] != ""


def test_net_timing_calibrates_under_the_lock_before_the_candidate_loads(settings_factory, make_ws, kit, tasks) -> None:  # type: ignore[no-untyped-def]
    """With ``net_overhead`` the protocol's cost is asked for under the timing lock, before ``load``; the runner
    refuses to calibrate once candidate code is in it (a loaded candidate could slow its null calls and so lower
    every time it reports). CPU evaluator with the CUDA-only switch forced on: the runner's cost is 0 here."""
    import dataclasses
    import secrets

    from cuda_agent.harness import messages as m
    from cuda_agent.harness.evaluator import Evaluator
    from cuda_agent.harness.runner_client import CandidateFailed, RunnerClient
    from cuda_agent.harness.session import Session

    class Recording(Evaluator):
        def context(self, phase):  # type: ignore[no-untyped-def]
            return dataclasses.replace(super().context(phase), net_overhead=True)  # the CUDA-only switch, forced

    settings, experiments = settings_factory()
    ev = Recording("cpu", settings, experiments=experiments)
    requests: list[tuple[str, bool]] = []
    try:
        r = ev.profile(tasks.relu, make_ws(HONEST_RELU), kit)
        assert r.status.value == "correct", r.summary_for_agent()
        assert r.diagnostics.timing_overhead_ms == 0.0 and "calibrate" in r.diagnostics.phase_s
        assert 0 < r.diagnostics.runner_start_s < 600  # spawn to ready: the runner's own clock, the same machine's
        # where that start went, phase by phase, as the runner's ready reply said
        assert list(r.diagnostics.runner_start_phases)[:3] == ["interpreter", "setup", "imports"]
        assert 0 < r.diagnostics.runner_start_cpu_s < 600
        assert r.diagnostics.runner_spin_recalibrated.model_dump() == {"preroll_us": 0.0, "cycles_per_us": 0.0,
                                                                      "probes_ms": []}
        # the same protocol by hand: calibrate is refused after load
        ref = ev.references.acquire(tasks.relu)
        proc = ev.runners("profile").acquire()
        real_request = proc.request

        def request(timeout_s, req):  # type: ignore[no-untyped-def]
            requests.append((req.op, ev.lock.held_exclusive()))
            return real_request(timeout_s, req)

        proc.request = request  # type: ignore[method-assign]
        runner = RunnerClient(proc, call_timeout_s=60, load_timeout_s=60, request_timeout_s=60)
        sess = Session(ev.context("profile"), tasks.relu, runner, ref)
        try:
            sess.open(make_ws(HONEST_RELU), kit, [secrets.randbits(31)], timing=True)
            with pytest.raises(CandidateFailed, match="before load"):
                runner.calibrate()
        finally:
            ev.runners("profile").release(proc)
            ev.references.release(ref)
    finally:
        ev.close()
    assert requests[0] == (m.Calibrate.op, True) and requests[1] == (m.Load.op, False)


def test_weakened_integrity_is_stamped_on_tool_results_and_grading_keeps_the_defaults(make_evaluator, make_ws, kit,
                                                                                      tasks) -> None:  # type: ignore[no-untyped-def]
    with make_evaluator(integrity={"isolation": "process", "determinism_check": False}) as ev:
        ws = make_ws(HONEST_RELU)
        v = ev.verify(tasks.relu, ws, kit)
        g = ev.grade(tasks.relu, ws, kit)
        graded_isolation = ev.runners("grade").isolation
    assert v.status.value == "correct" and g.status.value == "correct", (v.summary_for_agent(), g.summary_for_agent())
    assert v.integrity_weakened == ["isolation=process", "determinism_check=false"] and v.isolation == "process"
    assert g.integrity_weakened == [] and g.isolation == graded_isolation  # bubblewrap wherever it is usable


def test_a_requested_sanitizer_that_cannot_run_is_a_harness_error(make_evaluator) -> None:  # type: ignore[no-untyped-def]
    from cuda_agent.harness.sanitizer import SanitizerUnavailable

    with pytest.raises(SanitizerUnavailable, match="needs the cuda backend"):
        make_evaluator(integrity={"sanitizer": "memcheck"})


def test_a_sessions_sets_are_dropped_after_its_verdict_and_before_the_evaluator_closes(
        cpu_evaluator, make_ws, kit, tasks, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """The drop of a session's sets runs on a cleanup thread after the verdict is returned, holding the reference
    until it is done; the reference's peak is read before the verdict (``reference_peak``), and
    :meth:`Evaluator.wait_cleanups` waits for the drop."""
    import threading

    from cuda_agent.harness import session_run

    drops: list[tuple[str, int]] = []
    real_drop = session_run._drop_sets

    def recording_drop(evaluator, sess):  # type: ignore[no-untyped-def]
        drops.append((threading.current_thread().name, sess.reference.users))
        return real_drop(evaluator, sess)

    monkeypatch.setattr(session_run, "_drop_sets", recording_drop)
    r = cpu_evaluator.verify(tasks.relu, make_ws(HONEST_RELU), kit)
    assert r.status.value == "correct", r.summary_for_agent()
    assert "reference_peak" in r.diagnostics.phase_s and "drop_sets" not in r.diagnostics.phase_s
    # Where a session's seconds went before it opened: its memory reservation and its reference process.
    assert r.diagnostics.phase_s["memory_wait"] >= 0 and r.diagnostics.phase_s["reference"] > 0
    cpu_evaluator.wait_cleanups()
    assert drops == [("session-cleanup", 1)]  # on the cleanup thread, the reference still counted as in use
    ref = cpu_evaluator.references.warm(tasks.relu)
    assert ref is not None and ref.users == 0  # released once the drop was done


def test_two_sessions_of_one_task_never_overlap_on_its_reference_process(
        cpu_evaluator, make_ws, kit, tasks, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Two verify calls of the same task at once (``device_steps`` > 1, or two episodes of one task): the second
    session opens its sets only after the first one's deferred drop ended (the reference's leak probe, peak and
    input checks are process-wide), and both verdicts are right."""
    import threading
    import time

    from cuda_agent.harness import session_run
    from cuda_agent.harness.session import Session

    events: list[tuple[str, float]] = []
    real_drop, real_open = session_run._drop_sets, Session.open

    def recording_drop(evaluator, sess):  # type: ignore[no-untyped-def]
        try:
            return real_drop(evaluator, sess)
        finally:
            events.append(("dropped", time.monotonic()))

    def recording_open(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        events.append(("open", time.monotonic()))
        out = real_open(self, *args, **kwargs)
        if len(events) == 1:  # the first session keeps its sets a while: long enough for the second to start
            time.sleep(6.0)
        return out

    monkeypatch.setattr(session_run, "_drop_sets", recording_drop)
    monkeypatch.setattr(Session, "open", recording_open)
    results: list = []
    threads = [threading.Thread(target=lambda: results.append(cpu_evaluator.verify(tasks.relu, make_ws(HONEST_RELU), kit)))
               for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    cpu_evaluator.wait_cleanups()
    assert [r.status.value for r in results] == ["correct", "correct"]
    assert [e for e, _ in sorted(events, key=lambda e: e[1])] == ["open", "dropped", "open", "dropped"]
