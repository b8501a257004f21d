"""The Triton backend on a CUDA GPU (``pytest -m gpu`` on the H200): the scripted example episodes through
``cuda-agent eval``, five KernelBench problems at full size through ``cuda-agent score`` in KernelBench's Triton
single-file form, the runtime cheats denied, and the timing made by the shared protocol (the cuda backend's)."""

from __future__ import annotations

import json

import pytest
from triton_cheats import RUNTIME
from triton_support import EXAMPLE_TASKS, PACKAGE, REPO, TASKS

from cuda_agent.cli import main as cli_main

pytestmark = [pytest.mark.gpu, pytest.mark.slow]
ON_GPU = ["-o", "plugins.triton.device=cuda"]
KERNELBENCH = REPO / "tests" / "kernelbench" / "data"


@pytest.fixture(autouse=True)
def _needs_cuda():
    import torch

    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU (run 'pytest -m gpu' on the GPU machine)")


@pytest.fixture
def gpu_backend():
    from triton_backend.adapter import TritonBackend, TritonConfig

    backend = TritonBackend(TritonConfig(device="cuda"))
    yield backend
    backend.close()


def test_eval_of_the_scripted_example_episodes(tmp_path):
    out = tmp_path / "eval"
    rc = cli_main(["eval", "--tasks", str(TASKS), "--policy", f"scripted:{PACKAGE / 'trajectories'}/{{task_name}}.yaml",
                   "--backend", "triton", "--turns", "8", "--out", str(out), "-o", "eval.progress=false", *ON_GPU])
    assert rc == 0
    run = json.loads((out / "report" / "report.json").read_text())["runs"][0]
    rows = {r["task_id"].split("/")[-1]: r for r in run["episodes"]}
    assert sorted(rows) == sorted(EXAMPLE_TASKS)
    for name, row in rows.items():
        assert row["selections"]["best"]["regraded"] == "correct", (name, row)
    print(json.dumps({n: r["selections"]["best"] for n, r in rows.items()}, indent=1, default=str))


def test_five_kernelbench_problems_at_full_size(tmp_path):
    out = tmp_path / "score"
    rc = cli_main(["score", str(PACKAGE / "kernelbench"), "--tasks", f"kernelbench:{KERNELBENCH}", "--backend", "triton",
                   "--out", str(out), *ON_GPU])
    report = json.loads((out / "report.json").read_text())
    rows = {r["task"]: r for r in report["tasks"]}
    assert len(rows) == 5 and rc == 0, {n: (r["status"], r["message"][:300]) for n, r in rows.items()}
    for name, row in rows.items():
        assert row["status"] == "correct" and row["kind"] == "single_file" and row["kernelbench"]["sizes"] == "full"
    print(json.dumps({n: {k: r[k] for k in ("status", "candidate_ms", "eager_ms", "speedup_eager")}
                      for n, r in rows.items()}, indent=1))


@pytest.mark.parametrize("name", sorted(RUNTIME))
def test_runtime_cheats_are_denied_on_the_gpu(gpu_backend, probed, tmp_path, name):
    threat, source, status = RUNTIME[name]
    ws = gpu_backend.prepare_workspace(probed("swish"), tmp_path / "ws")
    ws.write("model_new.py", source)
    result = gpu_backend.verify(ws, probed("swish"))
    assert result.status.value == status, (threat, result.status, result.rule, result.message[:300])


def test_timed_by_the_shared_protocol(gpu_backend, probed, tmp_path):
    from cuda_agent.plugin_manager import PluginManager

    ws = gpu_backend.prepare_workspace(probed("swish"), tmp_path / "ws")
    ws.write("model_new.py", (PACKAGE / "solutions" / "swish" / "model_new.py").read_text())
    graded = gpu_backend.grade(ws, probed("swish"))
    assert graded.status.value == "correct", graded.message[:500]
    cuda = PluginManager().registry.build("backend", "cuda")
    try:
        expected = cuda.evaluator().protocol.method_id("cuda")
    finally:
        cuda.close()
    assert graded.timing.method == expected and graded.baselines.eager.method == expected
    assert graded.provenance.backend == "triton" and graded.diagnostics.grade_rounds


@pytest.mark.parametrize("name", ["libdevice_from_extra", "libdevice_from_extra_cuda", "libdevice_module_alias",
                                  "dtype_default"])
def test_libdevice_and_dtype_default_idioms_are_graded_correct_on_the_gpu(gpu_backend, probed, tmp_path, name):
    """Refused statically before session 41's review; the interpreter cannot run libdevice, so they are graded here."""
    from triton_cheats_s41 import HONEST_IDIOMS

    ws = gpu_backend.prepare_workspace(probed("swish"), tmp_path / "ws")
    ws.write("model_new.py", HONEST_IDIOMS[name])
    result = gpu_backend.verify(ws, probed("swish"))
    assert result.status.value == "correct", (name, result.status, result.rule, result.message[:300])



@pytest.mark.parametrize("name", ["kb1_19_relu_autotune.py", "kb1_1_matmul_block_ptr.py",
                                  "ex_gemm_bias_relu_autotune_heuristics.py", "kb1_94_mse_atomic_autotune.py",
                                  "kb1_22_tanh_libdevice.py", "kb1_26_gelu_libdevice.py"])
def test_autotuned_and_libdevice_solutions_of_the_s42_corpus_are_correct_on_the_gpu(gpu_backend, probed, tmp_path, name):
    """Session 42's honest corpus (test_honest_corpus_s42.py): the solutions the interpreter cannot run (autotune asks
    for a GPU driver, libdevice returns None), at reduced sizes; the full checkout's problems need `.kernelbench`."""
    from triton_cheats_s42 import CORPUS, GPU_ONLY, corpus_task

    assert name in GPU_ONLY
    task = corpus_task(name, probed)
    ws = gpu_backend.prepare_workspace(task, tmp_path / "ws")
    ws.write("model_new.py", (CORPUS / name).read_text())
    result = gpu_backend.verify(ws, task)
    assert result.status.value == "correct", (name, result.status, result.rule, result.message[:300])
