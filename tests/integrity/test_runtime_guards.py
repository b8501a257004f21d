"""Runtime guards: real candidate modules run in a subprocess between guard snapshots and under the op audit."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from cuda_agent.harness.integrity.runtime import (
    base_kernel_name,
    compare_guard_snapshot,
    kernel_origin_violations,
    normalize_op,
    op_audit_violations,
)

HERE = Path(__file__).parent

EXPECTED: dict[str, set[str]] = {
    "clean": set(),
    "openmp_pool_honest": set(),
    "timer_perf_counter": {"T8.runtime.timer_patched"},
    "timer_event_elapsed": {"T8.runtime.timer_patched"},
    "timer_synchronize": {"T8.runtime.timer_patched"},
    "timer_module_swap": {"T8.runtime.timer_patched"},
    "checker_allclose": {"T7.runtime.checker_patched"},
    "checker_assert_close": {"T7.runtime.checker_patched"},
    "checker_module_call": {"T7.runtime.checker_patched"},
    "checker_fingerprint": {"T7.runtime.checker_patched"},
    "checker_int_mm": {"T7.runtime.checker_patched"},
    "flag_tf32": {"T16.runtime.flag_changed"},
    "flag_precision": {"T16.runtime.flag_changed"},
    "flag_default_dtype": {"T16.runtime.flag_changed"},
    "env_var": {"T16.runtime.env_changed"},
    "python_thread": {"T10.runtime.thread_started"},
    "native_thread": {"T10.runtime.thread_started"},
    "trace_hook": {"T7.runtime.mode_installed"},
    "torch_function_mode": {"T7.runtime.mode_installed"},
    "audit_callback": {"T1.runtime.aten_compute"},
    "audit_tensor_method": {"T1.runtime.aten_compute"},
    "audit_matmul": {"T1.runtime.aten_compute"},
    "cast_float_noop": set(),
    "cast_half": {"T15.runtime.dtype_cast"},
    "cast_copy_into_half": {"T15.runtime.dtype_cast"},
    "signal_handler": {"T10.runtime.signal_state"},
    "signal_timer": {"T10.runtime.signal_state"},
    "signal_unblock": {"T10.runtime.signal_state"},
}


@pytest.fixture(scope="module")
def scenario_results(compiler) -> dict[str, list[str]]:  # type: ignore[no-untyped-def]
    native = compiler.build(HERE / "cheats" / "runtime" / "native_thread.cpp")
    openmp = compiler.build(HERE / "honest" / "runtime" / "openmp_relu.cpp")
    proc = subprocess.run([sys.executable, str(HERE / "runtime_scenarios.py"), str(native), str(openmp)],
                          capture_output=True, text=True, timeout=1800, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.slow
@pytest.mark.parametrize("scenario", sorted(EXPECTED))
def test_runtime_scenario(scenario: str, scenario_results: dict[str, list[str]]) -> None:
    assert set(scenario_results[scenario]) == EXPECTED[scenario], scenario_results[scenario]


def test_op_audit_allowlist_and_names() -> None:
    assert normalize_op("aten::add.Tensor") == "add"
    assert normalize_op("aten.mm.default") == "mm"
    assert normalize_op("quantized::linear") == "quantized::linear"
    ops = ["aten::empty.memory_format", "aten::view", "aten::copy_", "aten::mm", "aten::mm", "aten::relu"]
    found = {v.message.split("`")[1]: v for v in op_audit_violations(ops, "cpu")}
    assert set(found) == {"mm", "relu"} and "2x" in found["mm"].message
    assert all(v.rule == "T1.runtime.aten_compute" for v in found.values())


def test_op_audit_judges_the_real_dtype_change() -> None:
    # model_new.py's x.float() is left to the audit (an LLM writes it on float32 inputs): a no-op there, a narrowing
    # float64 -> float32 on float64 inputs; fp32 -> fp16/bf16 is refused however it is spelt (to, copy_ into)
    import torch

    from cuda_agent.harness.integrity.runtime import audit_ops

    x = torch.randn(4, 4)
    with audit_ops(kernels=False) as seen:
        x.float(), x.to(torch.float32), x.double()
    assert seen.casts == [("_to_copy", "float32", "float64")]
    assert op_audit_violations(seen, "cpu", seen.casts, "float32") == []
    with audit_ops(kernels=False) as seen:
        x.half(), torch.empty(4, 4, dtype=torch.bfloat16).copy_(x), x.double().float()
    assert [c[2] for c in seen.casts] == ["float16", "bfloat16", "float64", "float32"]
    found = op_audit_violations(seen, "cpu", seen.casts, "float32")
    assert [v.rule for v in found] == ["T15.runtime.dtype_cast"] * 2 and "float32 to float16" in found[0].message
    assert [v.rule for v in op_audit_violations([], "cpu", [("_to_copy", "float64", "float32")], "float64")] == [
        "T15.runtime.dtype_cast"]
    # an fp16 task's kernel computing in fp32 and casting back to the inputs' dtype drops nothing
    assert op_audit_violations([], "cpu", [("_to_copy", "float32", "float16")], "float16") == []


def test_thread_allowance_for_a_new_openmp_runtime() -> None:
    before = {"native_threads": {"1": "python"}, "openmp_runtimes": [], "cpu_count": 2}
    after = {"native_threads": {"1": "python", "7": "python", "8": "python"}, "openmp_runtimes": ["/x/libgomp.so.1"],
             "cpu_count": 2}
    assert compare_guard_snapshot(before, after) == []
    after_no_omp = {**after, "openmp_runtimes": []}
    assert [v.rule for v in compare_guard_snapshot(before, after_no_omp)] == ["T10.runtime.thread_started"]


def test_base_kernel_name() -> None:
    assert base_kernel_name("void relu_kernel<float, 4>(float const*, float*, int)") == "relu_kernel"
    assert base_kernel_name("void ns::k<(anon)>(int)") == "ns::k"
    assert base_kernel_name("ampere_sgemm_128x64_nn") == "ampere_sgemm_128x64_nn"


def test_kernel_origin_uses_the_modules_own_symbols(compiler, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    src = tmp_path / "kernels.cpp"
    src.write_text("namespace mine { void tile_gemm(const float*, float*, int) {} }\n"
                   "template <typename T> void relu_kernel(const T*, T*, int) {}\n"
                   "template void relu_kernel<float>(const float*, float*, int);\n")
    so = compiler.build(src)
    ran = [
        "void relu_kernel<float>(float const*, float*, int)",
        "mine::tile_gemm(float const*, float*, int)",
        "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, std::array<char*, 1ul> >"
        "(int, at::native::FillFunctor<float>, std::array<char*, 1ul>)",
        "Memcpy DtoD (Device -> Device)",
        "ampere_sgemm_128x64_nn",
        "void at::native::elementwise_kernel<128, 2, at::native::GeluCUDAKernelImpl>(int, float)",
    ]
    violations = kernel_origin_violations(ran, so)
    assert [v.rule for v in violations] == ["T1.runtime.foreign_kernel"] * 2
    assert "ampere_sgemm" in violations[0].message and "GeluCUDAKernelImpl" in violations[1].message
