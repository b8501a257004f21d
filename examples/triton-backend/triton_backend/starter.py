"""The starter ``model_new.py`` of a Triton workspace: Model's signatures, one kernel skeleton, a clear TODO."""

from __future__ import annotations

import ast


def _signature(code: str, method: str) -> str:
    """Parameter list (without ``self``) of ``Model.<method>``; ``*args`` when it cannot be read."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return "*args"
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == "Model":
            for item in node.body:
                if isinstance(item, ast.FunctionDef) and item.name == method:
                    args = item.args
                    args.posonlyargs = [a for a in args.posonlyargs if a.arg != "self"]
                    args.args = [a for a in args.args if a.arg != "self"]
                    for a in args.posonlyargs + args.args + args.kwonlyargs:
                        a.annotation = None
                    return ast.unparse(args)
    return "*args"


def starter_model_new(task_code: str) -> str:
    """A ``model_new.py`` that imports Triton, shows the kernel shape and raises until written."""
    init, fwd = _signature(task_code, "__init__"), _signature(task_code, "forward")
    init_params = f", {init}" if init else ""
    fwd_params = f", {fwd}" if fwd else ""
    return f'''"""ModelNew: the optimised replacement of Model (see model.py), with Triton kernels.

forward() may only launch your @triton.jit kernels (kernel[grid](...)), allocate outputs (torch.empty...) and
read shapes/strides. No torch compute, no fallbacks.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def my_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    # TODO: load, compute, store
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask), mask=mask)


class ModelNew(nn.Module):
    def __init__(self{init_params}):
        super().__init__()
        # Keep the same parameters/buffers as Model (same names, same init order) when the reference has any.

    def forward(self{fwd_params}):
        # TODO: allocate the output, launch my_kernel[(triton.cdiv(n, BLOCK),)](...), return the output.
        raise NotImplementedError("ModelNew.forward is not written yet")
'''
