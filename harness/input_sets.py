"""The input sets of one session, in one place: index -> seed, what was made, staged, handed over, dropped.

Every set a session uses is made by the reference process from a secret seed (:meth:`SetStore.make`); the
reference keeps the pristine inputs and the expected outputs, the store keeps what the session needs to know about
each set (its seed, role, descriptions, fingerprints, state) and the descriptors of sets staged for a later
hand-over. :meth:`SetStore.drop` frees sets in the reference process. Because a set is fully determined by its seed,
a dropped set can be made again (:meth:`SetStore.remake`): the step towards holding only as many sets as the
device's memory allows.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, Literal

from cuda_agent.harness._vmm import close_fds
from cuda_agent.harness.messages import OutputSpec, TensorDesc
from cuda_agent.harness.reference_messages import MadeSet

Role = Literal["verify", "timing", "fresh", "widened"]
State = Literal["made", "staged", "handed_over", "dropped"]


@dataclass
class InputSet:
    """One input set of a session."""

    index: int
    seed: int
    role: Role
    made: MadeSet
    #: 'made': the reference holds it; 'staged': ready for a hand-over (files, handles or descriptors);
    #: 'handed_over': the runner holds it; 'dropped': freed in the reference process.
    state: State = "made"
    #: Descriptors of a set staged in memory files or device allocations (ours to close), until it is handed over.
    fds: list[int] = field(default_factory=list)
    #: A widened set's plans (harness/widening.py): it is made again with them.
    widen: list[Any] | None = None
    #: The reference holds device allocations it was exported in for a hand-over (released when the runner drops
    #: its copy, or with the set).
    exported: bool = False

    @property
    def tensors(self) -> list[TensorDesc]:
        """How its inputs are described to the runner (where their bytes are, once staged)."""
        return self.made.tensors

    @property
    def fingerprints(self) -> list[str | None]:
        """Fingerprints of its pristine inputs."""
        return self.made.input_fingerprints

    @property
    def outputs(self) -> list[OutputSpec]:
        """The reference's outputs on it (dtype and shape)."""
        return self.made.outputs


class SetStore:
    """The sets of one session and the operations on them (see the module docstring)."""

    def __init__(self, reference: object, exchange: str, *, reference_sets: int | None = None,
                 runner_sets: int | None = None) -> None:
        """:param reference: the session's :class:`~cuda_agent.harness.reference_client.ReferenceClient`.
        :param exchange: the runner's exchange folder (staged files go there).
        :param reference_sets: sets the reference process may hold at once (None: every set); the least recently
            used one is dropped to make room and made again from its seed when it is needed.
        :param runner_sets: sets the runner may hold at once (None: every set); see
            :meth:`~cuda_agent.harness.session.Session.ensure_in_runner`."""
        self.reference = reference
        self.exchange = exchange
        self.sets: dict[int, InputSet] = {}
        self.reference_cap = reference_sets
        self.runner_cap = runner_sets
        #: Sets the reference process holds / the runner holds, least recently used first.
        self.in_reference: OrderedDict[int, None] = OrderedDict()
        self.in_runner: OrderedDict[int, None] = OrderedDict()
        #: Sets made again from their seeds; dropped sets whose pristine inputs had changed (T5); peak device bytes
        #: the reference process reported.
        self.remade = 0
        #: Bytes of export allocations freed because the runner had dropped its copy (MemoryInfo).
        self.exports_released_bytes = 0
        self.changed: list[int] = []
        self.reference_peak_bytes: int | None = None

    # ------------------------------------------------------------------ views
    def __contains__(self, k: int) -> bool:
        return k in self.sets

    def __getitem__(self, k: int) -> InputSet:
        return self.sets[k]

    def __len__(self) -> int:
        return len(self.sets)

    def indices(self, role: Role | None = None) -> list[int]:
        """Indices of the sets (of ``role``), in the order they were made."""
        return [k for k, s in self.sets.items() if role is None or s.role == role]

    def seeds(self) -> list[int]:
        """Every set's seed, in index order (recorded with the result once the session is over)."""
        return [s.seed for s in self.sets.values()]

    def input_bytes(self) -> int:
        """Bytes of one set's tensors (the first set's; every set of a task has the same shapes)."""
        first = next(iter(self.sets.values()), None)
        return first.made.input_bytes if first else 0

    # ------------------------------------------------------------------ operations
    def _new_index(self) -> int:
        counter = getattr(self.reference, "next_set_index", None)  # unique in a process that sessions share
        return int(counter()) if counter is not None else len(self.sets)

    def make(self, seed: int, role: Role, *, stage: bool, transport: str) -> int:
        """A new set from ``seed``, made by the reference (and staged for the runner by ``transport`` when
        ``stage``); returns its index. The reference's least recently used set is dropped first when it is full."""
        k = self._new_index()
        self.make_room_in_reference(keep=())
        made = self.reference.make_set(k, seed, self.exchange, transport, stage)  # type: ignore[attr-defined]
        self.sets[k] = InputSet(k, seed, role, made, "staged" if stage else "made")
        self.in_reference[k] = None
        return k

    def make_widened(self, seed: int, plans: list[Any], gate: list[float] | None = None) -> tuple[int | None, MadeSet]:
        """A widened set from ``seed`` (harness/widening.py) and the reference's reply; None when the reference is
        not finite on it (or, ``gate`` (atol, rtol), too sensitive) at any widening (inconclusive: nothing kept)."""
        k = self._new_index()
        self.make_room_in_reference(keep=())
        made = self.reference.make_set(k, seed, self.exchange, "host", False, widen=plans,  # type: ignore[attr-defined]
                                       gate=gate)
        if made.inconclusive:
            return None, made
        self.sets[k] = InputSet(k, seed, "widened", made, "made", widen=plans)
        self.in_reference[k] = None
        return k, made

    # ------------------------------------------------------------------ memory
    def make_room_in_reference(self, keep: tuple[int, ...] | set[int]) -> None:
        """Drop the reference's least recently used sets until one more fits its cap (never a set in ``keep``, nor
        one staged for a hand-over that has not happened yet)."""
        if self.reference_cap is None:
            return
        while len(self.in_reference) >= self.reference_cap:
            victim = next((k for k in self.in_reference if k not in keep and not self.sets[k].fds), None)
            if victim is None:
                return  # every held set is needed now: one over the cap for a moment
            self._drop_in_reference([victim])

    def read_peak(self) -> int | None:
        """Ask the reference for its peak device bytes since its last drop (a drop of no set: nothing is freed);
        kept in :attr:`reference_peak_bytes`."""
        self._drop_in_reference([])
        return self.reference_peak_bytes

    def _drop_in_reference(self, ks: list[int]) -> int:
        dropped = self.reference.drop(ks)  # type: ignore[attr-defined]
        self.changed += [k for k in dropped.changed if k not in self.changed]
        if dropped.peak_bytes is not None:
            self.reference_peak_bytes = max(self.reference_peak_bytes or 0, dropped.peak_bytes)
        for k in ks:
            self.in_reference.pop(k, None)
            if k in self.sets:
                self.sets[k].exported = False  # the drop freed its export allocations
                if k not in self.in_runner:
                    self.sets[k].state = "dropped"
        return dropped.pinned_bytes

    def ensure_in_reference(self, k: int, keep: tuple[int, ...] = ()) -> None:
        """The reference holds set ``k`` (made again from its seed, with the same inputs and expected outputs,
        when it was dropped to save memory)."""
        if k in self.in_reference:
            self.in_reference.move_to_end(k)
            return
        self.make_room_in_reference(keep=(k, *keep))
        s = self.sets[k]
        made = self.reference.make_set(k, s.seed, self.exchange, "host", False,  # type: ignore[attr-defined]
                                       widen=s.widen, shrink=s.made.widen_shrink)
        if made.input_fingerprints != s.fingerprints:
            from cuda_agent.harness.reference_sets import ReferenceError_

            raise ReferenceError_(f"input set {k} made again from its seed differs from the first time: the task's "
                                  "get_inputs() is not determined by the seed on this device")
        s.made = made
        self.in_reference[k] = None
        self.remade += 1

    def held_for_baselines(self, ks: list[int]) -> list[int]:
        """The sets of ``ks`` the reference holds now (at least the first of them, made again if need be): what a
        baseline rotates over without making sets inside the device's lock."""
        held = [k for k in ks if k in self.in_reference]
        if not held and ks:
            self.ensure_in_reference(ks[0])
            held = [ks[0]]
        for k in held:
            self.in_reference.move_to_end(k)
        return held

    def stage(self, k: int, transport: str, *, reuse: bool = False) -> list[TensorDesc]:
        """Stage set ``k`` for a hand-over after all (``reuse``: the exchange folder's reusable slot files)."""
        self.ensure_in_reference(k)  # a set dropped to save memory is made again first
        tensors = self.reference.stage_set(k, self.exchange, transport, reuse)  # type: ignore[attr-defined]
        s = self.sets[k]
        s.made = s.made.model_copy(update={"tensors": tensors})
        s.state = "staged"
        return tensors

    def stage_fds(self, k: int, vmm: bool) -> str | None:
        """Stage set ``k`` in memory files (or, ``vmm``, device allocations) nobody else can reach; the descriptors
        are held here until :meth:`take_fds`. Returns the reference's reason when device allocations failed."""
        self.ensure_in_reference(k)
        staged, fds = self.reference.stage_fds(k, vmm)  # type: ignore[attr-defined]
        s = self.sets[k]
        s.fds = fds
        s.made = s.made.model_copy(update={"tensors": staged.tensors})
        s.state = "staged"
        s.exported = any(d.vmm for d in staged.tensors)
        return staged.vmm_error

    def release_exports(self, ks: list[int]) -> None:
        """The runner dropped its copies of sets ``ks``: free the device allocations the reference exported them in
        (the runner's copy of a set handed over by 'vmm' IS that allocation; left allocated it would sit in the
        reference outside the memory plan, one set per such drop). The sets stay held in the reference."""
        ks = [k for k in ks if k in self.sets and self.sets[k].exported and k in self.in_reference]
        if not ks:
            return
        freed = self.reference.release_exports(ks)  # type: ignore[attr-defined]
        self.exports_released_bytes += freed.released_bytes
        for k in ks:
            self.sets[k].exported = False

    def take_fds(self, k: int) -> list[int] | None:
        """The descriptors staged for set ``k`` (the caller closes them), or None when it has none."""
        s = self.sets[k]
        if not s.fds:
            return None
        fds, s.fds = s.fds, []
        return fds

    def handed_over(self, k: int) -> None:
        """The runner holds set ``k`` now."""
        self.sets[k].state = "handed_over"
        self.in_runner[k] = None
        self.in_runner.move_to_end(k)

    def close_staged(self) -> None:
        """Close the descriptors of sets staged but never handed over (a batch that ended early)."""
        for s in self.sets.values():
            close_fds(s.fds)
            s.fds = []

    def drop(self, ks: list[int] | None = None) -> int:
        """Free sets ``ks`` (default: all) in the reference process; returns the device bytes it still holds beyond
        its model (a leak probe)."""
        ks = list(self.sets) if ks is None else ks
        pinned = self._drop_in_reference(ks)
        for k in ks:
            if k in self.sets:
                self.sets[k].state = "dropped"
        return pinned

    def remake(self, k: int, *, stage: bool, transport: str) -> None:
        """Make dropped set ``k`` again from its seed (same inputs, same expected outputs)."""
        s = self.sets[k]
        self.make_room_in_reference(keep=(k,))
        s.made = self.reference.make_set(k, s.seed, self.exchange, transport, stage,  # type: ignore[attr-defined]
                                         widen=s.widen, shrink=s.made.widen_shrink)
        s.state = "staged" if stage else "made"
        self.in_reference[k] = None
