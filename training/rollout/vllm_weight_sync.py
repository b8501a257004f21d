"""In-memory weight push from the trainer to an in-process vLLM engine (no checkpoint on disk).

vLLM's engine core and workers run in other processes and talk msgpack:
torch tensors in ``collective_rpc`` arguments arrive as plain lists, so a
state dict is sent as raw bytes per tensor (:func:`pack_state_dict`) and
rebuilt in the worker (:func:`unpack_state_dict`). :class:`WeightSyncExtension`
is mixed into vLLM's worker class (``vllm.LLM(worker_extension_cls=...)``)
and loads the tensors with the worker's own ``reload_weights`` (checkpoint
names, i.e. the HF names of the actor's ``state_dict``), the same code path
as a reload from a folder.

This module imports neither vllm nor anything of the trainer, so vLLM's
worker processes can import it cheaply.
"""

from __future__ import annotations

from typing import Any

import torch

#: Qualified name given to ``vllm.LLM(worker_extension_cls=...)``.
WORKER_EXTENSION = "cuda_agent.training.rollout.vllm_weight_sync.WeightSyncExtension"

_DTYPES = {str(d): d for d in (torch.float32, torch.bfloat16, torch.float16, torch.float64, torch.int64, torch.int32,
                               torch.uint8, torch.int8, torch.bool)}


def pack_state_dict(state: dict[str, torch.Tensor]) -> list[dict[str, Any]]:
    """``[{'name', 'dtype', 'shape', 'data': bytes}, ...]``: a state dict in a form msgpack carries exactly."""
    packed = []
    for name, tensor in state.items():
        t = tensor.detach().to("cpu").contiguous()
        if str(t.dtype) not in _DTYPES:
            raise TypeError(f"cannot send tensor {name!r} of dtype {t.dtype}; supported: {', '.join(_DTYPES)}")
        data = t.reshape(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b""
        packed.append({"name": name, "dtype": str(t.dtype), "shape": list(t.shape), "data": data})
    return packed


def unpack_state_dict(packed: list[dict[str, Any]]) -> list[tuple[str, torch.Tensor]]:
    """The ``(name, tensor)`` pairs of :func:`pack_state_dict`'s output (CPU tensors, bit-identical)."""
    out = []
    for item in packed:
        dtype = _DTYPES[item["dtype"]]
        raw = torch.frombuffer(bytearray(item["data"]), dtype=torch.uint8) if item["data"] else torch.empty(0, dtype=torch.uint8)
        out.append((item["name"], raw.view(dtype).reshape(item["shape"])))
    return out


class WeightSyncExtension:
    """Methods mixed into vLLM's worker: ``collective_rpc('load_packed_weights', args=(packed,))``."""

    def load_packed_weights(self, packed: list[dict[str, Any]]) -> int:
        """Load a packed state dict (checkpoint names) into the served model in place; returns the tensor count."""
        weights = unpack_state_dict(packed)
        self.reload_weights(weights_iterator=iter(weights), is_checkpoint_format=True)  # type: ignore[attr-defined]
        return len(weights)
