"""Training and held-out tasks of the elementwise-chain family, composed by the data pipeline.

A task is a chain of 1-4 operators of :data:`~.ops.OPS` applied to one tensor of rank 2-4. Chains are
drawn domain-aware (``sqrt``/``log`` only on non-negative/positive values, at most one operator that
grows without bound), planned and rendered by the pipeline's rule composer
(:func:`~cuda_agent.training.synthesis.compose_rules.plan_fixed_chain`,
:func:`~cuda_agent.training.synthesis.task_render.render_task`: KernelBench format with ``CPU_SIZES``),
and kept only when their output is finite and informative on a sample of their inputs.

Held-out tasks are drawn first, from their own random stream. Training tasks are then
*decontaminated* against them: a training chain is dropped when it equals a held-out chain or computes
the same function on a held-out task's inputs (within the harness tolerance, atol = rtol = 1e-2), i.e.
when its solution replayed unchanged would pass that held-out task. :func:`memorisation_rate` measures
what the issue asks: the share of held-out tasks the best single training solution passes.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import torch

from cuda_agent.schemas.task import TaskManifest
from cuda_agent.training.kernel_family.ops import GROWING, OPS, chain_apply
from cuda_agent.training.synthesis.compose_rules import ChainError, plan_fixed_chain
from cuda_agent.training.synthesis.operators import range_satisfies
from cuda_agent.training.synthesis.size_space import SizeSpace, default_cpu_sizes
from cuda_agent.training.synthesis.task_render import TaskPlan, render_task

#: Full (GPU) sizes: 0.5-16 M elements, so one pass over memory takes tens of microseconds on an H200 and
#: fused and unfused kernels time apart clearly.
FULL_SIZES = SizeSpace(batch=[16, 32, 64, 128], batch_nd=[8, 16, 32], features=[4096, 8192, 16384, 32768],
                       channels=[16, 32, 64], spatial=[64, 128, 256], seq=[256, 512, 1024], max_elements=2**24)

#: Chain length weights (1, 2, 3, 4 operators).
LENGTH_WEIGHTS = (0.1, 0.35, 0.35, 0.2)
#: Harness tolerance (paper preset) used by the equivalence checks.
ATOL = RTOL = 1e-2


@dataclass
class FamilyTask:
    """One task of the family: its chain, plan and KernelBench-format code."""

    index: int
    chain: list[str]
    plan: TaskPlan
    code: str
    split: Literal["train", "heldout"]
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def name(self) -> str:
        """Short name shown in the task prompt (``# Task: NAME``)."""
        return f"chain_{self.split}_{self.index:05d}"

    @property
    def id(self) -> str:
        """Stable task id."""
        return f"family/{self.name}"

    def manifest(self, backend: str) -> TaskManifest:
        """The task manifest the given backend evaluates (``cpu``: the ``CPU_SIZES`` variant), built without a probe."""
        from cuda_agent.harness.tasks import apply_cpu_sizes, manifest_from_facts

        cpu = backend == "cpu"
        code = apply_cpu_sizes(self.code, self.id) if cpu else self.code
        in_shape = self.plan.cpu_input_shape if cpu else self.plan.input_shape
        out_shape = self.plan.cpu_output_shape if cpu else self.plan.output_shape
        numel = 1
        for d in in_shape:
            numel *= d
        gen = self.plan.generator
        lo, hi = (gen.low, gen.high) if gen.kind == "uniform" else (-5.0, 5.0)
        facts = {
            "inputs": [{"name": "input0", "kind": "tensor", "shape": list(in_shape), "dtype": "float32",
                        "min": lo, "max": hi, "nbytes": 4 * numel}],
            "outputs": [{"name": "output0", "shape": list(out_shape), "dtype": "float32", "nbytes": 4 * numel}],
            "init_inputs": [], "flops": float(numel * len(self.chain)), "stochastic": False,
            "device": "cpu" if cpu else "cuda", "torch": torch.__version__,
        }
        meta = {"family": "elementwise_chain", "chain": list(self.chain), "split": self.split}
        if cpu:
            meta["sizes"] = "cpu"
        m = manifest_from_facts(code, facts, id=self.id, source=f"kernel_family:{self.split}", meta=meta)
        return m.model_copy(update={"name": self.name})


def draw_chain(rng: random.Random, lengths: Sequence[float] = LENGTH_WEIGHTS) -> list[str]:
    """A domain-aware chain of operator keys, its length drawn with weights ``lengths`` (1, 2, ... operators;
    the first operator's domain sets the input generator)."""
    length = rng.choices(range(1, len(lengths) + 1), weights=lengths)[0]
    keys = sorted(OPS)
    chain: list[str] = []
    value_range = "real"
    for _ in range(length):
        options = []
        for k in keys:
            op = OPS[k]
            if chain and not range_satisfies(value_range, op.spec.domain):
                continue
            if k in GROWING and any(c in GROWING for c in chain):
                continue
            if chain and k == chain[-1]:
                continue  # relu(relu(x)) and the like add nothing
            options.append(k)
        k = rng.choice(options)
        chain.append(k)
        value_range = OPS[k].spec.output_range  # the family has no range-keeping ('same') operator
    return chain


def sample_input(plan_or_chain: TaskPlan | Sequence[str], n: int = 4096, seed: int = 0) -> torch.Tensor:
    """``n`` values drawn the way the task's ``get_inputs`` draws them (normal, or uniform in the domain)."""
    from cuda_agent.training.synthesis.operators import generator_for_domain

    if isinstance(plan_or_chain, TaskPlan):
        gen = plan_or_chain.generator
    else:
        gen = generator_for_domain(OPS[plan_or_chain[0]].spec.domain)
    g = torch.Generator().manual_seed(seed)
    if gen.kind == "normal":
        return torch.randn(n, generator=g)
    return torch.rand(n, generator=g) * (gen.high - gen.low) + gen.low


def informative(chain: Sequence[str], x: torch.Tensor) -> bool:
    """The chain's output on ``x`` is finite everywhere and not near-constant."""
    with torch.no_grad():
        y = chain_apply(list(chain), x)
    if not bool(torch.isfinite(y).all()):
        return False
    return float(y.std()) > 1e-3 * max(1.0, float(y.abs().mean()))


class EquivalenceProbe:
    """Which held-out tasks a chain's solution would pass, replayed unchanged (harness tolerance).

    Every held-out task is checked on one shared sample of its input distribution (one per generator
    kind), so a chain is evaluated once per kind, not once per held-out task.
    """

    def __init__(self, heldout: Sequence[FamilyTask], n: int = 512) -> None:
        self.inputs: dict[str, torch.Tensor] = {}
        rows: dict[str, list[tuple[int, torch.Tensor]]] = {}
        for h in heldout:
            key = h.plan.generator.model_dump_json()
            if key not in self.inputs:
                self.inputs[key] = sample_input(h.plan, n=n, seed=1000 + len(self.inputs))
            with torch.no_grad():
                rows.setdefault(key, []).append((h.index, chain_apply(h.chain, self.inputs[key])))
        self.targets = {k: ([i for i, _ in v], torch.stack([t for _, t in v])) for k, v in rows.items()}

    def matches(self, chain: Sequence[str]) -> list[int]:
        """Indices of the held-out tasks the chain computes within atol = rtol = 1e-2."""
        hits: list[int] = []
        with torch.no_grad():
            for key, x in self.inputs.items():
                y = chain_apply(list(chain), x)
                if not bool(torch.isfinite(y).all()):
                    continue
                indices, targets = self.targets[key]
                ok = ((y - targets).abs() <= ATOL + RTOL * targets.abs()).all(dim=1)
                hits += [indices[j] for j in ok.nonzero().flatten().tolist()]
        return sorted(hits)


def _plan(chain: list[str], rng: random.Random, full: SizeSpace, cpu: SizeSpace) -> TaskPlan:
    for _ in range(50):
        try:
            return plan_fixed_chain([OPS[k].spec for k in chain], rng, full, cpu_sizes=cpu)
        except ChainError:
            continue
    raise ChainError(f"no sizes fit chain {chain} within max_elements={full.max_elements}")


def _draw_tasks(n: int, split: Literal["train", "heldout"], rng: random.Random, full: SizeSpace, cpu: SizeSpace,
                exclude: set[tuple[str, ...]], max_tries: int, lengths: Sequence[float]) -> list[FamilyTask]:
    out: list[FamilyTask] = []
    seen = set(exclude)
    tries = 0
    while len(out) < n and tries < max_tries:
        tries += 1
        chain = draw_chain(rng, lengths)
        if tuple(chain) in seen or not informative(chain, sample_input(chain, n=512, seed=tries)):
            continue
        seen.add(tuple(chain))
        plan = _plan(chain, rng, full, cpu)
        doc = " -> ".join(chain)
        out.append(FamilyTask(index=len(out), chain=chain, plan=plan, code=render_task(plan, description=doc), split=split))
    return out


def family_tasks(n_train: int, n_heldout: int, seed: int = 0, full: SizeSpace | None = None,
                 cpu: SizeSpace | None = None, lengths: Sequence[float] = LENGTH_WEIGHTS,
                 ) -> tuple[list[FamilyTask], list[FamilyTask], dict[str, Any]]:
    """``(train, heldout, report)``: held-out tasks first (own stream), then decontaminated training tasks.

    ``lengths``: weights of chain lengths 1, 2, ... (default :data:`LENGTH_WEIGHTS`).

    ``report`` counts what decontamination removed and the memorisation rates before and after it.
    Asking for more distinct chains than the family has returns fewer tasks (``report['train']``).
    """
    full = full or FULL_SIZES
    cpu = cpu or default_cpu_sizes()
    heldout = _draw_tasks(n_heldout, "heldout", random.Random(f"heldout:{seed}"), full, cpu, set(), 50 * n_heldout + 100,
                          lengths)
    held_chains = {tuple(t.chain) for t in heldout}
    candidates = _draw_tasks(n_train, "train", random.Random(f"train:{seed}"), full, cpu, held_chains,
                             30 * n_train + 1000, lengths)
    probe = EquivalenceProbe(heldout)
    train, dropped = [], []
    for t in candidates:
        t.meta["heldout_matches"] = probe.matches(t.chain)
        (dropped if t.meta["heldout_matches"] else train).append(t)
    for i, t in enumerate(train):
        t.index = i
    report = {
        "train": len(train), "heldout": len(heldout), "decontamination_dropped": len(dropped),
        "dropped_chains": [" -> ".join(t.chain) for t in dropped][:50],
        "memorisation_before": max((len(t.meta["heldout_matches"]) for t in candidates), default=0) / max(1, len(heldout)),
        "memorisation_after": memorisation_rate(train, heldout),
    }
    return train, heldout, report


def memorisation_rate(train: Sequence[FamilyTask], heldout: Sequence[FamilyTask]) -> float:
    """Share of held-out tasks passed by the best single training solution replayed unchanged.

    A training task's solution computes its chain; replayed on a held-out task it passes when that chain
    computes the held-out chain on the held-out task's inputs within the harness tolerance.
    """
    if not heldout:
        return 0.0
    probe = EquivalenceProbe(heldout)
    distinct = {tuple(t.chain) for t in train}
    return max((len(probe.matches(c)) for c in distinct), default=0) / len(heldout)
