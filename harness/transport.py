"""How data crosses between the candidate's process and the trusted side, and what failed before.

Two choices, both made per evaluator and remembered across its sessions:

- **outputs** (and inputs handed over after all) cross by ``ipc`` (CUDA IPC handles, no copies; they do not open
  inside bubblewrap's user namespace), ``vmm`` (driver VMM allocations whose descriptors pass over a Unix socket;
  works across namespaces) or ``host`` (files in the exchange folder; works everywhere). ``auto``: ``vmm`` under
  bubblewrap, ``ipc`` otherwise; a ``vmm`` failure before any ``vmm`` hand-over ever worked here means the
  environment refuses it (``host`` from then on), one after means this candidate's buffers were bad.
- **fresh sets** (harness/fresh_sets.py) reach the runner by descriptor (``memfd`` memory files, or ``vmm`` device
  allocations) or, with ``files``, through the exchange folder at their call. A descriptor kind that failed here
  before it ever worked is not used again; one that has worked blames the candidate for a later failure.
"""

from __future__ import annotations

from typing import Literal

import structlog

log = structlog.get_logger(__name__)

OutputMode = Literal["ipc", "host", "vmm"]
FdKind = Literal["memfd", "vmm"]


class Transport:
    """The hand-over modes of one evaluator and their failure memory (thread-safe enough: flags only grow)."""

    def __init__(self, kind: str, cuda_transport: str = "auto", fresh_set_transport: str = "auto") -> None:
        """:param kind: 'cpu' or 'cuda'. :param cuda_transport: 'auto', 'ipc', 'host' or 'vmm'.
        :param fresh_set_transport: 'auto', 'descriptors' or 'files'."""
        self.kind = kind
        self.cuda_transport = cuda_transport
        self.fresh_set_transport = fresh_set_transport
        #: Why the 'vmm' output transport failed here (None: not failed); 'host' is used from then on.
        self.vmm_failure: str | None = None
        #: A 'vmm' hand-over has succeeded here: later failures are the candidate's, not the environment's.
        self.vmm_confirmed = False
        #: Descriptor kinds of fresh sets that failed here before they ever worked (not used again), with why.
        self.fd_failures: dict[str, str] = {}
        #: Descriptor kinds of fresh sets that have worked here.
        self.fd_confirmed: set[str] = set()

    def output_mode(self, isolation: str) -> OutputMode:
        """The output transport for a runner under ``isolation`` ('bwrap' or 'process')."""
        mode = self.cuda_transport
        if mode == "auto":
            mode = "vmm" if isolation == "bwrap" else "ipc"
        if mode == "vmm" and self.vmm_failure is not None:
            return "host"
        return mode  # type: ignore[return-value]

    def fresh_set_kind(self, isolation: str) -> FdKind | None:
        """How fresh sets go to a runner under ``isolation``: 'vmm', 'memfd', or None (files at hand-over)."""
        if self.fresh_set_transport == "files" or "memfd" in self.fd_failures:
            return None
        mode = self.output_mode(isolation) if self.kind == "cuda" else "host"
        if self.fresh_set_transport == "auto" and mode == "ipc":
            return None  # IPC handles already hand over device to device
        return "vmm" if mode == "vmm" and "vmm" not in self.fd_failures else "memfd"

    def output_failed(self, why: str) -> bool:
        """A 'vmm' output hand-over failed: True when that means the environment refuses it (and 'host' is used
        from now on), False when 'vmm' is known to work here (the candidate's buffers were bad)."""
        if self.vmm_confirmed:
            return False
        if self.vmm_failure is None:
            self.vmm_failure = why
            log.warning("transport.vmm_unavailable", reason=why[:300], fallback="host")
        return True

    def output_worked(self) -> None:
        """A 'vmm' output hand-over succeeded."""
        self.vmm_confirmed = True

    def fd_failed(self, kind: str, why: str) -> None:
        """A descriptor hand-over of ``kind`` failed: unless that kind has worked here before (then the candidate's
        process is to blame, and only its set goes through files), it is not used again."""
        if kind in self.fd_confirmed or kind in self.fd_failures:
            return
        self.fd_failures[kind] = why
        log.warning("transport.fresh_set_descriptors_unavailable", kind=kind, reason=why[:300])

    def fd_worked(self, kind: str) -> None:
        """A descriptor hand-over of ``kind`` succeeded."""
        self.fd_confirmed.add(kind)
