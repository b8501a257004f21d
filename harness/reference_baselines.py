"""Baselines inside the reference process: the eager model and its ``torch.compile`` wrapper, timed like the candidate.

A clean process where no candidate code ever ran (T16) times the baselines with the candidate's exact protocol
(:class:`~cuda_agent.harness.timing.DeviceTimer` built from the same
:class:`~cuda_agent.harness.messages.TimerSpec`) over the same rotated input sets. By default they run on the sets'
own tensors wherever one check call on clones showed the model leaves its inputs unchanged (a model that writes to
them is timed on clones; a set it wrote to anyway is made again from its seed).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from cuda_agent.harness.device_lock import TimingLock, shared_at

from cuda_agent.harness.messages import TimerSpec
from cuda_agent.harness.reference_sets import HeldSets, generate_inputs

#: Seed of the warm-up inputs (:meth:`Baselines.warm`): public, never used to check a candidate.
WARM_SEED = 0


class Baselines:
    """The baseline models of one reference process and how they are timed."""

    def __init__(self, torch: Any, model: Any, device: Any, sets: HeldSets, get_inputs: Any, timer: TimerSpec,
                 clone_inputs: bool, net_overhead: bool) -> None:
        self.torch = torch
        self.model = model
        self.device = device
        self.sets = sets
        self.get_inputs = get_inputs
        self.timer_spec = timer
        self.clone_inputs = clone_inputs
        self.net_overhead = net_overhead
        self.compiled: Any = None
        self.timer: Any = None
        self._mutation: dict[str, bool] = {}  # baseline kind -> writes to its inputs
        self._verified_direct: set[str] = set()  # kinds whose first batch on the sets' own tensors was checked
        #: Per baseline kind, over every :meth:`time` call (warm-ups included): timed calls, those whose host enqueue
        #: outlasted the pre-roll spin, retakes, the longest enqueue (ms).
        self.host_stats: dict[str, dict[str, float]] = {}
        #: Per baseline kind, whether its calls wait for the device (harness/spin_policy.py: timed behind the base
        #: spin once its enqueue is seen growing with its spin), as the runner's timer decides for the candidate.
        self.spin_policies: dict[str, Any] = {}

    def fn(self, which: str, compile_mode: str) -> Any:
        """The eager model, or its ``torch.compile`` wrapper (made once per process)."""
        if which == "compile":
            if self.compiled is None:
                self.compiled = self.torch.compile(self.model, mode=None if compile_mode == "default" else compile_mode)
            return self.compiled
        return self.model

    def _untimed(self, whiches: tuple[str, ...], compile_mode: str, inputs: list[Any]) -> bool:
        """One untimed forward per kind on copies of ``inputs``; True when this call compiled."""
        torch = self.torch
        first = "compile" in whiches and self.compiled is None
        with torch.no_grad():
            for which in whiches:
                self.fn(which, compile_mode)(*[x.clone() if isinstance(x, torch.Tensor) else x for x in inputs])
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        return first

    def prepare(self, which: str, k: int, compile_mode: str) -> bool:
        """One untimed call on set ``k`` so that ``torch.compile`` compiles now, outside any timing lock. Its cost
        goes into :attr:`host_stats`: ``prepare_s``; ``prepare_compiles``, frames TorchDynamo compiled in it;
        ``prepare_cold``, 1 when this process had compiled nothing before (no warm-up ran here: a process started
        after its task's warm-up, e.g. one closed under memory pressure and started again); ``prepare_guard_failures``,
        the guard failures behind a recompile (a compile after this process's warm-up compiled), each also written
        to stderr with the guard that failed."""
        import time

        from cuda_agent.harness.timing import empty_host_stats

        t0 = time.perf_counter()
        with counted_compiles(self.torch) as compiles, guard_failures_during() as reasons:
            first = self._untimed((which,), compile_mode, self.sets[k].inputs)
        stats = self.host_stats.setdefault(which, empty_host_stats())
        stats["prepare_s"] = stats.get("prepare_s", 0.0) + time.perf_counter() - t0
        stats["prepare_compiles"] = stats.get("prepare_compiles", 0) + compiles[0]
        if first:
            stats["prepare_cold"] = stats.get("prepare_cold", 0) + 1
        elif compiles[0]:
            stats["prepare_guard_failures"] = stats.get("prepare_guard_failures", 0) + len(reasons)
            print(f"reference: the {which} baseline compiled again on set {k}; guard failures: "
                  + ("; ".join(reasons) or "none recorded")[:4000], file=sys.stderr, flush=True)
        return first

    def warm(self, compile_mode: str, with_compile: bool, lock_path: str | None = None) -> bool:
        """Run the eager (and compiled) model once on inputs from a public seed: imports, kernels and compilation
        happen now, before any device slot is held. Returns True when this call compiled.

        ``lock_path``: the device's timing lock (:class:`~cuda_agent.harness.device_lock.TimingLock`). The warm-up
        holds it in the shared mode around its device work, so that it never runs beside another task's timed
        batch, and lets go of it while ``torch.compile`` compiles (CPU work that may take minutes)."""
        hold = TimingLock.at(lock_path) if lock_path else None
        with shared_at(lock_path):
            inputs = generate_inputs(self.torch, self.get_inputs, WARM_SEED, self.device)
            self._untimed(("eager",), compile_mode, inputs)
            if not with_compile:
                return False
            with released_while_compiling(self.torch, hold):
                return self._untimed(("compile",), compile_mode, inputs)

    def _timer(self) -> Any:
        if self.timer is None:
            from cuda_agent.harness.timing import DeviceTimer

            self.timer = DeviceTimer.from_spec(str(self.device), self.timer_spec)
        return self.timer

    def time(self, which: str, sets: list[int], n_calls: int, warmup: int, compile_mode: str) -> list[float]:
        """Per-call ms of a baseline over rotated sets, same protocol as the candidate (the caller holds the lock)."""
        import gc

        from cuda_agent.harness.spin_policy import SpinPolicy
        from cuda_agent.harness.timing import add_host_stats, empty_host_stats
        from cuda_agent.harness.timing_stats import calibrated_overhead, net_of_overhead

        torch = self.torch
        timer = self._timer()
        if self.net_overhead and timer.overhead_ms is None:
            calibrated_overhead(timer)
        fn = self.fn(which, compile_mode)
        policy = self.spin_policies.setdefault(which, SpinPolicy())
        clone = self.clone_inputs or self._mutates_inputs(which, fn, sets[0])
        samples: list[float] = []
        timer.take_host_stats()
        retries = self._allocator_counts()
        with torch.no_grad():
            for j in range(warmup + n_calls):
                inputs = self.sets[sets[j % len(sets)]].inputs
                args = [x.clone() if clone and isinstance(x, torch.Tensor) else x for x in inputs]
                # The cyclic collector is off during the call, as in the candidate's runner (harness/timing_env.py).
                gc_was_on = gc.isenabled()
                gc.disable()
                try:
                    _, ms, _ = timer.time_call(lambda: fn(*args), warm=args, policy=policy)
                finally:
                    if gc_was_on:
                        gc.enable()
                if j >= warmup:
                    samples.append(net_of_overhead(ms, timer.overhead_ms) if self.net_overhead else ms)
        if not clone and which not in self._verified_direct:
            self._verified_direct.add(which)
            self._restore_if_written(which, sets)
        stats = timer.take_host_stats()
        after = self._allocator_counts()
        stats.update({k: after[k] - retries[k] for k in after})
        add_host_stats(self.host_stats.setdefault(which, empty_host_stats()), stats)
        return samples

    def _allocator_counts(self) -> dict[str, int]:
        """The caching allocator's ``alloc_retries`` (a cudaMalloc retried after the process's cached blocks were
        freed: the device had too little free memory, so calls paid for cudaMalloc/cudaFree) and ``ooms``, on CUDA;
        nothing elsewhere. Their growth over a timed batch means the baseline was timed short of memory, slower than
        it runs with room (and every speed-up against it too large)."""
        if self.device.type != "cuda":
            return {}
        stats = self.torch.cuda.memory_stats(self.device)
        return {"alloc_retries": int(stats.get("num_alloc_retries", 0)), "ooms": int(stats.get("num_ooms", 0))}

    def _restore_if_written(self, which: str, sets: list[int]) -> None:
        """After the first batch timed on the sets' own tensors: a set whose inputs no longer match their
        fingerprints (a model that writes to its inputs only on some data) is made again from its seed, and that
        baseline kind is timed on clones from then on."""
        for k in dict.fromkeys(sets):
            held = self.sets[k]
            if self.sets.fingerprints_of(held.inputs) != held.fingerprints:
                self._mutation[which] = True
                self.sets.regenerate(k)

    def _mutates_inputs(self, which: str, fn: Any, k: int) -> bool:
        """Whether the baseline writes to its inputs: one call on clones of set ``k``, compared bit for bit with the
        originals (cached per kind)."""
        if which not in self._mutation:
            torch = self.torch
            pristine = self.sets[k].inputs
            copies = [x.clone() if isinstance(x, torch.Tensor) else x for x in pristine]
            with torch.no_grad():
                fn(*copies)
            self._mutation[which] = any(isinstance(x, torch.Tensor) and not torch.equal(x, c)
                                        for x, c in zip(pristine, copies))
        return self._mutation[which]

    def profiler_sum(self, which: str, k: int, compile_mode: str) -> float:
        """The release's profiler-sum time of a baseline on set ``k``."""
        from cuda_agent.harness.profiling import profiler_sum_ms

        torch = self.torch
        fn = self.fn(which, compile_mode)
        args = [x.clone() if isinstance(x, torch.Tensor) else x for x in self.sets[k].inputs]
        with torch.no_grad():
            return profiler_sum_ms(lambda: fn(*args), str(self.device))


@contextmanager
def released_while_compiling(torch: Any, hold: TimingLock | None) -> Iterator[None]:
    """Inside the block, ``hold``'s shared mode (taken by the caller) is let go while TorchDynamo compiles a frame
    and taken again when it has compiled, before the compiled code runs on the device. Where this torch has no
    compile callbacks, the whole block runs outside the lock (the device work of one forward beside a timed batch
    rather than minutes of compiling inside the lock, which would stall every timed batch on the device)."""
    if hold is None:
        yield
        return
    released: list[Any] = []  # the open ``hold.outside()`` while a compile runs

    def on_start(_args: Any) -> None:
        if not released:
            outside = hold.outside()
            outside.__enter__()
            released.append(outside)

    def on_end(_args: Any) -> None:
        if released:
            released.pop().__exit__(None, None, None)

    with compile_callbacks(on_start, on_end) as installed:
        if not installed:
            with hold.outside():
                yield
            return
        try:
            yield
        finally:
            if released:  # a compile that ended without its end callback: hold what the caller will let go of
                released.pop().__exit__(None, None, None)


@contextmanager
def counted_compiles(torch: Any) -> Iterator[list[int]]:
    """Count the frames TorchDynamo starts compiling inside the block (``[n]``, read after it); stays ``[0]``
    where this torch has no compile callbacks."""
    count = [0]

    def on_start(_args: Any) -> None:
        count[0] += 1

    with compile_callbacks(on_start):
        yield count


@contextmanager
def guard_failures_during() -> Iterator[list[str]]:
    """The reasons TorchDynamo recorded for guards that failed inside the block (the guard and why: a recompile's
    cause), read after it; stays empty where TorchDynamo was never imported or keeps no such record."""
    reasons: list[str] = []
    failures = getattr(sys.modules.get("torch._dynamo.utils"), "guard_failures", None)
    before = {code: len(v) for code, v in failures.items()} if failures is not None else {}
    try:
        yield reasons
    finally:
        failures = getattr(sys.modules.get("torch._dynamo.utils"), "guard_failures", None)
        for code, found in list((failures or {}).items()):
            name = getattr(code, "co_name", str(code))
            reasons.extend(f"{name}: {r}" for r in list(found)[before.get(code, 0):])


@contextmanager
def compile_callbacks(on_start: Any, on_end: Any = None) -> Iterator[bool]:
    """TorchDynamo's compile-start (and end) callbacks registered for the block; yields False, registering
    nothing, where this torch has none."""
    try:
        from torch._dynamo.callback import callback_handler
    except ImportError:
        yield False
        return
    callback_handler.register_start_callback(on_start)
    if on_end is not None:
        callback_handler.register_end_callback(on_end)
    try:
        yield True
    finally:
        callback_handler.remove_start_callback(on_start)
        if on_end is not None:
            callback_handler.remove_end_callback(on_end)
