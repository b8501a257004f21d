"""A profile right after a passing verify of the identical build re-checks fewer sets; staging files round-trip."""

from __future__ import annotations

import pytest


@pytest.mark.slow
def test_profile_after_verify_rechecks_fewer_sets_until_the_build_changes(make_evaluator, make_ws, kit, tasks, honest_relu):
    with make_evaluator(protocol={"reverify_sets": 1}) as ev:
        ws = make_ws(honest_relu)
        cold = ev.profile(tasks.relu, ws, kit)
        assert cold.status.value == "correct", cold.summary_for_agent()
        assert cold.diagnostics.reverified_sets is None  # nothing verified before: the full check
        # Where the time went: every sub-phase of a profile is accounted for, and no more than the whole.
        phases = cold.diagnostics.phase_s
        assert {"acquire", "make_sets", "load", "send_inputs", "forward_calls", "export", "check", "baselines",
                "close_checks"} <= set(phases)
        assert all(v >= 0 for v in phases.values()) and sum(phases.values()) <= cold.duration_s
        warm = ev.profile(tasks.relu, ws, kit)
        assert warm.status.value == "correct" and warm.diagnostics.reverified_sets == 1
        assert warm.timing is not None and warm.timing.samples >= 3
        (ws / "model_new.py").write_text((ws / "model_new.py").read_text() + "\n# edited\n")
        edited = ev.profile(tasks.relu, ws, kit)
        assert edited.diagnostics.reverified_sets is None  # a changed workspace is a new build


@pytest.mark.slow
def test_wrong_build_is_never_reverified_lightly(make_evaluator, make_ws, kit, tasks, honest_relu):
    wrong = honest_relu.replace("cuda_extension.relu_forward(x, out)", "cuda_extension.relu_forward(x, out)\n        out.add_(1)")
    with make_evaluator(protocol={"reverify_sets": 1}) as ev:
        ws = make_ws(wrong)
        assert ev.verify(tasks.relu, ws, kit).status.value in ("incorrect", "rejected")
        again = ev.profile(tasks.relu, ws, kit)
        assert again.status.value in ("incorrect", "rejected") and again.diagnostics.reverified_sets is None


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "int64", "bool"])
def test_staging_files_round_trip_any_layout(tmp_path, dtype):
    import torch

    from cuda_agent.harness._staging import read_tensor_file, write_tensor_file

    dt = getattr(torch, dtype)
    base = (torch.arange(24).reshape(4, 6) % 5).to(dt)
    for i, t in enumerate([base, base.t(), base[:, ::2], base[0, 0], base[:0]]):
        path = tmp_path / f"t{i}.bin"
        n = write_tensor_file(path, t)
        assert n == t.numel() * t.element_size() == path.stat().st_size
        back = read_tensor_file(path, list(t.shape), dt)
        assert back.dtype == dt and back.shape == t.shape and torch.equal(back, t)
    with pytest.raises(ValueError, match="needs"):
        read_tensor_file(tmp_path / "t0.bin", [5, 6], dt)


def test_exchange_folders_go_to_dev_shm_only_when_it_has_room(monkeypatch):
    import os
    import tempfile
    from pathlib import Path

    from cuda_agent.harness import candidate_pool as sandbox

    shm = Path("/dev/shm")
    if not (shm.is_dir() and os.access(shm, os.W_OK)):
        pytest.skip("no writable /dev/shm here")
    free = os.statvfs(shm).f_bavail * os.statvfs(shm).f_frsize
    monkeypatch.setattr(sandbox, "SHM_MIN_FREE", free + (1 << 40))  # more than it has: the temp dir
    assert sandbox.default_scratch_dir() == Path(tempfile.gettempdir())
    monkeypatch.setattr(sandbox, "SHM_MIN_FREE", 1)
    assert sandbox.default_scratch_dir() == shm


def test_runners_ahead_follow_the_core_count(monkeypatch):
    from cuda_agent.harness.settings import HarnessSettings

    assert HarnessSettings(sandbox={"runners_ahead": 0}).runners_ahead() == 0
    assert HarnessSettings(sandbox={"runners_ahead": 3}).runners_ahead() == 3
    for cores, spares in [(128, 6), (32, 6), (16, 5), (8, 2), (4, 1), (2, 1), (1, 1)]:
        # The cores this process may use (its affinity mask: a lane pinned to 16 of 32 cores counts 16).
        monkeypatch.setattr("os.sched_getaffinity", lambda pid, cores=cores: set(range(cores)))
        monkeypatch.setattr("os.cpu_count", lambda: 256)
        assert HarnessSettings().runners_ahead() == spares, cores


def test_slot_writer_rewrites_a_slot_in_place_and_remakes_it_when_needed(tmp_path):
    import os

    import torch

    from cuda_agent.harness._staging import SlotWriter, read_tensor_file

    writer = SlotWriter(tmp_path)
    a = torch.randn(4, 6)
    path = writer.write("out_0.bin", a)
    inode = os.stat(path).st_ino
    b = torch.randn(6, 4).t()  # same size, other layout: the same file, rewritten
    assert writer.write("out_0.bin", b) == path and os.stat(path).st_ino == inode
    assert torch.equal(read_tensor_file(path, [4, 6], torch.float32), b)
    c = torch.arange(5, dtype=torch.int64)  # other size: a new file of the right length
    writer.write("out_0.bin", c)
    assert path.stat().st_size == 40 and torch.equal(read_tensor_file(path, [5], torch.int64), c)
    os.unlink(path)  # someone removed it (or swapped it for another file): it is made again, never written blind
    path.write_bytes(b"x" * 40)
    writer.write("out_0.bin", c + 1)
    assert torch.equal(read_tensor_file(path, [5], torch.int64), c + 1)
    flags = writer.write("out_1.bin", torch.tensor([True, False, True]))
    assert read_tensor_file(flags, [3], torch.bool).tolist() == [True, False, True]


def test_device_reader_reads_whole_files_and_refuses_short_or_wrong_ones(tmp_path):
    import torch

    from cuda_agent.harness._staging import DeviceReader, write_tensor_file

    reader = DeviceReader("cpu")  # the CUDA path differs only in the pinned buffer and the destination
    for i, t in enumerate([torch.randn(3, 5), torch.arange(7, dtype=torch.int64), torch.tensor(2.5), torch.empty(0, 4)]):
        path = tmp_path / f"t{i}.bin"
        write_tensor_file(path, t)
        back = reader.read(path, list(t.shape), t.dtype)
        assert back.shape == t.shape and back.dtype == t.dtype and torch.equal(back, t)
    big = tmp_path / "big.bin"
    write_tensor_file(big, torch.randn(1 << 19))  # grows the buffer past its first size
    assert reader.read(big, [1 << 19], torch.float32).numel() == 1 << 19
    with pytest.raises(ValueError, match=r"t0.bin \(shape \[4, 5\] of torch.float32\) holds 60 bytes, 80 expected"):
        reader.read(tmp_path / "t0.bin", [4, 5], torch.float32)


def test_a_staging_name_made_a_symlink_is_never_followed(tmp_path):
    import torch

    from cuda_agent.harness._staging import SlotWriter, write_tensor_file

    target = tmp_path / "outside.txt"  # stands for any file the trusted side may write to
    target.write_text("keep me")
    exchange = tmp_path / "exchange"
    exchange.mkdir()
    (exchange / "in_0_0.bin").symlink_to(target)
    (exchange / "fresh_0.bin").symlink_to(target)
    with pytest.raises(OSError):
        write_tensor_file(exchange / "in_0_0.bin", torch.randn(8))
    with pytest.raises(OSError):
        SlotWriter(exchange).write("fresh_0.bin", torch.randn(8))
    assert target.read_text() == "keep me"
