"""A profile right after a passing verify of the identical build re-checks fewer sets; staging files round-trip."""

from __future__ import annotations

import pytest


@pytest.mark.slow
def test_profile_after_verify_rechecks_fewer_sets_until_the_build_changes(settings_factory, make_ws, kit, tasks, honest_relu):
    from cuda_agent.harness.evaluator import Evaluator

    with Evaluator("cpu", settings_factory(n_input_sets=3, reverify_sets=1)) as ev:
        ws = make_ws(honest_relu)
        cold = ev.profile(tasks.relu, ws, kit)
        assert cold.status.value == "correct", cold.summary_for_agent()
        assert "reverified_sets" not in cold.extra  # nothing verified before: the full check
        warm = ev.profile(tasks.relu, ws, kit)
        assert warm.status.value == "correct" and warm.extra["reverified_sets"] == 1
        assert warm.timing is not None and warm.timing.samples >= 3
        (ws / "model_new.py").write_text((ws / "model_new.py").read_text() + "\n# edited\n")
        edited = ev.profile(tasks.relu, ws, kit)
        assert "reverified_sets" not in edited.extra  # a changed workspace is a new build


@pytest.mark.slow
def test_wrong_build_is_never_reverified_lightly(settings_factory, make_ws, kit, tasks, honest_relu):
    from cuda_agent.harness.evaluator import Evaluator

    wrong = honest_relu.replace("cuda_extension.relu_forward(x, out)", "cuda_extension.relu_forward(x, out)\n        out.add_(1)")
    with Evaluator("cpu", settings_factory(n_input_sets=3, reverify_sets=1)) as ev:
        ws = make_ws(wrong)
        assert ev.verify(tasks.relu, ws, kit).status.value in ("incorrect", "rejected")
        again = ev.profile(tasks.relu, ws, kit)
        assert again.status.value in ("incorrect", "rejected") and "reverified_sets" not in again.extra


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "int64", "bool"])
def test_staging_files_round_trip_any_layout(tmp_path, dtype):
    import torch

    from cuda_agent.harness._staging import read_tensor_file, write_tensor_file

    dt = getattr(torch, dtype)
    base = (torch.arange(24).reshape(4, 6) % 5).to(dt)
    for i, t in enumerate([base, base.t(), base[:, ::2], base[0, 0], base[:0]]):
        path = tmp_path / f"t{i}.bin"
        n = write_tensor_file(path, t)
        assert n == t.numel() * t.element_size() == path.stat().st_size
        back = read_tensor_file(path, list(t.shape), dt)
        assert back.dtype == dt and back.shape == t.shape and torch.equal(back, t)
    with pytest.raises(ValueError, match="needs"):
        read_tensor_file(tmp_path / "t0.bin", [5, 6], dt)
