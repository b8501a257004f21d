"""The ``ncu`` tool without a GPU: absent where Nsight Compute is not installed, registered where it is and then
refusing cleanly on a CPU backend; ncu's CSV read into the summary the model sees (limiter, occupancy, stalls, a
token budget); a permission error refused with its reason; the candidate's kernel names taken from an nvcc build.
The GPU half is tests/tools/test_gpu_ncu.py."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from cuda_agent.components import tool_names
from cuda_agent.config import RunConfig
from cuda_agent.harness.ncu_profile import (
    NcuRefused,
    count_tokens,
    ncu_command,
    ncu_path,
    parse_ncu_csv,
    read_report,
    summarize,
)
from cuda_agent.plugin_manager import PluginManager
from cuda_agent.protocols import ToolContext

# ncu --csv --page raw --print-units base, two launches (the shape Nsight Compute 2025.3 writes).
HEADER = ['ID', 'Process ID', 'Process Name', 'Host Name', 'Kernel Name', 'Context', 'Stream', 'Block Size',
          'Grid Size', 'Device', 'CC', 'dram__throughput.avg.pct_of_peak_sustained_elapsed', 'gpu__time_duration.sum',
          'l1tex__throughput.avg.pct_of_peak_sustained_active', 'launch__block_size', 'launch__grid_size',
          'launch__registers_per_thread', 'launch__shared_mem_per_block_dynamic',
          'launch__shared_mem_per_block_static', 'lts__throughput.avg.pct_of_peak_sustained_elapsed',
          'sm__maximum_warps_per_active_cycle_pct', 'sm__throughput.avg.pct_of_peak_sustained_elapsed',
          'sm__warps_active.avg.pct_of_peak_sustained_active',
          'smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio',
          'smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio',
          'smsp__average_warps_issue_stalled_lg_throttle_per_issue_active.ratio',
          'smsp__average_warps_issue_stalled_math_pipe_throttle_per_issue_active.ratio']
UNITS = ['', '', '', '', '', '', '', '', '', '', '', '%', 'nsecond', '%', '', '', 'register/thread', 'byte/block',
         'byte/block', '%', '%', '%', '%', 'ratio', 'ratio', 'ratio', 'ratio']
ROWS = [
    ['0', '4242', 'python3', 'h200', 'relu_kernel', '1', '7', '(256, 1, 1)', '(6291456, 1, 1)', '0', '9.0', '91.37',
     '4,215,104', '28.1', '256', '6291456', '16', '0', '0', '44.6', '100', '17.9', '86.2', '41.3', '0', '6.2', '0.4'],
    ['1', '4242', 'python3', 'h200', 'row_sum_kernel', '1', '7', '(1024, 1, 1)', '(1024, 1, 1)', '0', '9.0', '12.5',
     '38,912', '40.1', '1024', '1024', '32', '0', '4096', '20.3', '50', '35.5', '31.0', '2.5', '9.8', '0.1', '1.0'],
]


def _csv(rows):
    return "\n".join(",".join(f'"{c}"' for c in r) for r in rows)


NCU_LOG = "==PROF== Connected to process 4242\n==PROF== Profiling \"relu_kernel\": 0%....50%....100% - 9 passes\n" + \
          _csv([HEADER, UNITS, *ROWS]) + "\n==PROF== Disconnected from process 4242\n"


def test_ncu_is_absent_where_it_is_not_installed():
    if ncu_path() is not None:
        pytest.skip("ncu is installed here")
    pm = PluginManager(load_entrypoints=False)
    assert "ncu" not in pm.registry.names("tool")
    assert "ncu" not in tool_names(RunConfig(), pm)


def test_where_ncu_is_installed_the_tool_registers_and_refuses_on_a_cpu_backend(tmp_path, monkeypatch):
    fake = tmp_path / "bin" / "ncu"  # stands in for the installed binary: only its presence is looked at here
    fake.parent.mkdir()
    fake.write_text("#!/bin/sh\nexit 1\n")
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{fake.parent}{os.pathsep}{os.environ['PATH']}")
    pm = PluginManager(load_entrypoints=False)
    assert "ncu" in tool_names(RunConfig(), pm)
    tool = pm.registry.build("tool", "ncu", {"time_limit_s": 60})
    backend = pm.registry.build("backend", "cpu")
    try:
        task_code = (Path(__file__).resolve().parents[2] / "examples" / "tasks" / "swish.py").read_text()
        from cuda_agent.schemas.task import TaskManifest

        task = TaskManifest.from_code("examples/swish", task_code)
        ws = backend.prepare_workspace(task, tmp_path / "ws")
        out = tool.run(tool.Args(), ToolContext(workspace=ws, task=task, backend=backend, run_dir=tmp_path, turn=1))
    finally:
        backend.close()
    assert out.is_error and out.content == "ncu refused: ncu reads NVIDIA GPU counters; backend 'cpu' runs its " \
                                           "kernels on cpu"


def test_the_csv_becomes_a_short_summary_with_every_named_field():
    kernels = parse_ncu_csv(NCU_LOG)
    assert [k.name for k in kernels] == ["relu_kernel", "row_sum_kernel"]
    relu, row_sum = kernels
    assert relu.duration_us == pytest.approx(4215.104) and relu.limiter() == ("DRAM", pytest.approx(91.37))
    assert row_sum.limiter()[0].startswith("latency")  # no unit above 60% of peak
    assert relu.stalls == {"long_scoreboard": 41.3, "barrier": 0.0, "lg_throttle": 6.2, "math_pipe_throttle": 0.4}
    text = summarize(kernels, max_tokens=400)
    assert text.splitlines()[0] == "Nsight Compute, clocks as when timed, one input set: 2 kernel launch(es)"
    assert "relu_kernel: grid (6291456, 1, 1) block (256, 1, 1), 16 registers/thread, 0 B shared/block" in text
    assert "time 4215.1 us, limited by DRAM" in text and "SM 18%, DRAM 91%, L2 45%, L1 28%" in text
    assert "occupancy achieved 86% of theoretical 100%" in text
    assert "top stalls (cycles per issued instruction): long_scoreboard 41.3, lg_throttle 6.2, math_pipe_throttle 0.4" in text
    assert "4096 B shared/block" in text and count_tokens(text) <= 400


def test_the_token_budget_leaves_launches_out_and_says_so():
    kernels = parse_ncu_csv(NCU_LOG)
    one = summarize(kernels, max_tokens=count_tokens(summarize(kernels[:1], 10_000)) + 5)
    assert "relu_kernel" in one and "row_sum_kernel" not in one
    assert one.endswith("(+1 more launch(es) left out: token budget %d)" % (count_tokens(summarize(kernels[:1], 10_000)) + 5))


def test_counters_that_cannot_be_read_are_refused_with_the_reason():
    log = "==PROF== Connected to process 9\n==ERROR== ERR_NVGPUCTRPERM - The user does not have permission to access " \
          "NVIDIA GPU Performance Counters on the target device 0.\n"
    with pytest.raises(NcuRefused, match="cannot read the GPU's performance counters here \\(ERR_NVGPUCTRPERM\\).*"
                                         "unprivileged user in the sandbox"):
        read_report(log)
    with pytest.raises(NcuRefused, match="ncu reported: ==ERROR== Failed to profile"):
        read_report("==ERROR== Failed to profile kernel\n")
    assert read_report("==PROF== no kernels\n") == []


def test_the_command_profiles_only_the_candidates_kernels_at_the_timed_clocks(tmp_path):
    cmd = ncu_command("/opt/ncu", tmp_path / "ncu.csv", ["relu_kernel", "row_sum"], 4)
    text = " ".join(cmd)
    assert "--clock-control none" in text and "--launch-count 4" in text and f"--log-file {tmp_path / 'ncu.csv'}" in text
    assert cmd[-2:] == ["--kernel-name", "regex:^(relu_kernel|row_sum)$"]


@pytest.mark.slow
def test_the_candidates_kernel_names_come_from_the_nvcc_build(tmp_path):
    import shutil

    from cuda_agent.harness import find_nvcc
    from cuda_agent.harness.build import BuildOutcome, build_extension, default_cache_dir
    from cuda_agent.harness.layout import write_layout
    from cuda_agent.harness.ncu_profile import base_names
    from cuda_agent.schemas.task import TaskManifest

    if find_nvcc() is None:
        pytest.skip("needs nvcc")
    repo = Path(__file__).resolve().parents[2]
    task = TaskManifest.from_code("examples/swish", (repo / "examples" / "tasks" / "swish.py").read_text())
    write_layout(tmp_path / "ws", task, "cuda")
    shutil.copytree(repo / "examples" / "solutions" / "cuda" / "swish", tmp_path / "ws", dirs_exist_ok=True)
    outcome = build_extension(tmp_path / "ws", "cuda", tmp_path / "build", arch="sm_90a", cache_dir=default_cache_dir(),
                              link=False)
    assert outcome.ok, outcome.log
    obj = next((tmp_path / "build").rglob("swish.cu.o"))
    adapter = PluginManager(load_entrypoints=False).registry.build("backend", "cuda").adapter
    names = adapter.kernel_names(tmp_path / "ws", BuildOutcome(ok=True, so_path=obj))
    assert base_names(names) == ["swish_kernel"] and names[0].startswith("swish_kernel(")
