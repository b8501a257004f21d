"""The machine-wide device lock: timed batches alone (exclusive), untimed work side by side (shared), across real
processes; a waiting timed batch goes before new untimed work; a shared holder's own timing and nested lock
objects never wait for themselves."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

from cuda_agent.harness.device_lock import TimingLock, device_timing_lock

HOLDER = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from cuda_agent.harness.device_lock import device_timing_lock
    lock_dir, mode, seconds, stamp = Path(sys.argv[1]), sys.argv[2], float(sys.argv[3]), Path(sys.argv[4])
    lock = device_timing_lock("cuda", 0, lock_dir=lock_dir)
    with (lock.shared() if mode == "shared" else lock):
        stamp.with_suffix(".in").write_text(repr(time.time()))
        print("held", flush=True)
        time.sleep(seconds)
        stamp.with_suffix(".out").write_text(repr(time.time()))
""")


def hold(tmp: Path, mode: str, seconds: float, name: str, wait: bool = True) -> tuple[subprocess.Popen, Path]:
    """A real process holding the lock in ``mode`` for ``seconds``; with ``wait``, returns once it holds it."""
    stamp = tmp / name
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(tmp), mode, str(seconds), str(stamp)],
                            stdout=subprocess.PIPE, text=True)
    if wait:
        assert proc.stdout.readline().strip() == "held"
    return proc, stamp


def stamp(path: Path, suffix: str) -> float:
    return float(path.with_suffix(suffix).read_text())


def test_untimed_work_shares_the_device_and_a_timed_batch_waits_for_all_of_it(tmp_path: Path) -> None:
    lock = device_timing_lock("cuda", 0, lock_dir=tmp_path)
    other, other_stamp = hold(tmp_path, "shared", 1.5, "other")
    t0 = time.time()
    with lock.shared():  # beside the other process's shared hold: at once
        took_shared = time.time() - t0
    with lock:  # a timed batch: only once the other process let go
        timed_at = time.time()
    other.wait(timeout=30)
    assert took_shared < 1.0
    assert timed_at >= stamp(other_stamp, ".out")


def test_untimed_work_waits_while_a_timed_batch_runs_in_another_process(tmp_path: Path) -> None:
    lock = device_timing_lock("cuda", 0, lock_dir=tmp_path)
    timed, timed_stamp = hold(tmp_path, "exclusive", 1.5, "timed")
    with lock.shared():
        got = time.time()
    timed.wait(timeout=30)
    assert got >= stamp(timed_stamp, ".out")


def test_a_waiting_timed_batch_goes_before_untimed_work_that_comes_after_it(tmp_path: Path) -> None:
    """Writer priority through the turnstile: a stream of shared holders cannot starve a timed batch."""
    lock = device_timing_lock("cuda", 0, lock_dir=tmp_path)
    first, first_stamp = hold(tmp_path, "shared", 2.0, "first")
    timed_in: list[float] = []
    waiter = threading.Thread(target=lambda: (lock.__enter__(), timed_in.append(time.time()), time.sleep(1.0),
                                              lock.__exit__(None, None, None)))
    waiter.start()
    time.sleep(0.5)  # the timed batch is now waiting for the first shared holder
    late, late_stamp = hold(tmp_path, "shared", 0.1, "late", wait=False)
    waiter.join(timeout=30)
    late.wait(timeout=30)
    first.wait(timeout=30)
    assert timed_in and timed_in[0] >= stamp(first_stamp, ".out")
    assert stamp(late_stamp, ".in") >= timed_in[0] + 0.9  # the late shared holder came after the timed batch


def test_a_shared_holders_own_timing_converts_and_returns_to_shared(tmp_path: Path) -> None:
    """A device step (shared) times inside (exclusive, through another lock object of the same file: the
    evaluator's): it waits for other processes' untimed work, keeps the device shared afterwards, and never waits
    for itself."""
    step, evaluator = device_timing_lock("cuda", 0, lock_dir=tmp_path), device_timing_lock("cuda", 0, lock_dir=tmp_path)
    with step.shared():
        other, other_stamp = hold(tmp_path, "shared", 1.0, "other")
        with evaluator:
            timed_at = time.time()
        other.wait(timeout=30)
        # back in the shared mode: another process's timed batch waits until this step ends
        timed, timed_stamp = hold(tmp_path, "exclusive", 0.1, "timed", wait=False)
        time.sleep(0.8)
        step_end = time.time()
    timed.wait(timeout=30)
    assert timed_at >= stamp(other_stamp, ".out")
    assert stamp(timed_stamp, ".in") >= step_end


def test_two_shared_holders_converting_at_once_both_get_their_timed_batch(tmp_path: Path) -> None:
    """Each drops its shared hold before it waits for the exclusive one, so neither waits for the other."""
    done: list[str] = []
    barrier = threading.Barrier(2)

    def step(name: str) -> None:
        lock = TimingLock("cuda0", lock_dir=tmp_path)
        with lock.shared():
            barrier.wait(timeout=10)  # both hold the shared mode now
            with lock:
                time.sleep(0.2)
            done.append(name)

    threads = [threading.Thread(target=step, args=(n,), daemon=True) for n in ("a", "b")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=20)
    assert sorted(done) == ["a", "b"]


def test_outside_lets_a_waiting_timed_batch_run_and_takes_the_shared_hold_again(tmp_path: Path) -> None:
    """A baseline's cache key may be held by a process waiting for the exclusive mode: a shared holder waits for
    the key outside its hold."""
    lock = device_timing_lock("cuda", 0, lock_dir=tmp_path)
    with lock.shared():
        timed, timed_stamp = hold(tmp_path, "exclusive", 0.5, "timed", wait=False)
        time.sleep(0.5)
        assert not timed_stamp.with_suffix(".in").exists()  # waiting behind our shared hold
        with lock.outside():
            timed.wait(timeout=30)  # it ran while we were outside
        back = time.time()
        other, other_stamp = hold(tmp_path, "exclusive", 0.1, "after", wait=False)
        time.sleep(0.5)
        still_shared_at = time.time()
    other.wait(timeout=30)
    assert stamp(timed_stamp, ".out") <= back
    assert stamp(other_stamp, ".in") >= still_shared_at  # the shared hold was ours again after outside()


def test_a_threads_counters_record_its_timed_holds_and_its_waits_behind_another_process(tmp_path: Path) -> None:
    lock = device_timing_lock("cuda", 0, lock_dir=tmp_path)
    before = lock.thread_counters()
    with lock:
        time.sleep(0.2)
        inside = lock.thread_counters()  # an open hold counts up to now
    after = lock.thread_counters()
    assert after["exclusive_takes"] - before["exclusive_takes"] == 1
    assert 0.2 <= after["exclusive_s"] - before["exclusive_s"] < 1.0
    assert inside["exclusive_s"] - before["exclusive_s"] >= 0.2
    again = device_timing_lock("cuda", 0, lock_dir=tmp_path)
    assert again is not lock and again.path == lock.path
    with lock, again:  # re-entered through another object naming the same file: one take
        pass
    assert lock.thread_counters()["exclusive_takes"] - after["exclusive_takes"] == 1
    # Another process times for 0.8 s: this thread's timed batch waits for it, and its untimed work too.
    proc, _ = hold(tmp_path, "exclusive", 0.8, "other")
    start = lock.thread_counters()
    with lock:
        pass
    proc.wait()
    waited = lock.thread_counters()
    assert waited["exclusive_wait_s"] - start["exclusive_wait_s"] >= 0.4
    assert waited["exclusive_s"] - start["exclusive_s"] < 0.4  # the wait is not counted as held
    proc, _ = hold(tmp_path, "exclusive", 0.8, "again")
    with lock.shared():
        pass
    proc.wait()
    assert lock.thread_counters()["shared_wait_s"] - waited["shared_wait_s"] >= 0.4
    # Counters are per thread: another thread's reading starts at zero.
    seen = {}
    threading.Thread(target=lambda: seen.update(lock.thread_counters())).start()
    time.sleep(0.1)
    assert seen == {"exclusive_s": 0.0, "exclusive_wait_s": 0.0, "exclusive_takes": 0.0, "shared_wait_s": 0.0}
