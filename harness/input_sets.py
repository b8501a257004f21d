"""The input sets of one session, in one place: index -> seed, what was made, staged, handed over, dropped.

Every set a session uses is made by the reference process from a secret seed (:meth:`SetStore.make`); the
reference keeps the pristine inputs and the expected outputs, the store keeps what the session needs to know about
each set (its seed, role, descriptions, fingerprints, state) and the descriptors of sets staged for a later
hand-over. :meth:`SetStore.drop` frees sets in the reference process. Because a set is fully determined by its seed,
a dropped set can be made again (:meth:`SetStore.remake`): the step towards holding only as many sets as the
device's memory allows.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from cuda_agent.harness._vmm import close_fds
from cuda_agent.harness.messages import OutputSpec, TensorDesc
from cuda_agent.harness.reference_messages import MadeSet

Role = Literal["verify", "timing", "fresh"]
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

    def __init__(self, reference: object, exchange: str) -> None:
        """:param reference: the session's :class:`~cuda_agent.harness.reference_client.ReferenceClient`.
        :param exchange: the runner's exchange folder (staged files go there)."""
        self.reference = reference
        self.exchange = exchange
        self.sets: dict[int, InputSet] = {}

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
    def make(self, seed: int, role: Role, *, stage: bool, transport: str) -> int:
        """A new set from ``seed``, made by the reference (and staged for the runner by ``transport`` when
        ``stage``); returns its index."""
        k = len(self.sets)
        made = self.reference.make_set(k, seed, self.exchange, transport, stage)  # type: ignore[attr-defined]
        self.sets[k] = InputSet(k, seed, role, made, "staged" if stage else "made")
        return k

    def stage(self, k: int, transport: str, *, reuse: bool = False) -> list[TensorDesc]:
        """Stage set ``k`` for a hand-over after all (``reuse``: the exchange folder's reusable slot files)."""
        tensors = self.reference.stage_set(k, self.exchange, transport, reuse)  # type: ignore[attr-defined]
        s = self.sets[k]
        s.made = s.made.model_copy(update={"tensors": tensors})
        s.state = "staged"
        return tensors

    def stage_fds(self, k: int, vmm: bool) -> str | None:
        """Stage set ``k`` in memory files (or, ``vmm``, device allocations) nobody else can reach; the descriptors
        are held here until :meth:`take_fds`. Returns the reference's reason when device allocations failed."""
        staged, fds = self.reference.stage_fds(k, vmm)  # type: ignore[attr-defined]
        s = self.sets[k]
        s.fds = fds
        s.made = s.made.model_copy(update={"tensors": staged.tensors})
        s.state = "staged"
        return staged.vmm_error

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

    def close_staged(self) -> None:
        """Close the descriptors of sets staged but never handed over (a batch that ended early)."""
        for s in self.sets.values():
            close_fds(s.fds)
            s.fds = []

    def drop(self, ks: list[int] | None = None) -> int:
        """Free sets ``ks`` (default: all) in the reference process; returns the device bytes it still holds beyond
        its model (a leak probe)."""
        ks = list(self.sets) if ks is None else ks
        pinned = self.reference.drop_sets(ks)  # type: ignore[attr-defined]
        for k in ks:
            if k in self.sets:
                self.sets[k].state = "dropped"
        return pinned

    def remake(self, k: int, *, stage: bool, transport: str) -> None:
        """Make dropped set ``k`` again from its seed (same inputs, same expected outputs)."""
        s = self.sets[k]
        s.made = self.reference.make_set(k, s.seed, self.exchange, transport, stage)  # type: ignore[attr-defined]
        s.state = "staged" if stage else "made"
