"""The inputs' page warm-up after each L2 flush (the timer's ``warm_input_pages``), the host-enqueue counts and the
retakes behind a longer spin (``preroll_retakes``), on CUDA (``pytest -m gpu``)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

pytestmark = pytest.mark.gpu

from cuda_agent.harness.messages import TimerSpec  # noqa: E402
from cuda_agent.harness.reference import ReferenceServer  # noqa: E402
from cuda_agent.harness.reference_messages import MakeSet, Start  # noqa: E402
from cuda_agent.harness.timing import WARM_PAGE_BYTES, DeviceTimer, warm_input_pages  # noqa: E402

CODE = (
    "import torch\n"
    "class Model(torch.nn.Module):\n"
    "    def forward(self, x):\n        return torch.sum(x, dim=1, keepdim=True)\n"
    "def get_inputs():\n    return [torch.randn(1024, 8192)]\n"
    "def get_init_inputs():\n    return []\n"
)


def _kernels(fn) -> int:  # type: ignore[no-untyped-def]
    from torch.profiler import ProfilerActivity, profile

    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    return sum(1 for e in prof.events() if e.device_type.name == "CUDA")


def test_one_read_per_storage_leaves_every_input_unchanged() -> None:
    big = torch.randn(1024, 8192, device="cuda")  # 32 MiB: a large-pool block, 2 MiB aligned
    view = big.t()[::3]  # non-contiguous view of the same storage: not read twice
    small = torch.arange(10, dtype=torch.int64, device="cuda")
    empty = torch.empty(0, device="cuda")
    before = [big.clone(), small.clone()]
    warm_input_pages([big, view, small, empty, torch.ones(3), 7])  # a CPU tensor and a number are skipped
    torch.cuda.synchronize()
    assert torch.equal(big, before[0]) and torch.equal(small, before[1])
    tiny = torch.zeros(1, device="cuda")  # 4 bytes: never across a page boundary
    per_read = _kernels(lambda: warm_input_pages([tiny]))  # the kernels of one strided read
    one_storage = _kernels(lambda: warm_input_pages([big]))
    assert per_read >= 1 and one_storage in (per_read, 2 * per_read)  # the tail page when the start is unaligned
    assert _kernels(lambda: warm_input_pages([big, view])) == one_storage
    # a storage that starts inside a page and ends in the next: the tail page is read too
    pool = torch.empty(4 * WARM_PAGE_BYTES, dtype=torch.uint8, device="cuda")
    tail = pool[WARM_PAGE_BYTES - 16: WARM_PAGE_BYTES + 16].clone()
    start = tail.untyped_storage().data_ptr()
    crosses = start // WARM_PAGE_BYTES != (start + 31) // WARM_PAGE_BYTES
    assert _kernels(lambda: warm_input_pages([tail])) == (2 if crosses else 1) * per_read


def test_the_warm_up_runs_before_the_timed_region_and_only_when_on() -> None:
    x = torch.randn(1024, 8192, device="cuda")
    on, off = DeviceTimer("cuda", preroll_us=50, warm_pages=True), DeviceTimer("cuda", preroll_us=50, warm_pages=False)
    assert on.warm_pages and not off.warm_pages and not DeviceTimer("cpu", warm_pages=True).warm_pages
    one = torch.empty(1, device="cuda")
    for timer in (on, off):
        for _ in range(5):
            timer.time_call(lambda: one.fill_(1.0), warm=[x])
    # a null call with 32 MiB to warm: the warm-up is outside the events (a 32 MiB read would take ~10 us)
    ms_on = sorted(on.time_call(lambda: one.fill_(1.0), warm=[x])[1] for _ in range(30))[15]
    ms_off = sorted(off.time_call(lambda: one.fill_(1.0), warm=[x])[1] for _ in range(30))[15]
    assert ms_on < 0.008 and abs(ms_on - ms_off) < 0.002, (ms_on, ms_off)
    # flush=False: no flush, so nothing to undo: no warm-up either
    n_on = _kernels(lambda: on.time_call(lambda: one.fill_(1.0), warm=[x]))
    n_off = _kernels(lambda: off.time_call(lambda: one.fill_(1.0), warm=[x]))
    n_noflush = _kernels(lambda: on.time_call(lambda: one.fill_(1.0), flush=False, warm=[x]))
    assert n_on == n_off + _kernels(lambda: warm_input_pages([x])) and n_noflush < n_off


def test_the_reference_process_takes_the_setting_from_its_start_message() -> None:
    for warm in (True, False):
        server = ReferenceServer(Start(code=CODE, device="cuda:0",
                                       timer=TimerSpec(warm_input_pages=warm, preroll_us=200.0)))
        server.make_set(MakeSet(set=0, seed=1, exchange=None, transport="host", stage=False))
        assert len(server.baselines.time("eager", [0], 5, 1, "default")) == 5
        assert server.baselines.timer.warm_pages is warm and server.baselines.timer.preroll_us == 200.0


def test_a_host_side_longer_than_the_spin_is_counted() -> None:
    import time

    timer = DeviceTimer("cuda:0", preroll_us=100.0, preroll_retakes=0)
    one = torch.empty(1, device="cuda")
    for _ in range(3):
        timer.time_call(lambda: one.fill_(1.0))
    timer.take_host_stats()
    for _ in range(4):
        timer.time_call(lambda: one.fill_(1.0))
    quick = timer.take_host_stats()
    for _ in range(2):
        timer.time_call(lambda: (time.sleep(0.002), one.fill_(1.0)))
    slow = timer.take_host_stats()
    assert (quick["calls"], quick["over_spin"]) == (4, 0), quick
    assert (slow["calls"], slow["over_spin"]) == (2, 2) and slow["max_enqueue_ms"] >= 2.0, slow


def test_a_call_that_outlasted_the_spin_is_retaken_behind_a_longer_one() -> None:
    import time

    one = torch.empty(1, device="cuda")

    def slow() -> None:  # 2 ms of host work before the call's only kernel: the device idles inside the events
        time.sleep(0.002)
        one.fill_(1.0)

    plain = DeviceTimer("cuda:0", preroll_us=100.0, preroll_retakes=0)
    retaking = DeviceTimer("cuda:0", preroll_us=100.0, preroll_retakes=2, preroll_max_us=10_000.0)
    capped = DeviceTimer("cuda:0", preroll_us=100.0, preroll_retakes=2, preroll_max_us=300.0)
    for timer in (plain, retaking, capped):
        for _ in range(3):
            timer.time_call(lambda: one.fill_(1.0))
        timer.take_host_stats()
    _, idle_ms, _ = plain.time_call(slow)
    _, retaken_ms, _ = retaking.time_call(slow)
    _, capped_ms, _ = capped.time_call(slow)
    assert idle_ms > 1.0, idle_ms  # the host's 2 ms inside the events, less the 0.1 ms spin
    assert retaken_ms < 0.1, retaken_ms  # the retake's spin (1.5 x the enqueue) covered the host work
    assert capped_ms > 1.0, capped_ms  # a 0.3 ms spin cannot cover it: the last take is kept
    retaken, kept = retaking.take_host_stats(), capped.take_host_stats()
    assert {k: retaken[k] for k in ("calls", "retakes", "over_spin")} == {"calls": 1, "retakes": 1, "over_spin": 0}
    assert {k: kept[k] for k in ("calls", "retakes", "over_spin")} == {"calls": 1, "retakes": 1, "over_spin": 1}
    assert plain.take_host_stats()["over_spin"] == 1
