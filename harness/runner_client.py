"""Parent side of a candidate runner: typed requests over the harness's one wire format.

:class:`RunnerClient` wraps one sandboxed :class:`~cuda_agent.harness.sandbox.CandidateProcess` for one session.
Each method sends one request (:mod:`cuda_agent.harness.messages`) and returns its typed reply; a reply that says
the candidate failed (its import raised, its forward raised) is a :class:`CandidateFailed`, a process that died or
answered nonsense a :class:`~cuda_agent.harness.sandbox.CandidateDied`. Everything in a reply comes from the
candidate's process and is believed only as far as the trusted side's own checks back it up.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from cuda_agent.harness import messages as m
from cuda_agent.harness.sandbox import CandidateProcess
from cuda_agent.harness.wire import Failure, Reply, Request


class CandidateFailed(Exception):
    """The candidate raised inside the runner (import error, exception in forward)."""

    def __init__(self, message: str, tb: str = "") -> None:
        super().__init__(message)
        self.tb = tb


class RunnerClient:
    """Typed requests to one runner (see the module docstring)."""

    def __init__(self, proc: CandidateProcess, *, call_timeout_s: float, load_timeout_s: float,
                 request_timeout_s: float) -> None:
        self.proc = proc
        self.call_timeout_s = call_timeout_s
        self.load_timeout_s = load_timeout_s
        self.request_timeout_s = request_timeout_s

    # ------------------------------------------------------------------ the process
    @property
    def exchange(self) -> Path:
        """The folder shared with the trusted side (staged inputs, exported outputs)."""
        return self.proc.exchange

    @property
    def stage(self) -> Path:
        """The read-only folder the workspace and the built module are copied to."""
        return self.proc.stage

    @property
    def isolation(self) -> str:
        """'bwrap' or 'process'."""
        return self.proc.isolation

    def ready(self) -> m.Ready:
        """The runner's ready message (waits for it)."""
        return self.proc.wait_ready()

    def _ask(self, req: Request, timeout_s: float, what: str) -> Any:
        reply = self.proc.request(timeout_s, req)
        if isinstance(reply, Failure):
            raise CandidateFailed(f"{what}: {reply.error}", reply.traceback)
        return reply

    # ------------------------------------------------------------------ requests
    def load(self, **fields: Any) -> m.Loaded:
        """Import the candidate (fields of :class:`~cuda_agent.harness.messages.Load`)."""
        return self._ask(m.Load(**fields), self.load_timeout_s, "loading model_new.py failed")

    def inputs(self, k: int, tensors: list[m.TensorDesc]) -> Reply | Failure:
        """Hand set ``k`` over. Returns the reply; a :class:`~cuda_agent.harness.wire.Failure` with ``fd_error``
        when only its descriptors could not be read (the caller hands it over through files); raises
        :class:`CandidateFailed` on any other failure."""
        reply = self.proc.request(self.load_timeout_s, m.Inputs(set=k, tensors=tensors))
        if isinstance(reply, Failure) and not reply.fd_error:
            raise CandidateFailed(f"receiving inputs failed: {reply.error}", reply.traceback)
        return reply

    def call(self, k: int, *, audit: bool = False, state: bool = False) -> m.Called:
        """One timed forward on a copy of set ``k`` (``state``: with the module's state digested after it)."""
        return self._ask(m.Call(set=k, audit=audit, state=state), self.call_timeout_s,
                         f"forward raised on input set {k}")

    def drop_inputs(self, ks: list[int]) -> m.InputsDropped:
        """Have the runner forget sets ``ks`` (they are handed over again when a call needs them)."""
        return self._ask(m.DropInputs(sets=list(ks)), self.load_timeout_s, "dropping input sets failed")

    def export(self, transport: str) -> m.Exported:
        """Hand the last call's outputs over by ``transport``."""
        return self._ask(m.Export(transport=transport), self.call_timeout_s, "handing over outputs failed")

    def guard(self) -> m.Guarded:
        """The integrity guard's findings since its snapshot."""
        return self._ask(m.Guard(), self.call_timeout_s, "the integrity guard failed")

    def kernels(self, k: int, *, breakdown: bool = False, profiler_sum: bool = False) -> m.KernelTimes:
        """A per-kernel breakdown and/or the profiler-sum time of one call on set ``k``."""
        return self._ask(m.Kernels(set=k, breakdown=breakdown, profiler_sum=profiler_sum), self.request_timeout_s,
                         "profiling failed")

    def calibrate(self) -> m.Calibrated:
        """The protocol's own cost per call, before the candidate is loaded (hold the device's lock)."""
        return self._ask(m.Calibrate(), self.call_timeout_s, "timing calibration failed")

    # ------------------------------------------------------------------ beside the messages
    def send_fds(self, fds: list[int]) -> None:
        """Pass descriptors to the runner (before the request that names them)."""
        from cuda_agent.harness._vmm import send_fds

        send_fds(self.proc.fd_sock, fds)

    def recv_fds(self, count: int, timeout_s: float) -> list[int]:
        """Exactly ``count`` descriptors the runner sent with its last export (ValueError otherwise)."""
        return self.proc.recv_fds(count, timeout_s)

    def freeze(self) -> None:
        """Stop the runner's process tree while the trusted side reads its outputs."""
        self.proc.freeze()

    def thaw(self) -> None:
        """Let it run again."""
        self.proc.thaw()

    def output_tail(self) -> str:
        """What the candidate printed last."""
        return self.proc.output_tail()
