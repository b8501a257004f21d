"""The descriptor channel of the 'vmm' output transport (CPU parts: sockets, counts, driver absence) and the
process-tree walk the sandbox freezes, kills and watches by."""

from __future__ import annotations

import os
import socket

import pytest

from cuda_agent.harness import _vmm


def _pair() -> tuple[socket.socket, socket.socket]:
    return socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)


def test_descriptors_cross_a_socket_and_point_at_the_same_file(tmp_path):
    a, b = _pair()
    files = [tmp_path / f"f{i}" for i in range(3)]
    fds = []
    for i, f in enumerate(files):
        f.write_bytes(bytes([i]) * 4)
        fds.append(os.open(f, os.O_RDONLY))
    try:
        _vmm.send_fds(a, fds)
        got = _vmm.recv_fds(b, 3, timeout_s=5)
        assert len(got) == 3 and not set(got) & set(fds)  # copies, not the sender's numbers
        assert [os.read(fd, 4) for fd in got] == [bytes([i]) * 4 for i in range(3)]
        _vmm.close_fds(got)
    finally:
        _vmm.close_fds(fds)
        a.close()
        b.close()


def test_a_count_other_than_announced_is_refused_and_the_extra_descriptors_closed(tmp_path):
    a, b = _pair()
    f = tmp_path / "f"
    f.write_bytes(b"x")
    fds = [os.open(f, os.O_RDONLY) for _ in range(2)]
    try:
        _vmm.send_fds(a, fds)
        before = set(os.listdir("/proc/self/fd"))
        with pytest.raises(ValueError, match="2 descriptors arrived, 1 announced"):
            _vmm.recv_fds(b, 1, timeout_s=5)
        assert set(os.listdir("/proc/self/fd")) <= before  # nothing received stays open
    finally:
        _vmm.close_fds(fds)
        a.close()
        b.close()


def test_missing_descriptors_time_out_as_an_error():
    a, b = _pair()
    try:
        with pytest.raises(ValueError, match="no descriptors arrived"):
            _vmm.recv_fds(b, 1, timeout_s=0.2)
        with pytest.raises(ValueError, match="at most"):
            _vmm.recv_fds(b, _vmm.MAX_FDS + 1, timeout_s=0.2)
        assert _vmm.recv_fds(b, 0, timeout_s=0.2) == []
    finally:
        a.close()
        b.close()


def test_without_a_cuda_driver_the_transport_fails_with_its_own_error():
    """What the runner and the reference catch to fall back to host files."""
    try:
        import ctypes

        ctypes.CDLL("libcuda.so.1")
    except OSError:
        with pytest.raises(_vmm.VmmError, match="libcuda"):
            _vmm.Driver(0)
    else:
        pytest.skip("a CUDA driver is installed here")


def test_a_buffer_description_that_does_not_fit_is_refused_before_any_driver_call():
    class NoDriver:
        granularity = 2 << 20

        def __getattr__(self, name):
            raise AssertionError(f"driver call {name} made for a bad description")

    with pytest.raises(_vmm.VmmError, match="bad buffer description"):
        _vmm.import_copy(None, NoDriver(), 0, 100, 50, "cuda:0")  # allocation smaller than the bytes claimed
    with pytest.raises(_vmm.VmmError, match="bad buffer description"):
        _vmm.import_copy(None, NoDriver(), 0, 100, (2 << 20) + 1, "cuda:0")  # not a granularity multiple


def test_descendants_are_found_without_scanning_every_process(tmp_path):
    """The tree walk behind freeze/kill/watchdog: a grandchild is found, an unrelated process is not."""
    import subprocess
    import sys
    import time

    from cuda_agent.harness import process_tree as sandbox

    if not sandbox._HAS_PROC_CHILDREN:
        pytest.skip("no /proc/<pid>/task/<tid>/children on this kernel")
    ready = tmp_path / "ready"
    code = (
        "import subprocess, sys, time, pathlib;"
        "c = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']);"
        f"pathlib.Path({str(ready)!r}).write_text(str(c.pid)); time.sleep(60)"
    )
    parent = subprocess.Popen([sys.executable, "-c", code])
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        deadline = time.monotonic() + 120
        while not ready.exists() or not ready.read_text():
            assert time.monotonic() < deadline, "child never started"
            time.sleep(0.05)
        grandchild = int(ready.read_text())
        pids = sandbox.descendant_pids(parent.pid)
        assert pids[0] == parent.pid and grandchild in pids and other.pid not in pids
    finally:
        for p in (parent, other):
            p.kill()
            p.wait()
        import os
        import signal

        try:
            os.kill(grandchild, signal.SIGKILL)
        except (ProcessLookupError, NameError, UnboundLocalError):
            pass


def test_a_failed_hand_over_blames_the_environment_only_until_the_transport_has_worked() -> None:
    """Before any 'vmm' check succeeded, a failure switches the evaluator to host files (honest candidates never
    fail for a driver that refuses the handles); afterwards it is the candidate's export error, so one candidate
    cannot push the device onto the slow path for everyone."""
    from cuda_agent.harness.transport import Transport

    ev = Transport("cuda")
    assert ev.output_mode("bwrap") == "vmm" and ev.output_mode("process") == "ipc"
    assert ev.output_failed("cuMemImportFromShareableHandle failed: CUDA error 1")
    assert ev.vmm_failure and ev.output_mode("bwrap") == "host"  # host files from now on

    fresh = Transport("cuda")
    fresh.output_worked()
    assert not fresh.output_failed("cuMemMap failed: CUDA error 1")  # the candidate's buffers, not the driver
    assert fresh.vmm_failure is None and fresh.output_mode("bwrap") == "vmm"


def test_fresh_set_descriptor_kinds_remember_their_failures() -> None:
    from cuda_agent.harness.transport import Transport

    t = Transport("cuda")
    assert t.fresh_set_kind("bwrap") == "vmm" and t.fresh_set_kind("process") is None  # ipc hands over itself
    t.fd_failed("vmm", "driver refused")
    assert t.fresh_set_kind("bwrap") == "memfd"
    t.fd_worked("memfd")
    t.fd_failed("memfd", "one candidate cut the socket")  # it has worked here: the candidate's doing
    assert t.fresh_set_kind("bwrap") == "memfd" and "memfd" not in t.fd_failures
    assert Transport("cpu").fresh_set_kind("bwrap") == "memfd"
    assert Transport("cpu", fresh_set_transport="files").fresh_set_kind("bwrap") is None
