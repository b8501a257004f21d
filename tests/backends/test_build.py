"""build_extension: incremental ninja, shared binding object, slim and release-style bindings, errors."""

from __future__ import annotations

import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from cuda_agent.harness._build_log import parse_errors, trim_log
from cuda_agent.harness._toolchain import find_nvcc, gencode_flags, normalize_arch
from cuda_agent.harness.build import build_extension

from .conftest import solution_workspace


def run_module(so_path: Path, code: str) -> str:
    """Run ``code`` in a fresh interpreter with the built module importable; return stdout."""
    prelude = f"import sys; sys.path.insert(0, {str(so_path.parent)!r}); import torch, cuda_extension\n"
    proc = subprocess.run([sys.executable, "-c", prelude + textwrap.dedent(code)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout


@pytest.fixture(scope="session")
def swish_build(tmp_path_factory, build_cache):
    """The honest CPU swish solution, built once: (workspace root, build dir, first outcome)."""
    base = tmp_path_factory.mktemp("swish")
    solution_workspace(base / "ws", "swish", "cpu")
    outcome = build_extension(base / "ws", "cpu", base / "build", cache_dir=build_cache)
    return base / "ws", base / "build", outcome


@pytest.mark.slow
def test_first_build_compiles_every_kernel_and_imports(swish_build):
    root, build_dir, outcome = swish_build
    assert outcome.ok, outcome.log
    assert outcome.steps == 2  # swish.cpp + swish_binding.cpp
    assert outcome.so_path == build_dir / "cuda_extension.so"
    ninja = (build_dir / "build.ninja").read_text()
    # The binding TU force-includes the precompiled binding_registry.h (gcc PCH), the kernel TU does not.
    edges = {block.split("\n", 1)[0].rsplit("/", 1)[-1]: block for block in ninja.split("\nbuild ")[1:]}
    binding_edge, kernel_edge = edges["swish_binding.cpp"], edges["swish.cpp"]
    assert "-include" not in kernel_edge
    assert "-include" in binding_edge and "binding_registry.h" in binding_edge
    assert (Path(binding_edge.split("-include ")[1].split()[0] + ".gch")).is_file()
    out = run_module(
        outcome.so_path,
        """
        x = torch.randn(1000, 37)
        y = torch.empty_like(x)
        cuda_extension.swish_forward(x, y)
        print(float((y - x * torch.sigmoid(x)).abs().max()))
        """,
    )
    assert float(out) < 1e-5


@pytest.mark.slow
def test_incremental_build_recompiles_only_what_changed(swish_build, build_cache):
    root, build_dir, first = swish_build
    assert first.ok, first.log
    again = build_extension(root, "cpu", build_dir, cache_dir=build_cache)
    assert again.ok and again.steps == 0
    kernel = root / "kernels" / "swish.cpp"
    kernel.write_text(kernel.read_text() + "\n// touched\n")
    touched = build_extension(root, "cpu", build_dir, cache_dir=build_cache)
    assert touched.ok and touched.steps == 1
    assert build_extension(root, "cpu", build_dir, cache_dir=build_cache).steps == 0


@pytest.mark.slow
def test_binding_object_is_shared_across_workspaces(swish_build, tmp_path, build_cache):
    _, _, first = swish_build
    obj = first.binding_object
    assert obj is not None and obj.is_file()
    before = obj.stat().st_mtime_ns
    solution_workspace(tmp_path / "ws", "row_sum", "cpu")
    other = build_extension(tmp_path / "ws", "cpu", tmp_path / "build", cache_dir=build_cache)
    assert other.ok, other.log
    assert other.binding_object == obj and obj.stat().st_mtime_ns == before
    assert other.steps == 2  # the two kernel TUs only; binding.cpp was not recompiled


# A release-style binding (torch/extension.h, a pybind11 module hook) is built and graded by
# tests/kernelbench/test_conventions.py (the release convention) and, on CUDA, tests/kernelbench/test_release_binary_cheats.py.

SLIM_MULTI_BINDING = """
#include "../binding_registry.h"
#include <tuple>

void scale_cpu(const float* x, float* y, int64_t n, float a);

// Several entry points and value kinds through the slim header.
int64_t count(const at::Tensor& x) { return x.numel(); }
std::tuple<at::Tensor, at::Tensor> scale_into(const at::Tensor& x, const at::Tensor& y, double a) {
  scale_cpu(x.const_data_ptr<float>(), y.mutable_data_ptr<float>(), x.numel(), static_cast<float>(a));
  return {x, y};
}
std::vector<int64_t> shape_of(std::vector<at::Tensor> xs) {
  std::vector<int64_t> out;
  for (auto& t : xs) out.push_back(t.dim());
  return out;
}
REGISTER_BINDING(count, count);
REGISTER_BINDING_DOC(scale_into, scale_into, "y = a * x; returns (x, y)");
REGISTER_BINDING(shape_of, shape_of);
"""

SCALE_KERNEL = """
#include <cstdint>
void scale_cpu(const float* x, float* y, int64_t n, float a) {
  for (int64_t i = 0; i < n; ++i) y[i] = a * x[i];
}
"""


def _scale_workspace(root: Path, binding: str) -> None:
    solution_workspace(root, "swish", "cpu")
    for f in (root / "kernels").iterdir():
        f.unlink()
    (root / "kernels" / "scale.cpp").write_text(SCALE_KERNEL)
    (root / "kernels" / "scale_binding.cpp").write_text(binding)


@pytest.mark.slow
def test_slim_binding_supports_several_functions_and_value_kinds(tmp_path, build_cache):
    _scale_workspace(tmp_path / "ws", SLIM_MULTI_BINDING)
    outcome = build_extension(tmp_path / "ws", "cpu", tmp_path / "build", cache_dir=build_cache)
    assert outcome.ok, outcome.log
    out = run_module(
        outcome.so_path,
        """
        x = torch.arange(6, dtype=torch.float32); y = torch.empty_like(x)
        a, b = cuda_extension.scale_into(x, y, 2.5)
        assert a is not None and torch.equal(b, 2.5 * x), b
        print(cuda_extension.count(x), cuda_extension.shape_of([x, x.view(2, 3)]))
        try:
            cuda_extension.count(3)
        except Exception as exc:
            print(type(exc).__name__, "argument 0 must be a Tensor" in str(exc))
        """,
    )
    lines = out.splitlines()
    assert lines[0] == "6 [1, 2]"
    assert lines[1].endswith("True")


def test_compile_errors_are_located_and_trimmed(tmp_path, build_cache):
    solution_workspace(tmp_path / "ws", "swish", "cpu")
    (tmp_path / "ws" / "kernels" / "swish.cpp").write_text("#include <cstdint>\nvoid f() {\n  int x = ;\n  undefined_call();\n}\n")
    (tmp_path / "ws" / "kernels" / "swish_binding.cpp").unlink()
    outcome = build_extension(tmp_path / "ws", "cpu", tmp_path / "build", cache_dir=build_cache)
    assert not outcome.ok and outcome.so_path is None
    assert outcome.errors[0].file == "kernels/swish.cpp" and outcome.errors[0].line == 3
    assert any(e.line == 4 for e in outcome.errors)
    assert "kernels/swish.cpp:3" in outcome.log
    assert str(tmp_path) not in outcome.log  # paths shown relative to the workspace
    assert len(outcome.log) <= 3000


def test_cu_file_in_cpu_workspace_is_refused_by_name(tmp_path, build_cache):
    solution_workspace(tmp_path / "ws", "swish", "cpu")
    (tmp_path / "ws" / "kernels" / "extra.cu").write_text("__global__ void k() {}\n")
    outcome = build_extension(tmp_path / "ws", "cpu", tmp_path / "build", cache_dir=build_cache)
    assert not outcome.ok and outcome.steps == 0
    assert outcome.errors[0].file == "kernels/extra.cu"
    assert "'cuda' backend" in outcome.log and "'cpu'" in outcome.log


def test_edited_protected_binding_is_refused(tmp_path, build_cache):
    solution_workspace(tmp_path / "ws", "swish", "cpu")
    (tmp_path / "ws" / "binding_registry.h").write_text("#pragma once\n")
    outcome = build_extension(tmp_path / "ws", "cpu", tmp_path / "build", cache_dir=build_cache)
    assert not outcome.ok
    assert outcome.errors[0].file == "binding_registry.h" and "protected" in outcome.log


def test_compile_timeout_is_reported(tmp_path, build_cache, swish_build):
    solution_workspace(tmp_path / "ws", "softmax", "cpu")
    outcome = build_extension(tmp_path / "ws", "cpu", tmp_path / "build", cache_dir=build_cache, timeout_s=0.05)
    assert not outcome.ok
    assert "timed out" in outcome.log


def test_arch_normalisation_and_gencode():
    assert normalize_arch("90a") == "sm_90a"
    assert normalize_arch("9.0") == "sm_90"
    assert normalize_arch("compute_90a") == "sm_90a"
    flags = gencode_flags("sm_90a")
    assert "-gencode=arch=compute_90a,code=sm_90a" in flags
    with pytest.raises(ValueError, match="not understood"):
        normalize_arch("hopper")


def test_log_parsing_handles_gcc_nvcc_and_linker_lines():
    text = "\n".join(
        [
            "[1/2] NVCC kernels/a.cu",
            "kernels/a.cu(12): error: identifier \"foo\" is undefined",
            "kernels/b.cpp:3:5: error: expected ';' before '}' token",
            "    3 |   int x",
            "/usr/bin/ld: obj.o: undefined reference to `bar()'",
        ]
    )
    errors = parse_errors(text)
    assert [(e.file, e.line) for e in errors] == [("kernels/a.cu", 12), ("kernels/b.cpp", 3), (None, None)]
    trimmed = trim_log(text, max_errors=2)
    assert "[1/2]" not in trimmed and "1 more errors not shown" in trimmed


@pytest.mark.slow
@pytest.mark.skipif(find_nvcc() is None, reason="needs nvcc")
def test_cuda_build_path_compiles_cu_objects_with_nvcc(tmp_path, build_cache):
    solution_workspace(tmp_path / "ws", "swish", "cuda")
    outcome = build_extension(
        tmp_path / "ws", "cuda", tmp_path / "build", arch="sm_90a", cache_dir=build_cache, link=False
    )
    assert outcome.ok, outcome.log
    assert outcome.steps == 2 and outcome.arch == "sm_90a"
    objs = sorted(p.name for p in (tmp_path / "build").rglob("*.o"))
    assert objs == ["swish.cu.o", "swish_binding.cpp.o"]
    ninja = (tmp_path / "build" / "build.ninja").read_text()
    assert "-gencode=arch=compute_90a,code=sm_90a" in ninja
    again = build_extension(tmp_path / "ws", "cuda", tmp_path / "build", arch="sm_90a", cache_dir=build_cache, link=False)
    assert again.steps == 0
    cu = tmp_path / "ws" / "kernels" / "swish.cu"
    cu.write_text(cu.read_text() + "\n// touched\n")
    assert build_extension(tmp_path / "ws", "cuda", tmp_path / "build", arch="sm_90a", cache_dir=build_cache, link=False).steps == 1


@pytest.mark.slow
@pytest.mark.skipif(find_nvcc() is None, reason="needs nvcc")
def test_cuda_compile_error_in_cu_is_located(tmp_path, build_cache):
    solution_workspace(tmp_path / "ws", "swish", "cuda")
    (tmp_path / "ws" / "kernels" / "swish.cu").write_text("__global__ void k(float* x) {\n  x[0] = undefined_name;\n}\n")
    outcome = build_extension(tmp_path / "ws", "cuda", tmp_path / "build", arch="sm_90a", cache_dir=build_cache, link=False)
    assert not outcome.ok
    assert any(e.file == "kernels/swish.cu" and e.line == 2 for e in outcome.errors), outcome.log


def test_compiler_cannot_read_hidden_harness_folders(tmp_path, build_cache, swish_build):
    from cuda_agent.harness._build_sandbox import bwrap_usable

    if not bwrap_usable():
        pytest.skip("bubblewrap cannot create namespaces here")
    secret = tmp_path / "harness-state"
    secret.mkdir()
    (secret / "expected.h").write_text("#define EXPECTED 42\n")
    solution_workspace(tmp_path / "ws", "swish", "cpu")
    (tmp_path / "ws" / "kernels" / "swish.cpp").write_text(f'#include "{secret}/expected.h"\nint leak() {{ return EXPECTED; }}\n')
    outcome = build_extension(tmp_path / "ws", "cpu", tmp_path / "build", cache_dir=build_cache, hidden=(secret,))
    assert not outcome.ok and outcome.isolation == "bwrap"
    assert "expected.h" in outcome.log and "No such file" in outcome.log


def _needed(so: Path) -> list[str]:
    out = subprocess.run(["readelf", "-d", str(so)], capture_output=True, text=True, check=True).stdout
    return [line.split("[", 1)[1].rstrip("]") for line in out.splitlines() if "(NEEDED)" in line]


def _undefined(so: Path) -> set[str]:
    out = subprocess.run(["nm", "-D", "--undefined-only", str(so)], capture_output=True, text=True, check=True).stdout
    return {line.split()[-1].split("@")[0] for line in out.splitlines() if line.split()}


@pytest.mark.slow
def test_link_reads_torch_stand_ins_yet_the_module_is_the_same(swish_build, tmp_path):
    """The link reads empty stand-ins of the torch libraries (same SONAME) instead of libtorch_cpu & co.

    The module records the same torch libraries as DT_NEEDED, imports the same undefined symbols
    (what the binary integrity rules read) as one linked against the real libraries, and runs
    (test_first_build_compiles_every_kernel_and_imports imports this very build).
    """
    import shlex

    from cuda_agent.harness._toolchain import make_toolchain

    root, build_dir, outcome = swish_build
    assert outcome.ok, outcome.log
    ninja = (build_dir / "build.ninja").read_text()
    ldflags = shlex.split(next(line.split(" = ", 1)[1] for line in ninja.splitlines() if line.startswith("ldflags = ")))
    stand_ins = [Path(f) for f in ldflags if "/linkstubs/" in f]
    assert {p.name for p in stand_ins} >= {"libc10.so", "libtorch_cpu.so", "libtorch_python.so"}
    assert "-ltorch_cpu" not in ldflags and all(p.stat().st_size < 100_000 for p in stand_ins)
    needed = _needed(outcome.so_path)
    assert {"libc10.so", "libtorch_cpu.so", "libtorch_python.so"} <= set(needed)
    # The same objects linked against the real libraries: same imports.
    real = tmp_path / "real.so"
    objects = [*sorted((build_dir / "obj").rglob("*.o")), outcome.binding_object]
    toolchain = make_toolchain("cpu")
    subprocess.run([toolchain.cxx, "-shared", *map(str, objects), "-o", str(real), *toolchain.ld_flags], check=True)
    assert _undefined(outcome.so_path) == _undefined(real)
    assert {n for n in needed if "torch" in n or "c10" in n} <= set(_needed(real)) | {"libtorch.so"}


def test_linker_choice_follows_the_environment(tmp_path, monkeypatch):
    from cuda_agent.harness._toolchain import LINKER_ENV, linker_flags

    cxx = shutil.which("c++") or shutil.which("g++")
    if cxx is None:
        pytest.skip("needs a C++ compiler")
    linker_flags.cache_clear()
    monkeypatch.setenv(LINKER_ENV, "default")
    assert linker_flags(cxx) == ()
    linker_flags.cache_clear()
    monkeypatch.setenv(LINKER_ENV, "no-such-linker")
    assert linker_flags(cxx) == ()  # a linker the compiler cannot use is dropped, not passed on
    linker_flags.cache_clear()
    monkeypatch.delenv(LINKER_ENV)
    probe = tmp_path / "p.cpp"
    probe.write_text("#include <string>\nstd::string f(int v) { return std::to_string(v); }\n")
    gold = subprocess.run([cxx, "-fuse-ld=gold", "-shared", "-fPIC", str(probe), "-o", str(tmp_path / "p.so")],
                          capture_output=True)
    assert linker_flags(cxx) == (("-fuse-ld=gold",) if gold.returncode == 0 else ())
    linker_flags.cache_clear()


def test_gold_is_not_chosen_when_it_cannot_link_the_cpp_runtime(tmp_path, monkeypatch):
    """The H200 image's case: a libstdc++.so that is listed in a library folder but cannot be opened. bfd skips
    it, gold fails every C++ link on it (while a C-only link with gold works): the probe must see that."""
    from cuda_agent.harness._toolchain import LINKER_ENV, linker_flags

    gxx = shutil.which("g++")
    if gxx is None or subprocess.run([gxx, "-fuse-ld=gold", "-shared", "-x", "c", "/dev/null", "-o", str(tmp_path / "c.so")],
                                     capture_output=True).returncode != 0:
        pytest.skip("needs g++ with gold")
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "libstdc++.so").symlink_to(tmp_path / "missing" / "libstdc++.so.6")
    cxx = tmp_path / "cxx"
    cxx.write_text(f"#!/bin/sh\nexec {gxx} -L{bad} \"$@\"\n")
    cxx.chmod(0o755)
    monkeypatch.delenv(LINKER_ENV, raising=False)
    linker_flags.cache_clear()
    try:
        assert linker_flags(str(cxx)) == ()
    finally:
        linker_flags.cache_clear()
    # The default linker links a C++ extension through the same compiler.
    src = tmp_path / "ext.cpp"
    src.write_text("#include <string>\nstd::string g(int v) { return std::to_string(v); }\n")
    subprocess.run([str(cxx), "-shared", "-fPIC", str(src), "-o", str(tmp_path / "ext.so")], check=True)


@pytest.mark.slow
@pytest.mark.skipif(find_nvcc() is None, reason="needs nvcc")
def test_cuda_binding_glue_and_kernels_compile_at_O3(tmp_path, build_cache):
    """The binding's glue runs inside every timed call: no build flag of ours may make it slower than -O3."""
    solution_workspace(tmp_path / "ws", "swish", "cuda")
    outcome = build_extension(tmp_path / "ws", "cuda", tmp_path / "build", arch="sm_90a", cache_dir=build_cache, link=False)
    assert outcome.ok, outcome.log
    ninja = (tmp_path / "build" / "build.ninja").read_text()
    edges = {block.split("\n", 1)[0].split(": ")[0].rsplit("/", 1)[-1]: block for block in ninja.split("\nbuild ")[1:]}
    assert "extra" not in edges["swish_binding.cpp.o"] and "extra" not in edges["swish.cu.o"]
    nvccflags = next(line for line in ninja.splitlines() if line.startswith("nvccflags = "))
    assert " -O3 " in nvccflags
    from cuda_agent.harness._toolchain import find_ninja

    commands = subprocess.run([find_ninja(), "-C", str(tmp_path / "build"), "-t", "commands", "objects"],
                              capture_output=True, text=True, check=True).stdout
    binding_cmd = next(line for line in commands.splitlines() if "swish_binding.cpp" in line)
    assert " -O3 " in binding_cmd and " -O1 " not in binding_cmd and " -O0 " not in binding_cmd


@pytest.mark.slow
def test_toolchain_link_baseline_is_safe_from_many_build_threads(swish_build):
    """The eval runner builds in a thread pool; on the H200 two threads computing the toolchain's link baseline at
    once collided on one temporary file name and one build failed with FileNotFoundError."""
    from concurrent.futures import ThreadPoolExecutor

    from cuda_agent.harness.integrity.binary import _binding_objects, toolchain_link_baseline

    _, _, outcome = swish_build
    assert outcome.ok, outcome.log
    binding = next(iter(sorted(_binding_objects(outcome.so_path))))
    for cached in binding.parent.glob("link-baseline-*.so"):
        cached.unlink()
    barrier = __import__("threading").Barrier(6)

    def one(_: int) -> frozenset[str]:
        barrier.wait()
        return toolchain_link_baseline(outcome.so_path)

    with ThreadPoolExecutor(6) as ex:
        results = list(ex.map(one, range(6)))
    assert len(set(results)) == 1
    assert list(binding.parent.glob("link-baseline-*.tmp")) == []
