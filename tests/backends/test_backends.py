"""Backends 'cpu' and 'cuda' and the compile/verify/profile tools, through the plugin registry."""

from __future__ import annotations

import importlib.util

import pytest

from cuda_agent.harness.layout import write_layout
from cuda_agent.plugin_manager import PluginManager
from cuda_agent.plugins.backends.cpu import CpuBackend
from cuda_agent.plugins.backends.cuda import CudaBackend
from cuda_agent.plugins.backends._common import KernelBackendConfig
from cuda_agent.protocols import Backend, ToolContext
from cuda_agent.schemas.result import Status

from .conftest import EXAMPLE_TASKS, SOLUTIONS, manifest

HAS_EVALUATOR = importlib.util.find_spec("cuda_agent.harness.evaluator") is not None


def test_backends_and_tools_are_registered():
    pm = PluginManager()
    names = {p.name for p in pm.plugins()}
    assert {"backends.cpu", "backends.cuda", "tools.compile", "tools.verify", "tools.profile"} <= names
    for name, suffix, skill in (("cpu", ".cpp", "cpu"), ("cuda", ".cu", "cuda")):
        backend = pm.registry.get("backend", name).build({})
        assert isinstance(backend, Backend)
        assert backend.kernel_suffix == suffix and backend.skill == skill


def test_availability_and_device_facts_here():
    ok, reason = CpuBackend().availability()
    assert ok and "compiler" in reason
    facts = CpuBackend().device_facts()
    assert facts["backend"] == "cpu" and facts["torch"]
    cuda_ok, cuda_reason = CudaBackend().availability()
    import torch

    if not torch.cuda.is_available():
        assert not cuda_ok and cuda_reason
    assert "nvcc" in CudaBackend().device_facts()


def _copy_solution(ws, name: str, kind: str) -> None:
    base = SOLUTIONS / kind / name
    for path in sorted(base.rglob("*")):
        if path.is_file():
            ws.write(str(path.relative_to(base)), path.read_text())


@pytest.fixture(scope="module")
def cpu_backend(build_cache, tmp_path_factory):
    backend = CpuBackend(KernelBackendConfig(build_cache=build_cache, cpu_sizes=False))
    yield backend
    backend.close()


def test_compile_refuses_cu_on_cpu_naming_the_file(cpu_backend, tmp_path):
    task = manifest("swish")
    ws = write_layout(tmp_path / "ws", task, "cpu")
    ws.write("kernels/swish.cu", "__global__ void k() {}\n")
    result = cpu_backend.compile(ws, task)
    assert result.phase == "compile" and result.status is Status.compile_error
    assert "kernels/swish.cu" in result.summary_for_agent() and "'cpu'" in result.message


def test_compile_tool_reports_errors_with_location(cpu_backend, tmp_path):
    from cuda_agent.plugins.tools.compile import CompileArgs, CompileTool

    task = manifest("swish")
    ws = write_layout(tmp_path / "ws", task, "cpu")
    ws.write("kernels/swish.cpp", "void f() {\n  return 1\n}\n")
    ctx = ToolContext(workspace=ws, task=task, backend=cpu_backend, run_dir=tmp_path, turn=1)
    out = CompileTool().run(CompileArgs(), ctx)
    assert out.is_error and out.result is not None and out.result.status is Status.compile_error
    assert "kernels/swish.cpp:2" in out.content


@pytest.mark.slow
@pytest.mark.parametrize("name", EXAMPLE_TASKS)
def test_every_honest_cpu_solution_compiles(cpu_backend, tmp_path, name):
    task = manifest(name)
    ws = write_layout(tmp_path / "ws", task, "cpu")
    _copy_solution(ws, name, "cpu")
    result = cpu_backend.compile(ws, task)
    assert result.status is Status.correct, result.summary_for_agent()
    assert result.diagnostics.build.steps == 2
    assert cpu_backend.last_build(ws.root) is not None


@pytest.mark.slow
@pytest.mark.skipif(not HAS_EVALUATOR, reason="cuda_agent.harness.evaluator not present yet")
@pytest.mark.parametrize("name", EXAMPLE_TASKS)
def test_every_honest_cpu_solution_verifies_correct(build_cache, tmp_path, name):
    from cuda_agent.harness.tasks import load_task_file

    from .conftest import TASKS

    task = load_task_file(TASKS / f"{name}.py", id=f"examples/{name}", sizes="cpu")
    backend = CpuBackend(KernelBackendConfig(build_cache=build_cache))
    try:
        ws = backend.prepare_workspace(task, tmp_path / "ws")
        _copy_solution(ws, name, "cpu")
        result = backend.verify(ws, task)
        assert result.phase == "verify"
        assert result.status is Status.correct, result.summary_for_agent()
        assert result.snapshot_id and result.snapshot_id.startswith("sha256:")
    finally:
        backend.close()


# ---------------------------------------------------------------------------- GPU (H200)
@pytest.fixture(scope="module")
def cuda_backend(build_cache):
    backend = CudaBackend(KernelBackendConfig(build_cache=build_cache))
    yield backend
    backend.close()


@pytest.mark.gpu
def test_cuda_backend_is_available_and_targets_hopper(cuda_backend):
    ok, reason = cuda_backend.availability()
    assert ok, reason
    facts = cuda_backend.device_facts()
    assert facts["capability"]
    if facts["capability"] == "9.0":
        assert facts["arch"] == "sm_90a"


@pytest.mark.gpu
@pytest.mark.parametrize("name", EXAMPLE_TASKS)
def test_every_honest_cuda_solution_compiles_and_verifies(cuda_backend, tmp_path, name):
    from cuda_agent.harness.tasks import load_task_file

    from .conftest import TASKS

    task = load_task_file(TASKS / f"{name}.py", id=f"examples/{name}", device="cuda")
    ws = cuda_backend.prepare_workspace(task, tmp_path / "ws")
    _copy_solution(ws, name, "cuda")
    compiled = cuda_backend.compile(ws, task)
    assert compiled.status is Status.correct, compiled.summary_for_agent()
    build = cuda_backend.last_build(ws.root)
    assert build is not None and build.arch is not None
    ninja = (build.so_path.parent / "build.ninja").read_text()
    assert f"code={build.arch}" in ninja
    verified = cuda_backend.verify(ws, task)
    assert verified.status is Status.correct, verified.summary_for_agent()


@pytest.mark.gpu
def test_cuda_profile_and_grade_of_an_honest_solution(cuda_backend, tmp_path):
    from cuda_agent.harness.tasks import load_task_file

    from .conftest import TASKS

    task = load_task_file(TASKS / "swish.py", id="examples/swish", device="cuda")
    ws = cuda_backend.prepare_workspace(task, tmp_path / "ws")
    _copy_solution(ws, "swish", "cuda")
    profiled = cuda_backend.profile(ws, task)
    assert profiled.status is Status.correct, profiled.summary_for_agent()
    assert profiled.timing is not None and profiled.speedup_eager is not None
    graded = cuda_backend.grade(ws, task)
    assert graded.phase == "grade" and graded.status is Status.correct, graded.summary_for_agent()
