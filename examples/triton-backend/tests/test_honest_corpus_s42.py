"""Session 42's false-rejection corpus for the Triton backend: 25 honest ``model_new.py`` files (``honest_s42/``),
written the way LLMs, the Triton tutorials and KernelBench's Triton solutions write them, each solving a KernelBench
problem or an example task.

- every file passes the static rules (``check_triton_source``, what ``TritonAdapter.check_sources`` runs);
- the cheats beside each fix these files needed are refused with their rule (``triton_cheats_s42.STATIC_S42``);
- the honest idioms the harness's own allowlist refused pass since its session-42 fixes; one stays refused on purpose;
- end to end on the CPU (Triton's interpreter, reduced sizes): the solutions of vendored KernelBench problems and of
  the example tasks are graded correct; those of the full checkout's problems (``.kernelbench``, when fetched) pass
  verify, autotuned ones included (``interpreter_compat.patch_autotune_bench``: the autotuner asked the absent GPU
  driver to time its configs, "0 active drivers"); libdevice returns None there: those are graded on the GPU
  (``test_gpu.py``).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from triton_cheats_s42 import (CHECKOUT, CORPUS, GPU_ONLY, HARNESS_FALSE_REJECTIONS, PROBLEMS, REFUSED_ON_PURPOSE,
                               STATIC_S42, VENDORED, corpus_task)
from triton_support import TASKS

from cuda_agent.harness.integrity import RULES
from triton_backend.integrity import check_triton_source


def test_the_corpus_is_what_the_table_says():
    files = sorted(p.name for p in CORPUS.glob("*.py"))
    assert files == sorted(PROBLEMS) and 15 <= len(files) <= 25
    for name, (root, problem) in PROBLEMS.items():
        header = (CORPUS / name).read_text().splitlines()[0]
        assert header.startswith("# Solves ") and Path(problem).name.split(".")[0] in header, (name, header)
        if root == "example":
            assert (TASKS / f"{problem}.py").is_file()
        elif root == VENDORED:
            assert (VENDORED / problem).is_file()


@pytest.mark.parametrize("name", sorted(PROBLEMS))
def test_every_honest_solution_passes_the_static_rules(name):
    found = check_triton_source((CORPUS / name).read_text(), "model_new.py")
    assert found.violations == [], [(v.rule, v.line, v.message[:200]) for v in found.violations]
    assert found.kernels


@pytest.mark.parametrize("name", sorted(STATIC_S42))
def test_the_cheats_beside_the_fixes_are_refused_with_their_rule(name):
    source, rule = STATIC_S42[name]
    rules = [v.rule for v in check_triton_source(source).violations]
    assert rule in RULES and rule in rules, (name, rules)


@pytest.mark.parametrize("name", sorted(HARNESS_FALSE_REJECTIONS))
def test_honest_idioms_the_harness_allowlist_refused_now_pass(name):
    source, _ = HARNESS_FALSE_REJECTIONS[name]
    assert check_triton_source(source).violations == []


@pytest.mark.parametrize("name", sorted(REFUSED_ON_PURPOSE))
def test_a_float_annotated_input_handed_to_a_number_parameter_stays_refused(name):
    source, rule = REFUSED_ON_PURPOSE[name]
    assert rule in RULES and rule in [v.rule for v in check_triton_source(source).violations]


def _cpu_cases(kinds: tuple[Path | str, ...]) -> list:  # type: ignore[type-arg]
    cases = []
    for name, (root, _) in sorted(PROBLEMS.items()):
        if root not in kinds or GPU_ONLY.get(name) == "libdevice":
            continue
        cases.append(pytest.param(name, id=name.removesuffix(".py")))
    return cases


@pytest.mark.slow
@pytest.mark.parametrize("name", _cpu_cases(("example", VENDORED)))
def test_solutions_of_vendored_and_example_problems_are_graded_correct_on_the_cpu(cpu_backend, probed, tmp_path, name):
    task = corpus_task(name, probed)
    ws = cpu_backend.prepare_workspace(task, tmp_path / "ws")
    ws.write("model_new.py", (CORPUS / name).read_text())
    graded = cpu_backend.grade(ws, task)
    assert graded.status.value == "correct", (name, graded.status, graded.rule, graded.message[:400])


@pytest.mark.slow
@pytest.mark.parametrize("name", _cpu_cases((CHECKOUT,)))
def test_solutions_of_full_checkout_problems_pass_verify_on_the_cpu(cpu_backend, probed, tmp_path, name):
    task = corpus_task(name, probed)
    ws = cpu_backend.prepare_workspace(task, tmp_path / "ws")
    ws.write("model_new.py", (CORPUS / name).read_text())
    result = cpu_backend.verify(ws, task)
    assert result.status.value == "correct", (name, result.status, result.rule, result.message[:400])
