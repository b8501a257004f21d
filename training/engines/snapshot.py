"""An engine's training state copied aside and put back in place: how a PPO step past its trust region is taken back.

:class:`EngineSnapshot` copies, on the engine's own device, everything an optimizer step changes:

- the module's parameters (what the forward computes with; under ZeRO-1/2 they are views into DeepSpeed's flat
  bf16/fp32 buffer, so copying into them restores that buffer too);
- the client optimizer's parameters where they are not the module's: DeepSpeed's fp32 master partitions
  (ZeRO-1/2, ``single_partition_of_fp32_groups``) or its stage-0 mixed-precision optimizer's fp32 groups;
- the client optimizer's state per parameter (AdamW's ``exp_avg``, ``exp_avg_sq`` and ``step``), including its
  absence: a parameter that had no state yet (a fresh AdamW, which creates it at its first step) has none again
  after :meth:`restore`, so the next step is a first step again;
- every param group's settings (the learning rate a warm-up set), the numeric bookkeeping of DeepSpeed's wrapper
  optimizer and of its loss scaler (``micro_step_id``, a dynamic loss scale's value and iteration), the engine's
  step counters (``global_steps``, ``global_samples``, ``micro_steps``, ``skipped_steps``) and an LR scheduler's
  state where the engine has one.

:meth:`restore` copies all of it back in place (the tensors keep their storage: the optimizer's state keys, the
module's views into flat buffers and anything else that holds them stay valid), so weights, Adam moments and step
counts are bit for bit what they were at :meth:`capture`. :meth:`capture` may be called again to move the snapshot
forward (it reuses its buffers).

Cost: one copy of the weights and of the optimizer state, on the same device. With bf16 weights, fp32 masters and
fp32 AdamW moments that is 2 + 4 + 8 = 14 bytes a parameter (84 MB for the learning curve's 6M-parameter actor;
21 GB for a 1.5B model), 12 with fp32 training at stage 0 (the parameters are the optimizer's). Each capture and
restore is a device-to-device copy of that size.

ZeRO-3 (parameters partitioned across ranks, not materialised in the module) is refused. ZeRO-1/2 over several
data-parallel ranks work rank by rank: each rank keeps its own partition; the caller must take the same decision on
every rank (the PPO trust region all-reduces its measure).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

#: Engine attributes a step advances (DeepSpeed's ``DeepSpeedEngine`` counters).
ENGINE_COUNTERS = ("global_steps", "global_samples", "micro_steps", "skipped_steps")


def _inner_optimizer(engine: Any) -> torch.optim.Optimizer:
    opt = getattr(engine, "optimizer", None)
    if opt is None:
        raise ValueError("this engine has no optimizer (a frozen engine): there is no training state to snapshot")
    inner = opt if isinstance(opt, torch.optim.Optimizer) else getattr(opt, "optimizer", None)
    if not isinstance(inner, torch.optim.Optimizer):
        raise NotImplementedError(f"snapshots need a torch client optimizer; this engine's optimizer is "
                                  f"{type(opt).__name__} wrapping {type(inner).__name__}")
    return inner


def _scalars(obj: Any) -> dict[str, Any]:
    """``obj``'s plain numeric attributes (int, float, bool), by name."""
    if obj is None:
        return {}
    return {k: v for k, v in vars(obj).items() if type(v) in (int, float, bool)}


class EngineSnapshot:
    """A copy of an engine's weights and optimizer state, restorable in place (see the module docstring)."""

    def __init__(self, engine: Any) -> None:
        if getattr(engine, "zero_optimization_stage", lambda: 0)() == 3:
            raise NotImplementedError("a snapshot of a ZeRO-3 engine is not supported: its parameters are partitioned "
                                      "across ranks (supported: ZeRO stage 0, 1 and 2)")
        self.engine = engine
        self.optimizer = _inner_optimizer(engine)
        self.wrapper = None if engine.optimizer is self.optimizer else engine.optimizer
        seen: set[int] = set()
        self.params: list[Tensor] = []  # the live tensors whose values are copied (module's, then optimizer's)
        for p in [*engine.module.parameters(), *(q for g in self.optimizer.param_groups for q in g["params"])]:
            if id(p) not in seen:
                seen.add(id(p))
                self.params.append(p)
        self.keys: list[Tensor] = [q for g in self.optimizer.param_groups for q in g["params"]]
        self._saved: list[Tensor] = []
        self._states: list[dict[str, Any] | None] = []
        self.capture()

    def capture(self) -> None:
        """Copy the engine's present state into the snapshot (buffers reused where their shapes still fit)."""
        with torch.no_grad():
            if not self._saved:
                self._saved = [p.detach().clone() for p in self.params]
            else:  # one multi-tensor copy: a 1.5B model has ~340 parameter tensors
                torch._foreach_copy_(self._saved, [p.detach() for p in self.params])
            states: list[dict[str, Any] | None] = []
            for i, key in enumerate(self.keys):
                live = self.optimizer.state.get(key)
                if not live:
                    states.append(None)
                    continue
                old = self._states[i] if i < len(self._states) else None
                saved: dict[str, Any] = {}
                for name, v in live.items():
                    if torch.is_tensor(v):
                        reuse = old.get(name) if old else None
                        if (torch.is_tensor(reuse) and reuse.shape == v.shape and reuse.dtype == v.dtype
                                and reuse.device == v.device):
                            saved[name] = reuse.copy_(v)
                        else:
                            saved[name] = v.detach().clone()
                    else:
                        saved[name] = v
                states.append(saved)
            self._states = states
        self._groups = [{k: v for k, v in g.items() if k != "params"} for g in self.optimizer.param_groups]
        self._counters = {k: getattr(self.engine, k) for k in ENGINE_COUNTERS if hasattr(self.engine, k)}
        self._wrapper = _scalars(self.wrapper)
        self._scaler = _scalars(getattr(self.wrapper, "loss_scaler", None))
        sched = getattr(self.engine, "lr_scheduler", None)
        self._sched = sched.state_dict() if sched is not None and hasattr(sched, "state_dict") else None

    def restore(self) -> None:
        """Put the captured state back in place: weights, optimizer state (or its absence), settings, counters."""
        with torch.no_grad():
            torch._foreach_copy_([p.data for p in self.params], self._saved)
            for key, saved in zip(self.keys, self._states):
                if saved is None:
                    self.optimizer.state.pop(key, None)  # a fresh AdamW: the next step creates it as a first step
                    continue
                live = self.optimizer.state[key]
                for name in [n for n in live if n not in saved]:
                    del live[name]
                for name, v in saved.items():
                    cur = live.get(name)
                    if torch.is_tensor(v) and torch.is_tensor(cur) and cur.shape == v.shape and cur.dtype == v.dtype:
                        cur.copy_(v)
                    else:
                        live[name] = v.clone() if torch.is_tensor(v) else v
        for group, saved_group in zip(self.optimizer.param_groups, self._groups):
            group.update(saved_group)
        for k, v in self._counters.items():
            setattr(self.engine, k, v)
        for obj, values in ((self.wrapper, self._wrapper), (getattr(self.wrapper, "loss_scaler", None), self._scaler)):
            for k, v in values.items():
                setattr(obj, k, v)
        if self._sched is not None:
            self.engine.lr_scheduler.load_state_dict(self._sched)

    @property
    def nbytes(self) -> int:
        """Bytes the snapshot holds (weights, masters and optimizer state)."""
        n = sum(t.numel() * t.element_size() for t in self._saved)
        for st in self._states:
            n += sum(v.numel() * v.element_size() for v in (st or {}).values() if torch.is_tensor(v))
        return n
