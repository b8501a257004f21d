"""Mine seed operators from transformers: activations, RMS norms, rotary helpers.

Only layers importable and constructible without weights or model configs:
every activation class defined in ``transformers.activations`` (through its
``ACT2CLS`` table), the RMSNorm-style classes of a few decoder families
(constructed with the hidden size), and ``rotate_half`` (the rotary
embedding helper). Each is probed like the torch operators; tasks using them
import transformers, recorded in ``OperatorSpec.requires``.
"""

from __future__ import annotations

import importlib
import inspect
import warnings

from cuda_agent.training.synthesis.mine_torch import MiningReport, _elementwise_spec
from cuda_agent.training.synthesis.operator_probe import probe_unary
from cuda_agent.training.synthesis.operators import OperatorSpec

#: (module, class) of norm layers taking the hidden size as their only required argument.
NORM_CLASSES: list[tuple[str, str]] = [
    ("transformers.models.llama.modeling_llama", "LlamaRMSNorm"),
    ("transformers.models.gemma.modeling_gemma", "GemmaRMSNorm"),
    ("transformers.models.t5.modeling_t5", "T5LayerNorm"),
]

#: (module, function) of shape-preserving helpers acting along the last dim.
LAST_DIM_FUNCTIONS: list[tuple[str, str]] = [
    ("transformers.models.llama.modeling_llama", "rotate_half"),
]


def mine_transformers() -> MiningReport:
    """transformers seed operators (sorted by name) and skipped candidates with reasons."""
    import torch

    report = MiningReport()
    try:
        import transformers
        from transformers import activations
    except ImportError as exc:
        report.skipped["transformers"] = f"not importable: {exc}"
        return report
    version = transformers.__version__
    for key in sorted(activations.ACT2CLS):
        entry = activations.ACT2CLS[key]
        cls, kwargs = entry if isinstance(entry, tuple) else (entry, {})
        name = f"transformers.activations.{getattr(cls, '__name__', key)}"
        if getattr(cls, "__module__", "") != "transformers.activations" or kwargs:
            report.skipped[f"{name}({key})"] = "defined in torch or needs keyword arguments (mined from torch instead)"
            continue
        if any(s.name == name for s in report.specs):
            continue
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                module = cls()
        except Exception as exc:  # noqa: BLE001
            report.skipped[name] = f"needs constructor arguments ({type(exc).__name__})"
            continue
        if list(module.parameters()):
            report.skipped[name] = "holds parameters (trainable activation)"
            continue
        facts, why = probe_unary(module)
        if facts is None:
            report.skipped[name] = why
            continue
        report.specs.append(_elementwise_spec("transformers.activations", cls.__name__, "module", {}, facts, version,
                                              requires=["transformers"]))
    for module_name, attr in NORM_CLASSES:
        name = f"{module_name}.{attr}"
        try:
            cls = getattr(importlib.import_module(module_name), attr)
            with torch.no_grad():
                y = cls(16)(torch.randn(4, 16))
        except Exception as exc:  # noqa: BLE001
            report.skipped[name] = f"probe failed: {type(exc).__name__}: {exc}"
            continue
        report.specs.append(OperatorSpec(
            name=name, source=module_name, attr=attr, call="module", family="norm_last", ranks=[2, 3, 4],
            example_shape=[4, 16], example_output_shape=list(y.shape), output_shape_rule="same as input",
            requires=["transformers"], version=version,
        ))
    for module_name, attr in LAST_DIM_FUNCTIONS:
        name = f"{module_name}.{attr}"
        try:
            fn = getattr(importlib.import_module(module_name), attr)
            assert inspect.isfunction(fn)
            y = fn(torch.randn(4, 16))
            assert tuple(y.shape) == (4, 16)
        except Exception as exc:  # noqa: BLE001
            report.skipped[name] = f"probe failed: {type(exc).__name__}: {exc}"
            continue
        report.specs.append(OperatorSpec(
            name=name, source=module_name, attr=attr, call="function", family="dim_op", ranks=[2, 3, 4],
            example_shape=[4, 16], example_output_shape=[4, 16], output_shape_rule="same as input",
            requires=["transformers"], version=version,
        ))
    report.specs.sort(key=lambda s: s.name)
    return report
