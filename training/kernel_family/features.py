"""What a written kernel does, read from its source: fused or not, vectorised or not, its launch shape.

Used for the "what the policy learned" shares of the learning curve. The rules read the code the way a
reviewer would, for any kernel in the workspace (not only the expert writer's templates):

- fused: one ``__global__`` kernel (CUDA) / one loop over the elements (C++);
- vectorised: ``float4`` (CUDA) / ``simd`` (C++);
- launch: the threads per block the launcher sets (``threads = N`` or ``<<<..., N``), ``narrow`` when the
  grid is a fixed small constant with a grid-stride loop (CUDA), or the C++ loop forks its OpenMP team
  with no size threshold.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

_THREADS = re.compile(r"threads\s*=\s*(\d+)")
_FIXED_GRID = re.compile(r"blocks\s*=\s*(\d+)\s*;")


def kernel_sources(workspace: Path) -> dict[str, str]:
    """Kernel sources of a workspace (``kernels/*.cu``, ``kernels/*.cpp`` without the ``*_binding.cpp``)."""
    folder = Path(workspace) / "kernels"
    if not folder.is_dir():
        return {}
    return {p.name: p.read_text(encoding="utf-8", errors="replace") for p in sorted(folder.iterdir())
            if p.suffix in (".cu", ".cpp") and not p.stem.endswith("_binding") and p.is_file()}


def kernel_features(sources: dict[str, str]) -> dict[str, Any]:
    """``{'fused': bool|None, 'vector': bool|None, 'launch': str|None}`` of the given kernel sources."""
    text = "\n".join(sources.values())
    if not text.strip():
        return {"fused": None, "vector": None, "launch": None}
    cuda = "__global__" in text
    if cuda:
        kernels = len(re.findall(r"__global__\s+void", text))
        fused = kernels == 1
        vector = "float4" in text
        threads = _THREADS.search(text)
        fixed = _FIXED_GRID.search(text)
        narrow = bool(fixed and int(fixed.group(1)) <= 256 and "stride" in text)
        launch = "narrow" if narrow else (f"t{threads.group(1)}" if threads else "other")
    else:
        loops = len(re.findall(r"for\s*\(\s*int64_t\s+i\s*=\s*0", text))
        fused = loops == 1
        vector = "simd" in text
        pragmas = re.findall(r"#pragma omp parallel for[^\n]*", text)
        launch = "narrow" if pragmas and not all(" if (" in p or " if(" in p for p in pragmas) else "t256"
    return {"fused": fused, "vector": vector, "launch": launch}
