"""Child side of the task probe: run a KernelBench-format module once and describe it.

Started by :mod:`cuda_agent.harness.tasks` in a sandboxed subprocess as
``python _task_probe_child.py`` (no cuda_agent import needed): reads a JSON
request on stdin ``{"code", "device", "seed"}``, prints ``READY`` once torch
is imported, then writes one JSON line to the original stdout: either
``{"ok": true, ...facts}`` or ``{"ok": false, "kind": ..., "message": ...}``.
The task's own prints go to stderr.
"""

from __future__ import annotations

import json
import os
import sys
import traceback
import types


def _fail(out, kind: str, message: str) -> None:
    out.write(json.dumps({"ok": False, "kind": kind, "message": message}) + "\n")
    out.flush()


def _json_value(value, where: str):
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (list, tuple)):
        return [_json_value(v, where) for v in value]
    raise TypeError(f"{where} is a {type(value).__name__}; only numbers, bools, strings, None and lists are supported")


def _describe(value, name: str, torch) -> dict:
    if isinstance(value, torch.Tensor):
        info = {"name": name, "kind": "tensor", "shape": list(value.shape), "dtype": str(value.dtype).replace("torch.", "")}
        if value.numel() > 0 and value.dtype != torch.bool and not value.is_complex():
            v = value.detach()
            info["min"] = float(v.min().item())
            info["max"] = float(v.max().item())
            info["finite"] = bool(torch.isfinite(v.float()).all().item()) if v.is_floating_point() else True
        info["nbytes"] = value.numel() * value.element_size()
        return info
    if isinstance(value, bool):
        return {"name": name, "kind": "bool", "value": value}
    if isinstance(value, int):
        return {"name": name, "kind": "int", "value": value}
    if isinstance(value, float):
        return {"name": name, "kind": "float", "value": value}
    if value is None:
        return {"name": name, "kind": "none"}
    return {"name": name, "kind": "other", "value": repr(value)[:200]}


def main() -> None:
    out = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)  # the task's prints go to stderr
    request = json.loads(sys.stdin.read())
    import torch

    out.write("READY\n")
    out.flush()
    device = request.get("device", "cpu")
    module = types.ModuleType("task_module")
    module.__file__ = "<task>"
    try:
        exec(compile(request["code"], "<task>", "exec"), module.__dict__)
    except Exception:
        return _fail(out, "import_error", "executing the task module failed:\n" + traceback.format_exc(limit=6))
    missing = [n for n in ("Model", "get_inputs", "get_init_inputs") if not callable(getattr(module, n, None))]
    if missing:
        return _fail(
            out,
            "missing_definition",
            f"the task module does not define {', '.join(missing)}; a KernelBench task needs a class Model "
            "(torch.nn.Module), get_inputs() and get_init_inputs()",
        )
    if not (isinstance(module.Model, type) and issubclass(module.Model, torch.nn.Module)):
        return _fail(out, "missing_definition", "Model must be a subclass of torch.nn.Module")
    torch.manual_seed(int(request.get("seed", 0)))
    try:
        init_inputs = list(module.get_init_inputs())
        init_json = [_json_value(v, f"get_init_inputs()[{i}]") for i, v in enumerate(init_inputs)]
    except Exception:
        return _fail(out, "init_inputs_error", "get_init_inputs() failed:\n" + traceback.format_exc(limit=6))
    try:
        with torch.device(device):
            model = module.Model(*init_inputs)
        model = model.to(device).eval()
    except Exception:
        return _fail(out, "model_error", "Model(*get_init_inputs()) failed:\n" + traceback.format_exc(limit=6))
    try:
        with torch.device(device):
            inputs = module.get_inputs()
        if not isinstance(inputs, (list, tuple)):
            raise TypeError(f"get_inputs() must return a list, got {type(inputs).__name__}")
        inputs = [x.to(device) if isinstance(x, torch.Tensor) else x for x in inputs]
    except Exception:
        return _fail(out, "inputs_error", "get_inputs() failed:\n" + traceback.format_exc(limit=6))
    from torch.utils.flop_counter import FlopCounterMode

    try:
        with torch.no_grad():
            counter = FlopCounterMode(display=False)
            with counter:
                result = model(*inputs)
            again = model(*inputs)
    except Exception:
        return _fail(out, "forward_error", "Model.forward(*get_inputs()) failed:\n" + traceback.format_exc(limit=6))
    outputs = list(result) if isinstance(result, (list, tuple)) else [result]
    seconds = list(again) if isinstance(again, (list, tuple)) else [again]
    if not all(isinstance(o, torch.Tensor) for o in outputs):
        kinds = ", ".join(type(o).__name__ for o in outputs)
        return _fail(out, "forward_error", f"forward must return a Tensor or a tuple of Tensors, got: {kinds}")
    stochastic = not all(
        a.shape == b.shape and torch.equal(torch.nan_to_num(a), torch.nan_to_num(b)) for a, b in zip(outputs, seconds)
    )
    param_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
    param_bytes += sum(b.numel() * b.element_size() for b in model.buffers())
    facts = {
        "ok": True,
        "inputs": [_describe(v, f"input{i}", torch) for i, v in enumerate(inputs)],
        "outputs": [_describe(v, f"output{i}", torch) for i, v in enumerate(outputs)],
        "init_inputs": init_json,
        "flops": float(counter.get_total_flops()),
        "param_bytes": param_bytes,
        "stochastic": stochastic,
        "output_tuple": isinstance(result, (list, tuple)),
        "device": device,
        "torch": torch.__version__,
    }
    out.write(json.dumps(facts) + "\n")
    out.flush()


if __name__ == "__main__":
    main()
