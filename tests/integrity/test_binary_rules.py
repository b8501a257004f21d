"""Binary rules over REAL compiled shared objects: undefined symbols reveal what sources can hide."""

from __future__ import annotations

import shutil
import sysconfig
from collections.abc import Callable
from pathlib import Path

import pytest

from cuda_agent.harness.integrity import RULES, check_binary, check_object
from cuda_agent.harness.integrity.binary import baseline_symbols, register_baseline

HERE = Path(__file__).parent


def test_cheat_binary_is_rejected(binary_cheat: Path, plain_shared_objects: dict[Path, Path],
                                  expectations: Callable[[Path], str]) -> None:
    rule = expectations(binary_cheat)
    assert rule in RULES
    violations = check_binary(plain_shared_objects[binary_cheat], "cpu")
    assert rule in [v.rule for v in violations], f"{binary_cheat.name}: expected {rule}, got {violations}"
    assert all(v.file and v.file.endswith(".so") for v in violations)


def test_honest_plain_binary_is_accepted(plain_shared_objects: dict[Path, Path]) -> None:
    so = plain_shared_objects[HERE / "honest" / "binary" / "plain_binding.cpp"]
    assert check_binary(so, "cpu") == []


def test_baseline_of_the_shared_binding_is_subtracted(plain_shared_objects: dict[Path, Path]) -> None:
    so = plain_shared_objects[HERE / "cheats" / "binary" / "b_pyimport.cpp"]
    assert [v.rule for v in check_binary(so, "cpu")] == ["T1.binary.python_api"]
    assert check_binary(so, "cpu", baseline=baseline_symbols(so)) == []
    register_baseline("test-kind", baseline_symbols(so))
    assert check_binary(so, "test-kind") == []


def test_binding_object_named_in_build_ninja_is_the_default_baseline(
        tmp_path: Path, compiler, plain_shared_objects: dict[Path, Path]) -> None:  # type: ignore[no-untyped-def]
    # The build links one shared binding object into every module; its own imports are not the agent's.
    binding_obj = compiler.build(HERE / "cheats" / "binary" / "b_pyimport.cpp", shared=False)
    shutil.copy(binding_obj, tmp_path / "binding.o")
    module = tmp_path / "cuda_extension.so"
    shutil.copy(plain_shared_objects[HERE / "cheats" / "binary" / "b_pyimport.cpp"], module)
    (tmp_path / "build.ninja").write_text(f"build {module}: link {tmp_path / 'k.o'} {tmp_path / 'binding.o'}\n")
    assert check_binary(module, "cpu") == []


def test_vendor_library_is_a_setting(plain_shared_objects: dict[Path, Path]) -> None:
    so = plain_shared_objects[HERE / "cheats" / "binary" / "b_cublas.cpp"]
    assert [v.rule for v in check_binary(so, "cuda")] == ["T1.binary.vendor_library"]
    assert check_binary(so, "cuda", allowed_libraries=["cublas"]) == []


def test_missing_module_is_an_error_not_a_verdict(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="does not exist"):
        check_binary(tmp_path / "nope.so", "cpu")


@pytest.mark.slow
@pytest.mark.parametrize(
    ("source", "rule"),
    [("cheats/cpp/t9_stream_create.cu", "T9.binary.stream"),
     ("cheats/cpp/t20_persisting_limit.cu", "T20.binary.l2_persistence"),
     ("honest/binary/shared_memory_kernel.cu", None)],
)
def test_nvcc_object_checks_need_no_gpu(compiler, source: str, rule: str | None) -> None:  # type: ignore[no-untyped-def]
    obj = compiler.build(HERE / source, shared=False)
    rules = [v.rule for v in check_object(obj, "cuda")]
    assert rules == ([rule] if rule else [])


# --------------------------------------------------------------------------- real torch headers
def _torch_flags(registry_dir: Path) -> tuple[str, ...]:
    import torch
    from torch.utils.cpp_extension import include_paths

    return (*(f"-I{p}" for p in include_paths()), f"-I{sysconfig.get_paths()['include']}", f"-I{registry_dir}",
            f"-D_GLIBCXX_USE_CXX11_ABI={int(torch._C._GLIBCXX_USE_CXX11_ABI)}", "-DTORCH_EXTENSION_NAME=cuda_extension")


@pytest.fixture(scope="session")
def torch_shared_objects(compiler) -> dict[str, Path]:  # type: ignore[no-untyped-def]
    """The torch-header corpus compiled against the installed torch (slow once, then cached)."""
    from cuda_agent.harness._binding_sources import BINDING_REGISTRY_H

    registry_dir = compiler.cache / "registry"
    registry_dir.mkdir(exist_ok=True)
    if not (registry_dir / "binding_registry.h").is_file() or \
            (registry_dir / "binding_registry.h").read_text() != BINDING_REGISTRY_H:
        (registry_dir / "binding_registry.h").write_text(BINDING_REGISTRY_H)
    sources = sorted((HERE / "cheats" / "torch_binary").glob("*.cpp")) + \
        sorted((HERE / "honest" / "torch_binary").glob("*.cpp"))
    built = compiler.build_many(sources, flags=_torch_flags(registry_dir))
    return {p.name: so for p, so in built.items()}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(p.name for p in (HERE / "cheats" / "torch_binary").glob("*.cpp")))
def test_torch_header_cheat_is_rejected(name: str, torch_shared_objects: dict[str, Path],
                                        expectations: Callable[[Path], str]) -> None:
    rule = expectations(HERE / "cheats" / "torch_binary" / name)
    violations = check_binary(torch_shared_objects[name], "cpu")
    assert rule in [v.rule for v in violations], f"{name}: expected {rule}, got {violations}"


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(p.name for p in (HERE / "honest" / "torch_binary").glob("*.cpp")))
def test_torch_header_honest_binding_is_accepted(name: str, torch_shared_objects: dict[str, Path]) -> None:
    # out_optional_binding.cpp: `at::Tensor&` and `std::optional<at::Tensor>` parameters compile against the header
    assert check_binary(torch_shared_objects[name], "cpu") == []


@pytest.mark.skipif(shutil.which("cc") is None, reason="needs a C compiler")
def test_undefined_symbols_are_keyed_by_content_not_by_name_or_mtime(tmp_path: Path) -> None:
    """The memo behind repeated checks (verify/profile re-check an unchanged module) never serves a changed file."""
    import os
    import subprocess

    from cuda_agent.harness.integrity.binary import undefined_symbols

    objs = {}
    for name, callee in (("a", "fopen"), ("b", "socket")):
        (tmp_path / f"{name}.c").write_text(f"extern int {callee}(); int f(void) {{ return {callee}(); }}\n")
        subprocess.run(["cc", "-c", str(tmp_path / f"{name}.c"), "-o", str(tmp_path / f"{name}.o")], check=True)
        objs[name] = (tmp_path / f"{name}.o").read_bytes()
    target = tmp_path / "kernel.o"
    target.write_bytes(objs["a"])
    stamp = target.stat().st_mtime_ns
    assert [s.raw for s in undefined_symbols(target, dynamic=False)] == ["fopen"]
    assert [s.raw for s in undefined_symbols(target, dynamic=False)] == ["fopen"]  # served again
    target.write_bytes(objs["b"])
    os.utime(target, ns=(stamp, stamp))  # same name and mtime, other content
    assert [s.raw for s in undefined_symbols(target, dynamic=False)] == ["socket"]
