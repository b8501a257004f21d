"""The input sets a reference process holds, in one place: made from seeds, kept pristine, dropped, made again.

Inside the trusted reference process (:mod:`cuda_agent.harness.reference`): each set is generated on the device
from a seed the trusted side chose (``get_inputs()`` under ``manual_seed(seed)`` with the device as default), the
reference model runs first on it, and the pristine inputs, the expected outputs and the inputs'
fingerprints stay here. Device allocations a set was exported in (fresh sets handed over by descriptor) are
released with it. Because a set is fully determined by its seed, :meth:`HeldSets.regenerate` makes its inputs again
(a baseline that wrote to them; later, sets dropped to save device memory).
"""

from __future__ import annotations

import sys
import types
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from cuda_agent.errors import CudaAgentError


class ReferenceError_(CudaAgentError):
    """The reference process failed (bad task code, crash); the message says where."""


def load_task_module(code: str, name: str = "cuda_agent_task_reference") -> types.ModuleType:
    """Execute task source in a fresh module namespace (the trusted copy from the task store)."""
    module = types.ModuleType(name)
    module.__file__ = f"<task {name}>"
    sys.modules[name] = module
    exec(compile(code, module.__file__, "exec"), module.__dict__)
    for attr in ("Model", "get_inputs", "get_init_inputs"):
        if not hasattr(module, attr):
            raise ReferenceError_(f"task code defines no {attr!r}; a KernelBench task needs Model, get_inputs, get_init_inputs")
    return module


def generate_inputs(torch: Any, get_inputs: Callable[[], Any], seed: int, device: Any) -> list[Any]:
    """One input set: ``get_inputs()`` under ``manual_seed(seed)`` with ``device`` as the default device.

    The reference process and, for seeded input sets, the candidate runner (before the candidate's code is
    imported) both call this, so the same seed gives the same tensors on the same device and torch; the trusted side
    compares fingerprints and hands over any set that differs.
    """
    torch.manual_seed(seed)
    with torch.device(device):
        raw = list(get_inputs())
    return [x.to(device) if isinstance(x, torch.Tensor) else x for x in raw]


def jsonable(value: Any) -> Any:
    """``value`` as JSON values (numbers, strings, bools, None and lists of them), else :class:`ReferenceError_`."""
    if isinstance(value, (bool, int, float, str)) or value is None:
        return value
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    raise ReferenceError_(
        f"get_init_inputs() returned a {type(value).__name__}; only numbers, strings, bools and lists are supported"
    )


@dataclass
class HeldSet:
    """One set in the reference process."""

    seed: int
    inputs: list[Any]
    expected: list[Any]
    fingerprints: list[str | None]
    #: Device allocations (VMM handles) the set was exported in for a hand-over by descriptor.
    exports: list[int] = field(default_factory=list)
    #: Their bytes, in the same order.
    export_bytes: list[int] = field(default_factory=list)
    #: RMS magnitude of each floating expected output, by position (kept for the scale-aware comparison).
    rms: dict[int, float] = field(default_factory=dict)
    #: A widened set: its plans and the share of the full widening it was made with (None: an ordinary set).
    widen: list[Any] | None = None
    shrink: float | None = None
    #: An ordinary set's noise floor by output position (harness/noise_floor.py; None: not measured yet).
    noise: dict[int, float] | None = None


class HeldSets:
    """Every input set of one reference process, by the index the trusted side gave it."""

    def __init__(self, torch: Any, get_inputs: Callable[[], Any], model: Any, device: Any) -> None:
        self.torch = torch
        self.get_inputs = get_inputs
        self.model = model
        self.device = device
        self.sets: dict[int, HeldSet] = {}
        #: Peak device bytes of one reference forward beyond its inputs and outputs (CUDA; 0 elsewhere).
        self.work_bytes = 0
        #: Highest device bytes allocated before the last reset of torch's peak counter (a session's peak is the
        #: larger of this and the counter; :meth:`take_peak` resets both).
        self.peak_seen = 0
        #: The sensitivity gate's findings of the last widened set made (None: a step that passed it).
        self.gate_notes: list[str | None] = []

    def take_peak(self) -> int:
        """Peak device bytes allocated since the last call (CUDA), then start counting again."""
        torch = self.torch
        peak = max(self.peak_seen, int(torch.cuda.max_memory_allocated(self.device)))
        torch.cuda.reset_peak_memory_stats(self.device)
        self.peak_seen = 0
        return peak

    def __contains__(self, k: int) -> bool:
        return k in self.sets

    def __getitem__(self, k: int) -> HeldSet:
        return self.sets[k]

    def fingerprints_of(self, values: list[Any]) -> list[str | None]:
        """Fingerprints of the tensors among ``values`` (None for other values)."""
        from cuda_agent.harness.compare import fingerprint

        return [fingerprint(x) if isinstance(x, self.torch.Tensor) else None for x in values]

    def make(self, k: int, seed: int, widen: list[Any] | None = None,
             gate: tuple[float, float] | None = None, shrink_at: float | None = None) -> HeldSet | None:
        """Set ``k`` from ``seed``: inputs generated on the device, the reference run FIRST, on them.

        ``widen``: one plan per input (:mod:`~cuda_agent.harness.widening`); the widening is halved until the
        reference output is finite (and, with ``gate`` (atol, rtol), not too sensitive to grade on:
        :mod:`~cuda_agent.harness.widening_gate`), and the set is not made (None) when even the mildest widening
        is not; ``shrink_at``: only that share of the widening, ungated (a set made again as it was made). The
        peak memory of the forward beyond its inputs and outputs is recorded in ``work_bytes`` (CUDA).

        Memory: one set's inputs, its outputs and the forward's temporaries, nothing more (the memory plan counts
        exactly that for a set being made; KernelBench inputs are up to 8 GiB each). The forward runs on the held
        inputs, not on copies: a reference that writes into its inputs is seen by their fingerprints and the
        inputs are made again from the seed; an output that shares memory with an input is copied.
        """
        torch = self.torch
        cuda = self.device.type == "cuda"
        shrinks: list[float | None] = [None]
        self.gate_notes = []
        if widen is not None:
            from cuda_agent.harness.widening import shrink_steps

            shrinks = [shrink_at] if shrink_at is not None else list(shrink_steps(widen))
        for shrink in shrinks:
            inputs = self._inputs(seed, widen, shrink)
            prints = self.fingerprints_of(inputs)
            if cuda:
                torch.cuda.synchronize(self.device)
                base = torch.cuda.memory_allocated(self.device)
                self.peak_seen = max(self.peak_seen, torch.cuda.max_memory_allocated(self.device))
                torch.cuda.reset_peak_memory_stats(self.device)
            with torch.no_grad():
                out = self.model(*inputs)
            expected = list(out) if isinstance(out, (tuple, list)) else [out]
            del out
            if cuda:
                torch.cuda.synchronize(self.device)
                out_bytes = sum(e.numel() * e.element_size() for e in expected if isinstance(e, torch.Tensor))
                self.work_bytes = max(self.work_bytes, torch.cuda.max_memory_allocated(self.device) - base - out_bytes)
            expected = self._apart_from(expected, inputs)
            if self.fingerprints_of(inputs) != prints:  # the reference wrote into its inputs: the seed's again
                inputs = self._inputs(seed, widen, shrink)
                prints = self.fingerprints_of(inputs)
            if shrink is None:
                break
            from cuda_agent.harness.widening import finite_outputs

            if finite_outputs(torch, expected):
                if gate is None or shrink_at is not None or any(p is not None and p[0] == "dup" for p in widen):
                    break
                from cuda_agent.harness.widening import NOISE_FLOOR
                from cuda_agent.harness.widening_gate import sensitive

                self.gate_notes.append(sensitive(torch, self.model, inputs, widen, expected, gate, NOISE_FLOOR))
                if self.gate_notes[-1] is None:
                    break
            inputs, expected = [], []  # the next, milder widening is made without these alive
        else:
            return None  # not finite at any widening: inconclusive, nothing kept
        held = HeldSet(seed, inputs, expected, prints, widen=widen, shrink=shrink)
        self.sets[k] = held
        return held

    def _inputs(self, seed: int, widen: list[Any] | None, shrink: float | None) -> list[Any]:
        """A set's inputs from its seed, widened where ``shrink`` is given (each pristine tensor freed as soon as
        its widened one exists)."""
        inputs = generate_inputs(self.torch, self.get_inputs, seed, self.device)
        if widen is not None and shrink is not None:
            from cuda_agent.harness.widening import widen_inputs

            inputs = widen_inputs(self.torch, inputs, widen, shrink, consume=True)
        return inputs

    def _apart_from(self, expected: list[Any], inputs: list[Any]) -> list[Any]:
        """The expected outputs detached, each one that shares memory with an input copied (an identity-like
        reference must not make the kept expected output the pristine input itself)."""
        torch = self.torch
        held = {x.untyped_storage().data_ptr() for x in inputs if isinstance(x, torch.Tensor) and x.numel()}
        out = []
        for e in expected:
            if isinstance(e, torch.Tensor):
                e = e.detach()
                if e.numel() and e.untyped_storage().data_ptr() in held:
                    e = e.clone()
            out.append(e)
        return out

    def regenerate(self, k: int) -> None:
        """Make set ``k``'s inputs again from its seed (the expected outputs are unchanged: same seed, same data)."""
        held = self.sets[k]
        held.inputs = self._inputs(held.seed, held.widen, held.shrink)

    def changed(self) -> list[int]:
        """Sets whose pristine inputs no longer match their fingerprints (a candidate wrote through IPC, T5)."""
        return [k for k, s in self.sets.items() if self.fingerprints_of(s.inputs) != s.fingerprints]

    def drop(self, ks: list[int], release: Callable[[int], None]) -> list[int]:
        """Forget sets ``ks``; ``release`` frees each device allocation they were exported in. Returns those whose
        pristine inputs had changed (checked before they are freed, so a set dropped to save memory is still
        checked for T5 as the closing check would have)."""
        changed = []
        for k in ks:
            held = self.sets.pop(k, None)
            if held is None:
                continue
            if self.fingerprints_of(held.inputs) != held.fingerprints:
                changed.append(k)
            for handle in held.exports:
                release(handle)
        return changed

    def release_exports(self, k: int, release: Callable[[int], None]) -> tuple[int, int]:
        """Free the device allocations set ``k`` was exported in before (their hand-overs are complete, or the
        runner dropped its copy); returns how many, and their bytes."""
        held = self.sets.get(k)
        if held is None:
            return 0, 0
        for handle in held.exports:
            release(handle)
        freed = (len(held.exports), sum(held.export_bytes))
        held.exports, held.export_bytes = [], []
        return freed
