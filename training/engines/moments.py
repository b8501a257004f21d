"""Adam's moments carried between runs: read an engine's AdamW state by parameter name, store it in 2 bytes a weight.

Why: a run that continues from a carried actor (the learning curve takes one PPO step per 10-minute device run)
otherwise starts AdamW afresh. A fresh Adam's first updates move every weight by about the full learning rate,
whatever its gradient's noise (``m_hat / sqrt(v_hat) = +-1`` at step 1). On the CPU proxy (session 32,
``benchmarks/first_turn_rl.py``, the same rollouts in every arm) the second step with Adam afresh moved the policy
twice as far in mean KL (approx_kl .0151 against .0072; the worst minibatch .075 against .025) and was cut by
``target_kl`` a minibatch earlier; with the moments carried through this module's file it took the in-memory
optimizer's step to the fourth digit (.0071866 against .0071861) and the same held-out replies. The engine's own DeepSpeed checkpoint keeps the moments too, but in fp32 (8 bytes a weight: 48 MB for
the 6M-parameter actor), over the 16 MiB a file that comes back from the device and the 64 MiB that travel to it.

**Reading and writing by name.** :func:`read_moments` returns ``exp_avg``, ``exp_avg_sq`` and the step count per
parameter name (fp32, the parameter's shape), from either optimizer our engines build:

- a plain torch optimizer over the module's parameters (ZeRO stage 0: DeepSpeed's native mode, or fp32 training);
- DeepSpeed's ZeRO-1/2 optimizer at one data-parallel rank: the client AdamW steps one flat fp32 partition per
  parameter group; each parameter's slice of it is found from where the parameter's bf16 data lies in the group's
  flat bf16 buffer (DeepSpeed points every parameter into that buffer), padding excluded.

:func:`write_moments` puts such moments into another engine over the same parameter names and shapes (a new run's
engine, built from the carried weights), creating the optimizer's state where it has none yet (AdamW creates it
lazily at its first step), with torch's own layout (a float32 ``step`` tensor, on the device for fused or
capturable AdamW). Anything else (ZeRO-3, several ranks, amsgrad, another optimizer) is refused with what is
supported.

**Two bytes a weight** (:func:`pack` / :func:`unpack`), per parameter in blocks of :data:`BLOCK` elements:

- ``s = sqrt(exp_avg_sq)`` (the gradient's RMS) as an 8-bit code on a log2 scale between the block's smallest and
  largest non-zero ``s`` (code 0 is exactly 0: a weight that never had a gradient stays at zero). Its relative
  error is at most half a step of the block's log range over 254 steps: a block spanning 30 octaves keeps ``s``
  within ~4%.
- ``r = exp_avg / s`` (the normalised momentum, about the update Adam takes; ``|r| <= (1 - beta1) /
  sqrt(1 - beta2)``-ish) as int8 scaled by the block's largest ``|r|``, then ``exp_avg = r * s``: the update's
  error is ``|r|_max / 254`` of the learning rate at most, however small ``s`` is (quantising ``exp_avg`` itself
  linearly would lose the small-``s`` weights of a block, whose updates are as large as any).

The step counts are stored exactly. Tested in ``tests/training/test_moments.py``: a step after a round trip
through the file matches the step the original engine takes.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

#: Elements per quantisation block (one scale for r, a log range for s).
BLOCK = 256
#: The file format's name, in every moments file's metadata.
FORMAT = "cuda-agent-adam-moments/1"


@dataclass
class AdamMoments:
    """AdamW state by parameter name: fp32 tensors of each parameter's shape, and its step count."""

    exp_avg: dict[str, Tensor]
    exp_avg_sq: dict[str, Tensor]
    steps: dict[str, int]


# -- where each parameter's state lies -------------------------------------------------------------------------


def _check_adam(opt: torch.optim.Optimizer) -> None:
    if not isinstance(opt, (torch.optim.Adam, torch.optim.AdamW)):
        raise NotImplementedError(f"carrying optimizer moments supports torch Adam/AdamW; this engine's optimizer is "
                                  f"{type(opt).__name__}")
    if any(g.get("amsgrad") for g in opt.param_groups):
        raise NotImplementedError("carrying optimizer moments does not support amsgrad (its max_exp_avg_sq is not kept)")


def _slots(engine: Any) -> list[tuple[str, torch.optim.Optimizer, Tensor, dict[str, Any], slice | None, torch.Size]]:
    """Per named parameter: (name, the torch optimizer, the tensor its state is keyed by, its param group, the
    slice of that tensor that is this parameter (None: the whole tensor), the parameter's shape)."""
    module = getattr(engine, "module", None)
    if module is None:
        raise TypeError(f"expected a DeepSpeed engine (with .module and .optimizer), got {type(engine).__name__}")
    names = {id(p): n for n, p in module.named_parameters()}
    opt = engine.optimizer
    if opt is None:
        raise ValueError("this engine has no optimizer (a frozen engine): there are no moments to carry")
    if hasattr(opt, "bit16_groups") and hasattr(opt, "single_partition_of_fp32_groups"):
        if any(int(c) != 1 for c in getattr(opt, "partition_count", [1])):
            raise NotImplementedError(f"carrying optimizer moments supports ZeRO-1/2 at one data-parallel rank; this "
                                      f"engine's partitions span {list(opt.partition_count)} ranks (use DeepSpeed "
                                      "checkpoints there)")
        inner = opt.optimizer
        _check_adam(inner)
        slots = []
        for i, params in enumerate(opt.bit16_groups):
            flat16, master = opt.bit16_groups_flat[i], opt.single_partition_of_fp32_groups[i]
            if master.numel() != flat16.numel():
                raise NotImplementedError("ZeRO partition is not the whole flat group (more than one rank)")
            group = inner.param_groups[i]
            for p in params:
                offset = (p.data_ptr() - flat16.data_ptr()) // p.element_size()
                if not 0 <= offset <= flat16.numel() - p.numel():
                    raise RuntimeError(f"parameter {names.get(id(p), '?')} does not lie in its ZeRO group's flat buffer")
                slots.append((names[id(p)], inner, master, group, slice(offset, offset + p.numel()), p.shape))
        return slots
    if getattr(engine, "zero_optimization_stage", lambda: 0)() == 3:
        raise NotImplementedError("carrying optimizer moments does not support ZeRO-3 (use DeepSpeed checkpoints)")
    if not isinstance(opt, torch.optim.Optimizer):  # a wrapper around the client optimizer
        opt = getattr(opt, "optimizer", opt)
    _check_adam(opt)
    group_of = {id(p): g for g in opt.param_groups for p in g["params"]}
    missing = [n for p_id, n in names.items() if p_id not in group_of]
    trainable = {n for n, p in module.named_parameters() if p.requires_grad}
    if any(n in trainable for n in missing):
        raise RuntimeError(f"the optimizer does not hold trainable parameter(s) {missing[:5]}: not an engine over "
                           "its own module's parameters")
    return [(n, opt, p, group_of[id(p)], None, p.shape) for n, p in module.named_parameters() if id(p) in group_of]


def read_moments(engine: Any) -> AdamMoments:
    """The engine's AdamW ``exp_avg``, ``exp_avg_sq`` and step count per parameter name (fp32 copies on the CPU);
    parameters without state yet (no step taken) are absent."""
    m: dict[str, Tensor] = {}
    v: dict[str, Tensor] = {}
    steps: dict[str, int] = {}
    for name, opt, key, _group, part, shape in _slots(engine):
        st = opt.state.get(key)
        if not st or "exp_avg" not in st:
            continue
        for dest, field in ((m, "exp_avg"), (v, "exp_avg_sq")):
            t = st[field] if part is None else st[field][part]
            dest[name] = t.detach().float().reshape(shape).cpu().clone()
        steps[name] = int(float(st["step"]))
    return AdamMoments(m, v, steps)


def _new_state(opt: torch.optim.Optimizer, key: Tensor, group: dict[str, Any]) -> dict[str, Any]:
    """AdamW's state for ``key`` as torch's ``_init_group`` makes it at a first step."""
    on_device = bool(group.get("fused") or group.get("capturable"))
    step = torch.zeros((), dtype=torch.float32, device=key.device if on_device else "cpu")
    st = {"step": step, "exp_avg": torch.zeros_like(key, memory_format=torch.preserve_format),
          "exp_avg_sq": torch.zeros_like(key, memory_format=torch.preserve_format)}
    opt.state[key] = st
    return st


def write_moments(engine: Any, moments: AdamMoments) -> int:
    """Set the engine's AdamW state from ``moments`` (same parameter names and shapes); returns how many parameters
    were set. Parameters the moments lack keep their state (none, for a new engine)."""
    slots = _slots(engine)
    known = {name: shape for name, *_rest, shape in slots}
    unknown = sorted(set(moments.exp_avg) - set(known))
    if unknown:
        raise ValueError(f"the moments name {len(unknown)} parameter(s) this engine lacks, e.g. {unknown[:5]}: they "
                         "belong to another model")
    wrong = [f"{n} {tuple(moments.exp_avg[n].shape)} != {tuple(known[n])}" for n in moments.exp_avg
             if tuple(moments.exp_avg[n].shape) != tuple(known[n])]
    if wrong:
        raise ValueError(f"the moments' shapes differ from this engine's parameters: {'; '.join(wrong[:5])}")
    step_of_key: dict[int, set[int]] = {}
    done = 0
    for name, opt, key, group, part, _shape in slots:
        if name not in moments.exp_avg:
            continue
        st = opt.state.get(key) or _new_state(opt, key, group)
        for field, src in (("exp_avg", moments.exp_avg[name]), ("exp_avg_sq", moments.exp_avg_sq[name])):
            dest = st[field] if part is None else st[field][part]
            dest.copy_((src.reshape(-1) if part is not None else src).to(dest.dtype))
        step_of_key.setdefault(id(key), set()).add(moments.steps[name])
        if len(step_of_key[id(key)]) > 1:
            raise ValueError(f"parameters of one ZeRO group carry different step counts {sorted(step_of_key[id(key)])}")
        st["step"].fill_(float(moments.steps[name]))
        done += 1
    return done


# -- two bytes a weight ------------------------------------------------------------------------------------------


def _blocks(x: Tensor) -> Tensor:
    flat = x.reshape(-1).float()
    pad = (-flat.numel()) % BLOCK
    return torch.nn.functional.pad(flat, (0, pad)).view(-1, BLOCK)


def _pack_one(m: Tensor, v: Tensor) -> dict[str, Tensor]:
    numel = m.numel()
    s = _blocks(v).clamp_min(0).sqrt()
    mb = _blocks(m)
    nz = s > 0
    safe_s = torch.where(nz, s, 1.0)  # s where it is not zero (zeros are coded apart)
    r = torch.where(nz, mb / safe_s, 0.0)
    r_scale = r.abs().amax(dim=1)
    r_code = torch.round(r / torch.where(r_scale > 0, r_scale, 1.0)[:, None] * 127).to(torch.int8)
    logs = torch.where(nz, torch.log2(safe_s), 0.0)
    big = torch.finfo(torch.float32).max
    lo = torch.where(nz, logs, torch.full_like(logs, big)).amin(dim=1)
    hi = torch.where(nz, logs, torch.full_like(logs, -big)).amax(dim=1)
    empty = ~nz.any(dim=1)
    lo = torch.where(empty, 0.0, lo)
    hi = torch.where(empty, 0.0, hi)
    span = (hi - lo).clamp_min(1e-12)
    s_code = torch.where(nz, 1 + torch.round((logs - lo[:, None]) / span[:, None] * 254), 0.0).to(torch.uint8)
    # the codes without the last block's padding (a tensor of 1297 weights: 1297 bytes each, not 1536)
    return {"r": r_code.reshape(-1)[:numel], "r_scale": r_scale, "s": s_code.reshape(-1)[:numel],
            "s_range": torch.stack([lo, hi], dim=1)}


def _unpack_one(t: dict[str, Tensor], numel: int) -> tuple[Tensor, Tensor]:
    lo, hi = t["s_range"][:, 0:1], t["s_range"][:, 1:2]
    code = _blocks(t["s"].to(torch.float32))
    s = torch.where(code > 0, torch.exp2(lo + (code - 1) / 254 * (hi - lo)), torch.zeros_like(code))
    r = _blocks(t["r"].to(torch.float32)) / 127 * t["r_scale"][:, None]
    return (r * s).reshape(-1)[:numel], (s * s).reshape(-1)[:numel]


def pack(moments: AdamMoments, metadata: dict[str, str] | None = None) -> tuple[dict[str, Tensor], dict[str, str]]:
    """The moments as safetensors tensors (``<name>.r``, ``.r_scale``, ``.s``, ``.s_range``) and metadata (format,
    block, shapes and step counts as JSON, plus ``metadata``)."""
    tensors: dict[str, Tensor] = {}
    for name in sorted(moments.exp_avg):
        for k, t in _pack_one(moments.exp_avg[name], moments.exp_avg_sq[name]).items():
            tensors[f"{name}.{k}"] = t.contiguous()
    meta = {"format": FORMAT, "block": str(BLOCK),
            "shapes": json.dumps({n: list(t.shape) for n, t in sorted(moments.exp_avg.items())}),
            "steps": json.dumps(dict(sorted(moments.steps.items())))}
    for k, val in (metadata or {}).items():
        if k in meta:
            raise ValueError(f"metadata key {k!r} is reserved by the moments format")
        meta[k] = str(val)
    return tensors, meta


def unpack(tensors: dict[str, Tensor], meta: dict[str, str]) -> AdamMoments:
    """The moments :func:`pack` stored (fp32, each parameter's shape)."""
    if meta.get("format") != FORMAT:
        raise ValueError(f"not an Adam moments file of this format: format {meta.get('format')!r}, expected {FORMAT!r}")
    if int(meta["block"]) != BLOCK:
        raise ValueError(f"moments packed in blocks of {meta['block']}, this version reads blocks of {BLOCK}")
    shapes = json.loads(meta["shapes"])
    steps = {n: int(k) for n, k in json.loads(meta["steps"]).items()}
    m, v = {}, {}
    for name, shape in shapes.items():
        parts = {k: tensors[f"{name}.{k}"] for k in ("r", "r_scale", "s", "s_range")}
        numel = int(torch.Size(shape).numel())
        mm, vv = _unpack_one(parts, numel)
        m[name], v[name] = mm.view(shape), vv.view(shape)
    return AdamMoments(m, v, steps)


def save_moments(engine: Any, path: Path, metadata: dict[str, str] | None = None) -> Path:
    """Write the engine's AdamW moments to ``path`` (safetensors, ~2 bytes a weight) with ``metadata``."""
    from safetensors.torch import save_file

    tensors, meta = pack(read_moments(engine), metadata)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    save_file(tensors, str(path), metadata=meta)
    return path


def read_moments_file(path: Path) -> tuple[AdamMoments, dict[str, str]]:
    """The moments and metadata of a file :func:`save_moments` wrote."""
    from safetensors import safe_open

    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"Adam moments file {path} does not exist")
    with safe_open(str(path), framework="pt") as f:
        meta = dict(f.metadata() or {})
        tensors = {k: f.get_tensor(k) for k in f.keys()}
    return unpack(tensors, meta), meta


def load_moments(engine: Any, path: Path) -> dict[str, str]:
    """Set the engine's AdamW state from a moments file; returns the file's metadata."""
    moments, meta = read_moments_file(path)
    write_moments(engine, moments)
    return meta
