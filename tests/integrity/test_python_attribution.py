"""Calls into Python told apart by who makes them: pybind11's machinery or the candidate's own code.

Real objects compiled with g++ from ``pybind_attribution/`` (a stand-in pybind11 header, so each compiles in
about a second), linked into a module whose ``build.ninja`` names the candidate's object, as the build does.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from cuda_agent.harness.integrity import check_binary
from cuda_agent.harness.integrity.python_attribution import library_owned, python_references

HERE = Path(__file__).parent / "pybind_attribution"


def _module(tmp_path: Path, source: str) -> tuple[Path, Path]:
    """(module .so, candidate .o) of ``source``, with a build.ninja naming the object (as our build writes)."""
    if shutil.which("g++") is None:
        pytest.skip("g++ is not on PATH")
    obj, so = tmp_path / f"{source}.o", tmp_path / "cuda_extension.so"
    for cmd in (["g++", "-O2", "-fPIC", "-std=c++17", "-c", str(HERE / source), "-o", str(obj)],
                ["g++", "-shared", str(obj), "-o", str(so)]):
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, check=False)
        assert proc.returncode == 0, proc.stderr
    (tmp_path / "build.ninja").write_text(f"build {obj}: cxx {HERE / source}\nbuild {so}: link {obj}\n")
    return so, obj


def test_machinery_that_calls_python_is_not_the_candidates_call(tmp_path: Path) -> None:
    so, obj = _module(tmp_path, "honest_registration.cpp")
    sites = python_references(obj)
    # The object does reference PyObject_CallObject, from library code only.
    assert {s.raw_target for s in sites} == {"PyObject_CallObject"}
    assert all(not s.candidate_owned and s.owner.startswith("pybind11::") for s in sites)
    assert check_binary(so, "cpu") == []


def test_the_same_module_without_attribution_would_be_refused(tmp_path: Path) -> None:
    # What the audit did before: every imported PyObject_Call* refused, whoever referenced it.
    so, _ = _module(tmp_path, "honest_registration.cpp")
    (tmp_path / "build.ninja").unlink()
    assert [v.rule for v in check_binary(so, "cpu")] == ["T1.binary.python_api"]


@pytest.mark.parametrize(
    ("source", "owner", "target"),
    [("cheat_direct_call.cpp", "matmul_via_python", "PyObject_CallObject"),
     ("cheat_import_entry.cpp", "get_torch", "pybind11::module_::import(char const*)"),
     ("cheat_lambda_in_dispatcher.cpp", "pybind11::dispatch<run::{lambda", "PyObject_CallObject")],
)
def test_the_candidates_own_calls_into_python_are_refused(tmp_path: Path, source: str, owner: str, target: str) -> None:
    so, _ = _module(tmp_path, source)
    violations = check_binary(so, "cpu")
    assert violations and {v.rule for v in violations} == {"T1.binary.python_api"}
    named = [v for v in violations if owner in v.message and target in v.message]
    assert named, [v.message for v in violations]
    assert named[0].file == f"cuda_extension.so:{source}.o"


@pytest.mark.parametrize(
    ("name", "owned"),
    [("pybind11::cpp_function::initialize<at::Tensor (*&)(at::Tensor, double), at::Tensor, pybind11::name, "
      "char [4]>(at::Tensor (*&)(at::Tensor, double))::{lambda(pybind11::detail::function_call&)#3}::_FUN("
      "pybind11::detail::function_call&)", True),
     ("pybind11::object pybind11::detail::object_api<pybind11::handle>::operator()<(pybind11::return_value_policy)1, "
      "_object*&>(_object*&) const", True),
     ("std::vector<at::Tensor, std::allocator<at::Tensor> >::~vector()", True),
     ("pybind11::cpp_function::initialize<register_x(pybind11::module_&)::{lambda(at::Tensor)#1}, at::Tensor>("
      "register_x(pybind11::module_&)::{lambda(at::Tensor)#1}&&)", False),
     ("register_x(pybind11::module_&)", False),
     ("std::hash<(anonymous namespace)::Key>::operator()((anonymous namespace)::Key const&) const", False),
     ("pybind11::detail::type_caster<MyType, void>::load(pybind11::handle, bool)", False)],
)
def test_library_ownership_reads_every_name_in_the_signature(name: str, owned: bool) -> None:
    assert library_owned(name) is owned
