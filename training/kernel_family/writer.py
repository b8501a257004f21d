"""The programmatic kernel writer: workspace files for a chain, in several styles, with planted bugs.

Styles differ where they change speed on a GPU and what RL can learn to prefer:

- ``fused``: one kernel applies the whole chain (one pass over memory) or one kernel per operator
  (as many passes as eager PyTorch);
- ``vector``: float4 loads and stores (CUDA) / ``omp simd`` (C++), or scalar;
- ``launch``: ``t256``/``t512``/``t128`` blocks covering the tensor, or ``narrow``: 32-thread blocks on
  a fixed 64-block grid with a grid-stride loop (correct, many times slower on an H200); on the CPU
  backend ``t*`` parallelise above a size threshold and ``narrow`` always forks the OpenMP team.

A :class:`Bug` replaces one line with a wrong one (a missing ``;`` or an undeclared name: the compiler
reports it; another operator's formula: verify reports the mismatch); :meth:`Solution.repair` gives the
``edit_file`` arguments that undo it. The file names and the ``chain_forward(x, out)`` entry point are
the same for every task, as a human expert's template would be.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from cuda_agent.training.kernel_family.ops import OPS

Backend = Literal["cpu", "cuda"]
LAUNCHES = ("t256", "t512", "t128", "narrow")

MODEL_NEW = '''import torch
import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        out = torch.empty_like(x)
        cuda_extension.chain_forward(x, out)
        return out
'''

CUDA_BINDING = '''#include "../binding_registry.h"

#include <cuda_runtime_api.h>

cudaError_t chain_launch(const float* x, float* y, int64_t n, cudaStream_t stream);

void chain_forward(const at::Tensor& x, const at::Tensor& out) {
  TORCH_CHECK(x.is_cuda() && out.is_cuda(), "chain_forward: CUDA tensors expected");
  TORCH_CHECK(x.scalar_type() == at::kFloat && out.scalar_type() == at::kFloat, "chain_forward: float32 expected");
  TORCH_CHECK(x.is_contiguous() && out.is_contiguous() && x.numel() == out.numel(), "chain_forward: bad tensors");
  const cudaError_t err = chain_launch(x.const_data_ptr<float>(), out.mutable_data_ptr<float>(), x.numel(),
                                       static_cast<cudaStream_t>(cuda_agent_binding::current_stream(x)));
  TORCH_CHECK(err == cudaSuccess, "chain launch failed: ", cudaGetErrorString(err));
}

REGISTER_BINDING(chain_forward, chain_forward);
'''

CPU_BINDING = '''#include "../binding_registry.h"

void chain_cpu(const float* x, float* y, int64_t n);

void chain_forward(const at::Tensor& x, const at::Tensor& out) {
  TORCH_CHECK(x.scalar_type() == at::kFloat && out.scalar_type() == at::kFloat, "chain_forward: float32 expected");
  TORCH_CHECK(x.is_contiguous() && out.is_contiguous() && x.numel() == out.numel(), "chain_forward: bad tensors");
  chain_cpu(x.const_data_ptr<float>(), out.mutable_data_ptr<float>(), x.numel());
}

REGISTER_BINDING(chain_forward, chain_forward);
'''


@dataclass(frozen=True)
class Style:
    """How a solution is written."""

    fused: bool = True
    vector: bool = False
    launch: str = "t256"

    def __post_init__(self) -> None:
        if self.launch not in LAUNCHES:
            raise ValueError(f"unknown launch {self.launch!r}; valid: {', '.join(LAUNCHES)}")

    @property
    def label(self) -> str:
        """``fused-vec-t256``, ``unfused-scalar-narrow``..."""
        return f"{'fused' if self.fused else 'unfused'}-{'vec' if self.vector else 'scalar'}-{self.launch}"


@dataclass(frozen=True)
class Bug:
    """A wrong line planted in the kernel: ``kind`` is ``semicolon``/``undeclared`` (compile) or ``wrong_op`` (verify)."""

    kind: Literal["semicolon", "undeclared", "wrong_op"]
    op_index: int = 0
    wrong_op: str = ""

    @property
    def phase(self) -> Literal["compile", "verify"]:
        """The tool that reports it."""
        return "verify" if self.kind == "wrong_op" else "compile"


@dataclass
class Solution:
    """Workspace files of one solution; ``bad_line``/``good_line`` describe its planted bug, if any."""

    backend: Backend
    chain: list[str]
    style: Style
    files: dict[str, str]
    bug: Bug | None = None
    bad_line: str = ""
    good_line: str = ""
    meta: dict[str, str] = field(default_factory=dict)

    @property
    def kernel_path(self) -> str:
        """``kernels/chain.cu`` or ``kernels/chain.cpp``."""
        return "kernels/chain.cu" if self.backend == "cuda" else "kernels/chain.cpp"

    def repair(self) -> dict[str, str]:
        """``edit_file`` arguments that replace the planted bad line with the right one."""
        if self.bug is None:
            raise ValueError("this solution has no planted bug")
        return {"path": self.kernel_path, "old": self.bad_line, "new": self.good_line}

    def repaired(self) -> dict[str, str]:
        """The files after :meth:`repair`."""
        files = dict(self.files)
        if self.bug is not None:
            files[self.kernel_path] = files[self.kernel_path].replace(self.bad_line, self.good_line, 1)
        return files


def _op_lines(chain: list[str], indent: str) -> list[str]:
    return [f"{indent}v = {OPS[k].expr};" for k in chain]


def _cuda_fused(chain: list[str], style: Style) -> str:
    doc = " -> ".join(chain)
    lines = [f"// {doc}: one fused pass ({'float4' if style.vector else 'scalar'}, {style.launch}).",
             "#include <cstdint>", "#include <cuda_runtime.h>", "",
             "__device__ __forceinline__ float chain_op(float v) {", *_op_lines(chain, "  "), "  return v;", "}", ""]
    narrow = style.launch == "narrow"
    threads = 32 if narrow else int(style.launch[1:])
    if style.vector:
        lines += ["__global__ void chain_kernel(const float4* __restrict__ x4, float4* __restrict__ y4,",
                  "                             const float* __restrict__ x, float* __restrict__ y, int64_t n4, int64_t n) {"]
        if narrow:
            lines += ["  const int64_t stride = (int64_t)gridDim.x * blockDim.x;",
                      "  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n4; i += stride) {"]
        else:
            lines += ["  const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;", "  if (i < n4) {"]
        lines += ["    float4 v = x4[i];", "    v.x = chain_op(v.x);", "    v.y = chain_op(v.y);", "    v.z = chain_op(v.z);",
                  "    v.w = chain_op(v.w);", "    y4[i] = v;", "  }",
                  "  const int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;",
                  "  if (t < n - n4 * 4) y[n4 * 4 + t] = chain_op(x[n4 * 4 + t]);", "}", ""]
        work = "n / 4"
    else:
        lines += ["__global__ void chain_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t n) {"]
        if narrow:
            lines += ["  const int64_t stride = (int64_t)gridDim.x * blockDim.x;",
                      "  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {"]
        else:
            lines += ["  const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;", "  if (i < n) {"]
        lines += ["    y[i] = chain_op(x[i]);", "  }", "}", ""]
        work = "n"
    lines += ["cudaError_t chain_launch(const float* x, float* y, int64_t n, cudaStream_t stream) {",
              "  if (n == 0) return cudaSuccess;", f"  const int threads = {threads};"]
    if narrow:
        lines += ["  const int64_t blocks = 64;"]
    elif style.vector:
        lines += [f"  int64_t blocks = ({work} + threads - 1) / threads;", "  if (blocks < 1) blocks = 1;"]
    else:
        lines += [f"  const int64_t blocks = ({work} + threads - 1) / threads;"]
    if style.vector:
        lines += ["  chain_kernel<<<(unsigned)blocks, threads, 0, stream>>>(reinterpret_cast<const float4*>(x),",
                  "      reinterpret_cast<float4*>(y), x, y, n / 4, n);"]
    else:
        lines += ["  chain_kernel<<<(unsigned)blocks, threads, 0, stream>>>(x, y, n);"]
    lines += ["  return cudaGetLastError();", "}", ""]
    return "\n".join(lines)


def _cuda_unfused(chain: list[str], style: Style) -> str:
    doc = " -> ".join(chain)
    narrow = style.launch == "narrow"
    threads = 32 if narrow else int(style.launch[1:])
    lines = [f"// {doc}: one kernel per operator ({style.launch}).", "#include <cstdint>", "#include <cuda_runtime.h>", ""]
    for j, k in enumerate(chain):
        lines += [f"__global__ void op{j}_kernel(const float* x, float* y, int64_t n) {{"]
        if narrow:
            lines += ["  const int64_t stride = (int64_t)gridDim.x * blockDim.x;",
                      "  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {"]
        else:
            lines += ["  const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;", "  if (i < n) {"]
        lines += ["    float v = x[i];", f"    v = {OPS[k].expr};", "    y[i] = v;", "  }", "}", ""]
    lines += ["cudaError_t chain_launch(const float* x, float* y, int64_t n, cudaStream_t stream) {",
              "  if (n == 0) return cudaSuccess;", f"  const int threads = {threads};",
              "  const int64_t blocks = 64;" if narrow else "  const int64_t blocks = (n + threads - 1) / threads;"]
    for j in range(len(chain)):
        src = "x" if j == 0 else "y"
        lines += [f"  op{j}_kernel<<<(unsigned)blocks, threads, 0, stream>>>({src}, y, n);"]
    lines += ["  return cudaGetLastError();", "}", ""]
    return "\n".join(lines)


def _cpu_pragma(style: Style) -> str:
    simd = " simd" if style.vector else ""
    cond = "" if style.launch == "narrow" else " if (n >= (1 << 16))"
    return f"#pragma omp parallel for{simd} schedule(static){cond}"


def _cpu_fused(chain: list[str], style: Style) -> str:
    doc = " -> ".join(chain)
    lines = [f"// {doc}: one fused pass ({'simd' if style.vector else 'scalar'}, {style.launch}).",
             "#include <cmath>", "#include <cstdint>", "",
             "void chain_cpu(const float* x, float* y, int64_t n) {", _cpu_pragma(style),
             "  for (int64_t i = 0; i < n; ++i) {", "    float v = x[i];", *_op_lines(chain, "    "), "    y[i] = v;",
             "  }", "}", ""]
    return "\n".join(lines)


def _cpu_unfused(chain: list[str], style: Style) -> str:
    doc = " -> ".join(chain)
    lines = [f"// {doc}: one loop per operator ({style.launch}).", "#include <cmath>", "#include <cstdint>", ""]
    for j, k in enumerate(chain):
        lines += [f"static void op{j}(const float* x, float* y, int64_t n) {{", _cpu_pragma(style),
                  "  for (int64_t i = 0; i < n; ++i) {", "    float v = x[i];", f"    v = {OPS[k].expr};", "    y[i] = v;",
                  "  }", "}", ""]
    lines += ["void chain_cpu(const float* x, float* y, int64_t n) {"]
    lines += [f"  op{j}({'x' if j == 0 else 'y'}, y, n);" for j in range(len(chain))]
    lines += ["}", ""]
    return "\n".join(lines)


def write_solution(chain: list[str], backend: Backend, style: Style = Style(), bug: Bug | None = None) -> Solution:
    """The files of a solution of ``chain`` on ``backend`` in ``style``, with ``bug`` planted when given."""
    unknown = [k for k in chain if k not in OPS]
    if unknown:
        raise ValueError(f"unknown operators {unknown}; valid: {', '.join(sorted(OPS))}")
    if backend == "cuda":
        kernel = (_cuda_fused if style.fused else _cuda_unfused)(chain, style)
        binding, kpath = CUDA_BINDING, "kernels/chain.cu"
    elif backend == "cpu":
        kernel = (_cpu_fused if style.fused else _cpu_unfused)(chain, style)
        binding, kpath = CPU_BINDING, "kernels/chain.cpp"
    else:
        raise ValueError(f"unknown backend {backend!r}; valid: cpu, cuda")
    sol = Solution(backend=backend, chain=list(chain), style=style,
                   files={kpath: kernel, "kernels/chain_binding.cpp": binding, "model_new.py": MODEL_NEW})
    if bug is not None:
        _plant(sol, bug)
    return sol


def _plant(sol: Solution, bug: Bug) -> None:
    """Replace the line of operator ``bug.op_index`` with a wrong one (the line must be unique in the file)."""
    key = sol.chain[bug.op_index]
    expr = OPS[key].expr
    good = f"v = {expr};"
    kernel = sol.files[sol.kernel_path]
    lines = [ln for ln in kernel.splitlines() if ln.strip() == good]
    if len(lines) != 1:
        raise ValueError(f"operator {key!r} occurs {len(lines)} times in the kernel; a planted bug needs a unique line")
    indent = lines[0][: len(lines[0]) - len(lines[0].lstrip())]
    if bug.kind == "semicolon":
        bad = f"v = {expr}"
    elif bug.kind == "undeclared":
        bad = f"v = {OPS[key].c_expr('val')};"
    else:
        if bug.wrong_op not in OPS or bug.wrong_op == key:
            raise ValueError(f"wrong_op bug needs another operator than {key!r}, got {bug.wrong_op!r}")
        bad = f"v = {OPS[bug.wrong_op].expr};"
    sol.good_line, sol.bad_line = indent + good + "\n", indent + bad + "\n"
    sol.files[sol.kernel_path] = kernel.replace(sol.good_line, sol.bad_line, 1)
    sol.bug = bug
