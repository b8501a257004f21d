"""Kernel origin (the runtime layer's GPU half): every GPU kernel an audited call ran must be the candidate's own.

The op audit (``runtime.audit_ops``) records the names of the kernels a call launched (Kineto); a kernel that is
neither defined in the candidate's extension nor one of torch's fill/copy kernels is a library kernel doing the
compute (T1). Split from :mod:`~cuda_agent.harness.integrity.runtime`, which re-exports both functions.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from cuda_agent.harness.integrity.violation import Violation

_TORCH_ALLOWED_KERNELS = ("FillFunctor", "fill_kernel", "copy_kernel", "CopyKernel", "direct_copy", "Memcpy", "Memset",
                          "memcpy", "memset", "zero_kernel")


def base_kernel_name(name: str) -> str:
    """``void ns::k<float, 4>(float const*, int)`` -> ``ns::k``: return type, template arguments and parameters dropped."""
    text = name.strip()
    if text.endswith(")"):
        depth = 0
        for i in range(len(text) - 1, -1, -1):
            depth += {")": 1, "(": -1}.get(text[i], 0)
            if depth == 0:
                text = text[:i]
                break
    out, depth = [], 0
    for ch in text:
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth = max(0, depth - 1)
        elif depth == 0:
            out.append(ch)
    text = "".join(out).strip()
    return text.split()[-1] if text else text


def _cuobjdump_names(so_path: Path) -> list[str]:
    import shutil
    import subprocess

    tool = shutil.which("cuobjdump")
    if tool is None:
        return []
    proc = subprocess.run([tool, "-symbols", str(so_path)], capture_output=True, text=True, timeout=120, check=False)
    names = [ln.split()[-1] for ln in proc.stdout.splitlines() if "STT_FUNC" in ln]
    from cuda_agent.harness.integrity.binary import demangle

    return demangle(names)


def kernel_origin_violations(kernel_names: Iterable[str], so_path: Path) -> list[Violation]:
    """GPU kernels that ran but are defined neither in the candidate's ``.so`` nor among torch's fill/copy kernels."""
    from cuda_agent.harness.integrity.binary import defined_symbols

    so_path = Path(so_path)
    own = {base_kernel_name(n) for n in defined_symbols(so_path) + _cuobjdump_names(so_path)}
    own |= {n.split("::")[-1] for n in own}
    out: list[Violation] = []
    reported: set[str] = set()
    for name in kernel_names:
        if any(marker in name for marker in _TORCH_ALLOWED_KERNELS):
            continue
        base = base_kernel_name(name)
        if base in own or base.split("::")[-1] in own and not base.startswith(("at::", "void at::")):
            continue
        if base in reported:
            continue
        reported.add(base)
        out.append(Violation(rule="T1.runtime.foreign_kernel",
                             message=f"GPU kernel `{name[:120]}` ran during forward but is not defined in "
                                     f"{so_path.name}; library kernels (cuBLAS, ATen) are not allowed",
                             file=so_path.name))
    return out
