"""The runner's guard watches the native code its clocks run (T8): a code patch of libc's clock functions or a
swapped C pointer behind ``time.perf_counter`` shows in ``compare_guard_snapshot``, however the Python objects look.

Each patch runs in a child process (real ``mprotect`` and real writes to code and to CPython's method tables), which
restores what it changed before it reports."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

from cuda_agent.harness.integrity.native_guard import native_changes, native_timer_code

CHILD = textwrap.dedent("""
    import ctypes, json, sys, time
    from cuda_agent.harness.integrity.runtime import compare_guard_snapshot, take_guard_snapshot

    what = sys.argv[1]
    before = take_guard_snapshot()
    libc = ctypes.CDLL(None, use_errno=True)
    restore = None
    if what == "code":  # one byte of gettimeofday's entry rewritten in place (nothing here calls it meanwhile)
        addr = ctypes.cast(libc.gettimeofday, ctypes.c_void_p).value
        page = addr & ~4095
        libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
        assert libc.mprotect(page, 8192, 7) == 0, ctypes.get_errno()
        old = ctypes.c_ubyte.from_address(addr).value
        ctypes.c_ubyte.from_address(addr).value = old ^ 0xFF
        def restore():
            ctypes.c_ubyte.from_address(addr).value = old
            libc.mprotect(page, 8192, 5)
    elif what == "pointer":  # time.thread_time's PyMethodDef now points at time.process_time's C function
        word = ctypes.sizeof(ctypes.c_void_p)
        def c_slot(fn):
            method_def = ctypes.c_void_p.from_address(id(fn) + 2 * word).value
            return ctypes.c_void_p.from_address(method_def + word)
        slot, other = c_slot(time.thread_time), c_slot(time.process_time).value
        old = slot.value
        slot.value = other
        def restore():
            slot.value = old
    elif what == "got":  # libpython's GOT slot of clock_gettime now holds clock_getres (no code written)
        from cuda_agent.harness.integrity.native_guard import got_slot_addresses
        slots = got_slot_addresses(frozenset({"clock_gettime"}))
        key, addr = sorted((k, a) for k, a in slots.items()
                           if k.startswith(("libpython", "python")) and ":clock_gettime@" in k)[0]
        slot = ctypes.c_void_p.from_address(addr)
        old = slot.value
        slot.value = ctypes.cast(libc.clock_getres, ctypes.c_void_p).value
        def restore():
            slot.value = old
    after = take_guard_snapshot()
    if restore is not None:
        restore()
    again = take_guard_snapshot()
    print(json.dumps({
        "patched": [v.model_dump() for v in compare_guard_snapshot(before, after)],
        "restored": [v.model_dump() for v in compare_guard_snapshot(before, again)],
    }))
""")


def run_child(what: str) -> dict:
    proc = subprocess.run([sys.executable, "-c", CHILD, what], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_two_readings_of_an_untouched_process_agree_and_cover_libc_the_vdso_and_pythons_clocks() -> None:
    first = native_timer_code()
    assert native_changes(first, native_timer_code()) == []
    assert {"libc:clock_gettime", "python:time.perf_counter", "python:time.monotonic"} <= set(first)
    assert "vdso" in first  # Linux: the kernel's clock_gettime
    # a function gone from a later reading counts as changed
    assert native_changes(first, {k: v for k, v in first.items() if k != "libc:clock_gettime"}) == \
        ["libc:clock_gettime"]


def test_a_code_patch_of_a_libc_clock_is_a_timer_violation_until_restored() -> None:
    found = run_child("code")
    assert [v["rule"] for v in found["patched"]] == ["T8.runtime.timer_patched"]
    assert "libc:gettimeofday" in found["patched"][0]["message"]
    assert found["restored"] == []


def test_a_swapped_c_function_behind_a_builtin_time_function_is_a_timer_violation() -> None:
    found = run_child("pointer")
    assert [v["rule"] for v in found["patched"]] == ["T8.runtime.timer_patched"]
    assert "python:time.thread_time" in found["patched"][0]["message"]
    assert found["restored"] == []


def test_a_rewritten_got_slot_of_the_interpreters_clock_is_a_timer_violation() -> None:
    found = run_child("got")
    assert [v["rule"] for v in found["patched"]] == ["T8.runtime.timer_patched"]
    assert ":clock_gettime@" in found["patched"][0]["message"] and "got:" in found["patched"][0]["message"]
    assert found["restored"] == []
