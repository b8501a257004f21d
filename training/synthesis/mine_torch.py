"""Mine seed operators from torch: tensor ops, nn.functional ops, nn modules.

Three sources, each validated by probing on small tensors:

1. **Elementwise functions** discovered by scanning ``torch``, ``torch.special``
   and ``torch.nn.functional`` (names screened by
   :func:`~cuda_agent.training.synthesis.operator_probe.probe_allowed`), plus a
   few parametrised variants (clamp bounds, leaky slope...). The probe finds
   the input domain that keeps each finite (log needs positive inputs) and the
   output range.
2. **Zero-argument nn modules** (activations, dropout...) discovered by scanning
   ``torch.nn``; probed in train mode, so dropout/rrelu are recorded stochastic.
3. **Shaped families** (Linear, Conv, norms, pools, reductions, softmax-like)
   from a table of constructor templates, each probed on an example shape to
   check its output shape rule.

Every candidate that fails is reported with a reason (``MiningReport.skipped``).
"""

from __future__ import annotations

import inspect
from typing import Any

from pydantic import BaseModel, Field

from cuda_agent.training.synthesis.operator_probe import probe_allowed, probe_unary
from cuda_agent.training.synthesis.operators import OperatorSpec


class MiningReport(BaseModel):
    """Result of one mining pass."""

    specs: list[OperatorSpec] = Field(default_factory=list, description="Operators accepted.")
    skipped: dict[str, str] = Field(default_factory=dict, description="Candidate name -> why it was not accepted.")


#: Elementwise functions with fixed keyword arguments (name suffix shows the variant).
PARAMETRISED_ELEMENTWISE: list[tuple[str, str, dict[str, Any]]] = [
    ("torch", "clamp", {"min": -0.5, "max": 0.5}),
    ("torch", "clamp", {"min": 0.0}),
    ("torch", "pow", {"exponent": 2}),
    ("torch", "pow", {"exponent": 3}),
    ("torch.nn.functional", "leaky_relu", {"negative_slope": 0.2}),
    ("torch.nn.functional", "elu", {"alpha": 0.5}),
    ("torch.nn.functional", "hardtanh", {"min_val": -2.0, "max_val": 2.0}),
    ("torch.nn.functional", "softplus", {"beta": 2.0}),
    ("torch.nn.functional", "threshold", {"threshold": 0.1, "value": 0.0}),
    ("torch.nn.functional", "celu", {"alpha": 2.0}),
]

#: Module templates: (attr, family, ranks, ctor_kwargs, call_kwargs, spatial_dims, example_shape, ctor_args_for_probe)
SHAPED_MODULES: list[tuple[str, str, list[int], dict[str, Any], int, list[int], list[Any]]] = [
    ("Linear", "linear", [2, 3], {}, 0, [4, 16], [16, 8]),
    ("Conv1d", "conv", [3], {}, 1, [2, 4, 16], [4, 6, 3]),
    ("Conv2d", "conv", [4], {}, 2, [2, 4, 8, 8], [4, 6, 3]),
    ("ConvTranspose1d", "conv_transpose", [3], {}, 1, [2, 4, 16], [4, 6, 3]),
    ("ConvTranspose2d", "conv_transpose", [4], {}, 2, [2, 4, 8, 8], [4, 6, 3]),
    ("LayerNorm", "norm_last", [2, 3, 4], {}, 0, [4, 16], [16]),
    ("RMSNorm", "norm_last", [2, 3, 4], {}, 0, [4, 16], [16]),
    ("BatchNorm1d", "norm_channel", [3], {}, 1, [2, 4, 16], [4]),
    ("BatchNorm2d", "norm_channel", [4], {}, 2, [2, 4, 8, 8], [4]),
    ("InstanceNorm1d", "norm_channel", [3], {}, 1, [2, 4, 16], [4]),
    ("InstanceNorm2d", "norm_channel", [4], {}, 2, [2, 4, 8, 8], [4]),
    ("GroupNorm", "norm_channel", [4], {}, 2, [2, 4, 8, 8], [2, 4]),
    ("MaxPool1d", "pool", [3], {}, 1, [2, 4, 16], [2]),
    ("MaxPool2d", "pool", [4], {}, 2, [2, 4, 8, 8], [2]),
    ("AvgPool1d", "pool", [3], {}, 1, [2, 4, 16], [2]),
    ("AvgPool2d", "pool", [4], {}, 2, [2, 4, 8, 8], [2]),
    ("AdaptiveAvgPool1d", "adaptive_pool", [3], {}, 1, [2, 4, 16], [4]),
    ("AdaptiveAvgPool2d", "adaptive_pool", [4], {}, 2, [2, 4, 8, 8], [4]),
    ("AdaptiveMaxPool2d", "adaptive_pool", [4], {}, 2, [2, 4, 8, 8], [4]),
    ("Flatten", "flatten", [3, 4], {}, 0, [2, 4, 8, 8], []),
    ("Softmax", "dim_op", [2, 3, 4], {"dim": -1}, 0, [4, 16], []),
    ("LogSoftmax", "dim_op", [2, 3, 4], {"dim": -1}, 0, [4, 16], []),
    ("Softmin", "dim_op", [2, 3, 4], {"dim": -1}, 0, [4, 16], []),
    ("LocalResponseNorm", "elementwise", [3, 4], {"size": 3}, 0, [2, 4, 8, 8], []),
]

#: Function templates of the dim_op and reduce families: (source, attr, family, call_kwargs).
SHAPED_FUNCTIONS: list[tuple[str, str, str, dict[str, Any]]] = [
    ("torch", "softmax", "dim_op", {"dim": -1}),
    ("torch", "log_softmax", "dim_op", {"dim": -1}),
    ("torch", "cumsum", "dim_op", {"dim": -1}),
    ("torch", "logcumsumexp", "dim_op", {"dim": -1}),
    ("torch.nn.functional", "normalize", "dim_op", {"dim": -1}),
    ("torch.nn.functional", "softmin", "dim_op", {"dim": -1}),
    ("torch", "sum", "reduce", {"dim": -1, "keepdim": True}),
    ("torch", "mean", "reduce", {"dim": -1, "keepdim": True}),
    ("torch", "amax", "reduce", {"dim": -1, "keepdim": True}),
    ("torch", "amin", "reduce", {"dim": -1, "keepdim": True}),
    ("torch", "logsumexp", "reduce", {"dim": -1, "keepdim": True}),
    ("torch", "std", "reduce", {"dim": -1, "keepdim": True}),
    ("torch", "var", "reduce", {"dim": -1, "keepdim": True}),
]

_SHAPE_RULES = {
    "elementwise": "same as input",
    "dim_op": "same as input",
    "reduce": "input with the reduced dim set to 1",
    "norm_last": "same as input",
    "norm_channel": "same as input",
    "linear": "[..., out_features]",
    "conv": "[N, out_channels, L - kernel_size + 1 (+2*padding) ...]",
    "conv_transpose": "[N, out_channels, L + kernel_size - 1 ...]",
    "pool": "[N, C, L // kernel_size ...]",
    "adaptive_pool": "[N, C, output_size ...]",
    "flatten": "[N, prod(rest)]",
    "scale_param": "same as input",
    "bias_param": "same as input",
}


def _variant(kwargs: dict[str, Any]) -> str:
    return "[" + ",".join(f"{k}={v}" for k, v in kwargs.items()) + "]" if kwargs else ""


def _module_of(source: str) -> Any:
    import importlib

    return importlib.import_module(source)


def mine_elementwise_functions(report: MiningReport, version: str) -> None:
    """Scan torch / torch.special / torch.nn.functional for elementwise unary functions."""
    import torch

    seen: set[int] = set()
    for source in ("torch", "torch.special", "torch.nn.functional"):
        mod = _module_of(source)
        for attr in sorted(dir(mod)):
            fn = getattr(mod, attr, None)
            if not callable(fn) or inspect.isclass(fn) or not probe_allowed(attr):
                continue
            if id(fn) in seen:
                continue
            seen.add(id(fn))
            name = f"{source}.{attr}"
            facts, why = probe_unary(fn)
            if facts is None:
                report.skipped[name] = why
                continue
            report.specs.append(_elementwise_spec(source, attr, "function", {}, facts, version))
    for source, attr, kwargs in PARAMETRISED_ELEMENTWISE:
        fn = getattr(_module_of(source), attr)
        facts, why = probe_unary(lambda x, fn=fn, kw=kwargs: fn(x, **kw))
        name = f"{source}.{attr}{_variant(kwargs)}"
        if facts is None:
            report.skipped[name] = why
            continue
        report.specs.append(_elementwise_spec(source, attr, "function", kwargs, facts, version, call_kwargs=True))
    del torch


def _elementwise_spec(source: str, attr: str, call: str, kwargs: dict[str, Any], facts: dict[str, Any], version: str,
                      call_kwargs: bool = False, requires: list[str] | None = None) -> OperatorSpec:
    return OperatorSpec(
        name=f"{source}.{attr}{_variant(kwargs)}", source=source, attr=attr, call=call, family="elementwise",
        ranks=[2, 3, 4], ctor_kwargs={} if call_kwargs else kwargs, call_kwargs=kwargs if call_kwargs else {},
        domain=facts["domain"], output_range=facts["output_range"], stochastic=facts["stochastic"],
        example_shape=[4, 6, 5], example_output_shape=[4, 6, 5], output_shape_rule=_SHAPE_RULES["elementwise"],
        requires=requires or [], version=version,
    )


def mine_zero_arg_modules(report: MiningReport, version: str) -> None:
    """Scan torch.nn for modules constructible without arguments and acting elementwise."""
    import torch

    shaped = {t[0] for t in SHAPED_MODULES}
    for attr in sorted(dir(torch.nn)):
        cls = getattr(torch.nn, attr)
        if not (inspect.isclass(cls) and issubclass(cls, torch.nn.Module)) or attr in shaped or attr.startswith("_"):
            continue
        name = f"torch.nn.{attr}"
        try:
            module = cls()
        except Exception as exc:  # noqa: BLE001 - needs arguments: not a zero-arg module
            report.skipped[name] = f"needs constructor arguments ({type(exc).__name__})"
            continue
        if list(module.parameters()) or list(module.children()):
            report.skipped[name] = "holds parameters or submodules (not an elementwise op)"
            continue
        module.train()
        facts, why = probe_unary(module)
        if facts is None:
            report.skipped[name] = why
            continue
        report.specs.append(_elementwise_spec("torch.nn", attr, "module", {}, facts, version))


def mine_shaped(report: MiningReport, version: str) -> None:
    """Validate the shaped-family templates on their example shapes."""
    import torch

    for attr, family, ranks, kwargs, spatial, shape, probe_args in SHAPED_MODULES:
        name = f"torch.nn.{attr}"
        cls = getattr(torch.nn, attr, None)
        if cls is None:
            report.skipped[name] = f"not in this torch ({version})"
            continue
        try:
            torch.manual_seed(0)
            module = cls(*probe_args, **kwargs)
            with torch.no_grad():
                y = module(torch.randn(shape))
        except Exception as exc:  # noqa: BLE001
            report.skipped[name] = f"probe failed: {type(exc).__name__}: {exc}"
            continue
        out_range = "unit" if attr == "Softmax" or attr == "Softmin" else "real"
        if attr.startswith("MaxPool") or attr.startswith("AdaptiveMax"):
            out_range = "same"
        report.specs.append(OperatorSpec(
            name=name, source="torch.nn", attr=attr, call="module", family=family, ranks=ranks, ctor_kwargs=kwargs,
            spatial_dims=spatial, output_range=out_range, example_shape=shape, example_output_shape=list(y.shape),
            output_shape_rule=_SHAPE_RULES[family], version=version,
        ))
    for source, attr, family, call_kwargs in SHAPED_FUNCTIONS:
        name = f"{source}.{attr}"
        fn = getattr(_module_of(source), attr)
        try:
            with torch.no_grad():
                y = fn(torch.randn(4, 16), **call_kwargs)
        except Exception as exc:  # noqa: BLE001
            report.skipped[name] = f"probe failed: {type(exc).__name__}: {exc}"
            continue
        out_range = {"softmax": "unit", "softmin": "unit", "amax": "same", "amin": "same", "mean": "same",
                     "std": "nonneg", "var": "nonneg"}.get(attr, "real")
        report.specs.append(OperatorSpec(
            name=name, source=source, attr=attr, call="function", family=family, ranks=[2, 3, 4],
            call_kwargs=call_kwargs, output_range=out_range, example_shape=[4, 16], example_output_shape=list(y.shape),
            output_shape_rule=_SHAPE_RULES[family], version=version,
        ))
    for attr, family in (("mul", "scale_param"), ("add", "bias_param")):
        report.specs.append(OperatorSpec(
            name=f"torch.{attr}[param]", source="torch", attr=attr, call="function", family=family, ranks=[2, 3, 4],
            example_shape=[4, 16], example_output_shape=[4, 16], output_shape_rule=_SHAPE_RULES[family], version=version,
        ))


def mine_torch() -> MiningReport:
    """All torch seed operators (sorted by name) and the skipped candidates with reasons."""
    import torch

    report = MiningReport()
    torch.manual_seed(0)
    mine_elementwise_functions(report, torch.__version__)
    mine_zero_arg_modules(report, torch.__version__)
    mine_shaped(report, torch.__version__)
    report.specs.sort(key=lambda s: s.name)
    return report
