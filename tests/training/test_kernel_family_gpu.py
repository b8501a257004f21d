"""The kernel family's CUDA expert files on the real CUDA backend: every style is graded correct, a planted compile
bug is reported on the line the synthesized observation names, a wrong formula fails verify."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.gpu


def test_cuda_expert_styles_grade_correct_and_bugs_are_reported(tmp_path) -> None:
    import torch

    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    from cuda_agent.plugin_manager import PluginManager
    from cuda_agent.training.kernel_family.tasks import family_tasks
    from cuda_agent.training.kernel_family.trajectories import compiler_log
    from cuda_agent.training.kernel_family.writer import Bug, Style, write_solution

    train, _, _ = family_tasks(60, 4, seed=5)
    task_obj = next(t for t in train if len(t.chain) == 3 and len(set(t.chain)) == 3)
    backend = PluginManager().registry.build("backend", "cuda", {}, where="backend")
    task = task_obj.manifest("cuda")
    try:
        styles = [Style(fused=True, vector=True, launch="t256"), Style(fused=True, vector=False, launch="narrow"),
                  Style(fused=False, vector=False, launch="t512")]
        for n, style in enumerate(styles):
            ws = backend.prepare_workspace(task, tmp_path / f"ok{n}")
            for path, content in write_solution(task_obj.chain, "cuda", style).files.items():
                ws.write(path, content)
            graded = backend.grade(ws, task)
            assert graded.passed, (style.label, graded.summary_for_agent())
            assert graded.speedup_eager is not None
        sol = write_solution(task_obj.chain, "cuda", Style(), Bug("semicolon", 1))
        ws = backend.prepare_workspace(task, tmp_path / "bug")
        for path, content in sol.files.items():
            ws.write(path, content)
        compiled = backend.compile(ws, task)
        assert compiled.status.value == "compile_error"
        assert compiler_log(sol).splitlines()[0] in compiled.message
        wrong = next(k for k in ("neg", "cos", "atan") if k not in task_obj.chain)
        sol = write_solution(task_obj.chain, "cuda", Style(), Bug("wrong_op", 0, wrong))
        ws = backend.prepare_workspace(task, tmp_path / "wrong")
        for path, content in sol.files.items():
            ws.write(path, content)
        assert backend.verify(ws, task).status.value == "incorrect"
    finally:
        backend.close()
