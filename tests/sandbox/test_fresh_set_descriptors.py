"""Fresh sets handed over by descriptor (``fresh_set_transport``): staged before the timing batch in memory files
no one else can reach, passed to the runner over its Unix socket at their call. Real processes throughout: the
sandboxed runner, the reference process, the evaluator between them."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest
import torch

from cuda_agent.harness._staging import read_tensor_fd, write_memfd

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("make", [
    lambda: torch.randn(3, 5),
    lambda: torch.randn(6, 4).t(),  # not contiguous: stored C-contiguous
    lambda: torch.randn(4, 4).to(torch.bfloat16),  # no numpy dtype
    lambda: torch.rand(7) > 0.5,
    lambda: torch.empty(0, 3),
])
def test_a_memory_file_carries_a_tensor_across_a_process_boundary(make) -> None:  # type: ignore[no-untyped-def]
    t = make()
    fd, n = write_memfd(t, "test")
    assert n == t.numel() * t.element_size()
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    pid = os.fork()
    if pid == 0:  # the receiver: reads what arrived and writes it back as raw bytes
        code = 1
        try:
            _, fds, _, _ = socket.recv_fds(theirs, 16, 4)
            got = read_tensor_fd(fds[0], list(t.shape), t.dtype)
            theirs.sendall(got.contiguous().view(-1).view(torch.uint8).numpy().tobytes() or b"-")
            code = 0
        finally:
            os._exit(code)
    socket.send_fds(ours, [b"F"], [fd])
    os.close(fd)
    back = ours.recv(1 << 20)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert back == (t.contiguous().view(-1).view(torch.uint8).numpy().tobytes() or b"-")


#: A candidate that looks through its own open descriptors on every call: one that is a memory file it did not
#: make means a fresh set reached it ahead of its call or stayed open after it (it then answers wrong, so the
#: evaluation shows it). It makes one itself first, to show the look can see them.
PEEKING_RELU = """
import os
import torch
import torch.nn as nn
import cuda_extension


def memory_files():
    out = []
    for name in os.listdir("/proc/self/fd"):
        try:
            link = os.readlink(f"/proc/self/fd/{name}")
        except OSError:
            continue
        if link.startswith("/memfd:"):
            out.append(link)
    return out


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.own = os.memfd_create("candidate-own")
        self.sees = "/memfd:candidate-own (deleted)" in memory_files()

    def forward(self, x):
        out = torch.empty_like(x)
        cuda_extension.relu_forward(x, out)
        others = [m for m in memory_files() if "candidate-own" not in m]
        if not self.sees or others:
            out.zero_()
        return out
"""

#: A candidate that closes the runner's descriptor socket when it is loaded: no fresh set can arrive that way.
SABOTAGING_RELU = """
import os
import torch
import torch.nn as nn
import cuda_extension

os.close(int(os.environ["CUDA_AGENT_FD_SOCKET"]))


class ModelNew(nn.Module):
    def forward(self, x):
        out = torch.empty_like(x)
        cuda_extension.relu_forward(x, out)
        return out
"""


def _evaluator(make_evaluator, **experiments):  # type: ignore[no-untyped-def]
    return make_evaluator(protocol={"min_calls": 12, "max_calls": 24, "grade_calls_per_round": 12}, **experiments)


def _recording(monkeypatch: pytest.MonkeyPatch) -> list[dict]:  # type: ignore[type-arg]
    from cuda_agent.harness.sandbox import CandidateProcess

    seen: list[dict] = []  # type: ignore[type-arg]
    real = CandidateProcess.request

    def request(self, timeout_s, req):  # type: ignore[no-untyped-def]
        seen.append({"op": req.op, **req.model_dump(exclude_none=True),
                     "exchange": sorted(p.name for p in Path(self.exchange).iterdir())})
        return real(self, timeout_s, req)

    monkeypatch.setattr(CandidateProcess, "request", request)
    return seen


def _fresh(seen: list[dict]) -> list[dict]:  # type: ignore[type-arg]
    """The inputs requests of fresh sets (those called right after they arrived)."""
    return [r for i, r in enumerate(seen[:-1])
            if r["op"] == "inputs" and seen[i + 1]["op"] == "call" and seen[i + 1]["set"] == r["set"]]


def test_fresh_sets_reach_the_runner_as_memory_files_it_never_sees_before_their_call(
        make_evaluator, make_ws, kit, tasks, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    seen = _recording(monkeypatch)
    with _evaluator(make_evaluator) as ev:
        profiled = ev.profile(tasks.relu, make_ws(PEEKING_RELU), kit)
        graded = ev.grade(tasks.relu, make_ws(PEEKING_RELU), kit)
        assert ev.transport.fd_confirmed == {"memfd"} and not ev.transport.fd_failures
    for result in (profiled, graded):
        # Right on every call: it saw its own memory file and never one of ours outside a hand-over.
        assert result.status.value == "correct", result.summary_for_agent()
        assert not result.diagnostics.fresh_set_fallbacks
        assert result.diagnostics.phase_s["fresh_hand_over"] > 0
    fresh = _fresh(seen)
    assert len(fresh) >= 8  # four per profile, four per grading pass (more where a gap was looked at again)
    for r in fresh:
        assert all("fd" in d and "file" not in d for d in r["tensors"] if d["kind"] == "tensor")
        assert not any(name.startswith("fresh_") for name in r["exchange"])  # no slot file was written


def test_the_files_setting_hands_fresh_sets_over_through_slot_files(make_evaluator, make_ws, kit, tasks,
                                                                   honest_relu, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    seen = _recording(monkeypatch)
    with _evaluator(make_evaluator, fresh_set_transport="files") as ev:
        profiled = ev.profile(tasks.relu, make_ws(honest_relu), kit)
        assert not ev.transport.fd_confirmed
    assert profiled.status.value == "correct", profiled.summary_for_agent()
    fresh = _fresh(seen)
    assert len(fresh) >= 4
    assert all(d["file"].endswith(f"fresh_{i}.bin") for r in fresh for i, d in enumerate(r["tensors"]))


def test_a_candidate_that_cuts_the_descriptor_path_is_handed_its_sets_through_files(
        make_evaluator, make_ws, kit, tasks, honest_relu) -> None:  # type: ignore[no-untyped-def]
    with _evaluator(make_evaluator) as ev:
        first = ev.profile(tasks.relu, make_ws(honest_relu), kit)  # descriptors have worked here ...
        assert first.status.value == "correct" and ev.transport.fd_confirmed == {"memfd"}
        cut = ev.profile(tasks.relu, make_ws(SABOTAGING_RELU), kit)
        # ... so the failure is the candidate's: its sets went through files, timed and checked as any others,
        assert cut.status.value == "correct", cut.summary_for_agent()
        assert len(cut.diagnostics.fresh_set_fallbacks) >= 4
        assert cut.diagnostics.fresh_sets.calls >= 4
        # and the next candidate still gets descriptors.
        assert not ev.transport.fd_failures
        after = ev.profile(tasks.relu, make_ws(honest_relu), kit)
        assert after.status.value == "correct" and not after.diagnostics.fresh_set_fallbacks

    with _evaluator(make_evaluator) as ev:  # a failure before any success: not used again here
        cut = ev.profile(tasks.relu, make_ws(SABOTAGING_RELU), kit)
        assert cut.status.value == "correct", cut.summary_for_agent()
        assert set(ev.transport.fd_failures) == {"memfd"} and "runner could not read" in ev.transport.fd_failures["memfd"]
        later = ev.profile(tasks.relu, make_ws(honest_relu), kit)
        assert later.status.value == "correct" and not later.diagnostics.fresh_set_fallbacks  # files from the start


def test_a_memory_file_of_the_wrong_size_is_refused() -> None:
    fd, _ = write_memfd(torch.randn(3, 5), "test")
    try:
        with pytest.raises(ValueError, match=r"shape \[4, 5\] of torch.float32\) holds 60 bytes, 80 expected"):
            read_tensor_fd(fd, [4, 5], torch.float32)
    finally:
        os.close(fd)
