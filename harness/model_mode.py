"""The mode a task's ``Model`` (and a candidate's ``ModelNew``) runs in: KernelBench's, with dropout off.

KernelBench's harness never calls ``.eval()``: a problem's ``Model`` runs as constructed, in training mode, so
``BatchNorm`` normalises with the batch's own statistics, and every solution published against KernelBench computes
that. Running the reference in eval mode instead (running statistics: 0 and 1 at construction, so ``BatchNorm`` is
nearly the identity) rejected those honest solutions and failed the self-check of KernelBench's own ``Model`` on
every problem with a ``BatchNorm`` (31 of levels 1-3; found by the CPU self-check of session 17). Dropout is the one
exception: in training mode it draws a fresh mask per call, which no kernel can reproduce and no comparison can
grade, so dropout layers run as in eval mode (the identity). That changes the two KernelBench problems with a rate
above zero (level 2's ``66_Matmul_Dropout_Softmax`` and ``83_Conv3d_GroupNorm_Min_Clamp_Dropout``, rate 0.2) from
stochastic to gradeable; the others' rates are 0. The reference, the probe and the candidate runner all use
:func:`set_task_mode`, so both sides of every comparison compute the same function.
"""

from __future__ import annotations

from typing import Any


def set_task_mode(model: Any, torch: Any, device: Any = None) -> Any:
    """Move ``model`` to ``device`` (when given) and put it in training mode with every dropout layer in eval mode;
    return it (a callable that is not a module is returned unchanged)."""
    if not isinstance(model, torch.nn.Module):
        return model
    if device is not None:
        model = model.to(device)
    model.train(True)
    for module in model.modules():
        if isinstance(module, torch.nn.modules.dropout._DropoutNd):
            module.eval()
    return model
