"""The integrity layer: static, binary and runtime checks that stop reward hacking (THREATS.md).

Contract used by the build, backends and sandbox:

- ``check_sources(workspace_root, kind)`` -> violations of the ``model_new.py``
  allowlist and of the C++/CUDA source rules, before building;
- ``check_binary(so_path, kind)`` -> violations among the built module's
  undefined symbols, after building;
- ``cuda_agent.harness.integrity.runtime`` -> guard snapshots, op audit and
  kernel-origin checks used inside the candidate process.

Every ``Violation`` names its rule id (``RULES``); ``docs/integrity.md``
explains each rule and its known limits.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from cuda_agent.harness.integrity.binary import check_binary, check_object, undefined_symbols
from cuda_agent.harness.integrity.cpp_rules import check_cpp_sources, check_cpp_text
from cuda_agent.harness.integrity.python_ast import check_model_new_source
from cuda_agent.harness.integrity.rules import RULES, describe, threat_class
from cuda_agent.harness.integrity.violation import Violation, format_violations

__all__ = [
    "RULES",
    "Violation",
    "check_binary",
    "check_object",
    "check_cpp_sources",
    "check_cpp_text",
    "check_model_new_source",
    "check_sources",
    "describe",
    "format_violations",
    "threat_class",
    "undefined_symbols",
]

_KINDS = ("cpu", "cuda")


def check_sources(
    workspace_root: Path,
    kind: str,
    *,
    allowed_libraries: Iterable[str] = (),
    model_file: str = "model_new.py",
    extension_names: tuple[str, ...] = ("cuda_extension",),
) -> list[Violation]:
    """Static integrity checks of a workspace: ``model_new.py`` allowlist + C++/CUDA source rules.

    :param workspace_root: the workspace folder (release layout).
    :param kind: backend kind, ``"cpu"`` or ``"cuda"`` (``.cu`` files are checked on both).
    :param allowed_libraries: vendor libraries the backend's skill allows (``"cublas"``, ``"cudnn"``, ``"cutlass"``...).
    :param model_file: the agent's module, relative to the workspace.
    :param extension_names: module name(s) of the built extension.
    :returns: violations, empty when the workspace passes.
    """
    if kind not in _KINDS:
        raise ValueError(f"check_sources: kind {kind!r} is not valid; valid kinds: {', '.join(_KINDS)}")
    root = Path(workspace_root)
    out: list[Violation] = []
    model = root / model_file
    if not model.is_file():
        out.append(Violation(rule="T1.python.no_model_new", message=f"{model_file} is missing from the workspace",
                             file=model_file))
    else:
        out.extend(check_model_new_source(model.read_text(errors="replace"), model_file,
                                          extension_names=extension_names))
    out.extend(_foreign_files(root, model_file))
    out.extend(check_cpp_sources(root, allowed_libraries=allowed_libraries))
    return out


_PROTECTED_PY = {"model.py"}
_BINARY_SUFFIXES = {".so", ".o", ".a", ".dylib", ".dll", ".pyd", ".ptx", ".cubin", ".fatbin"}


def _foreign_files(root: Path, model_file: str) -> list[Violation]:
    """Python modules besides model_new.py (they could shadow imports) and prebuilt binaries in the workspace."""
    out: list[Violation] = []
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root)
        if not path.is_file() or any(part.startswith(".") or part in {"__pycache__", "build"} for part in rel.parts):
            continue
        name = str(rel)
        if path.suffix in {".py", ".pth"} and name not in {model_file, *_PROTECTED_PY}:
            out.append(Violation(rule="T1.python.import_not_allowed", file=name,
                                 message=f"{name}: Python files other than {model_file} are not allowed in the "
                                         "workspace (they could shadow imports); put the code in model_new.py"))
        elif path.suffix in _BINARY_SUFFIXES:
            out.append(Violation(rule="T1.python.native_access", file=name,
                                 message=f"{name}: prebuilt binaries are not allowed; kernels are built from "
                                         "kernels/* sources by the harness"))
    return out
