"""The ``kernelbench`` task source on real KernelBench problems: upstream provenance, reduced sizes, probing.

The five vendored problems (``tests/kernelbench/data``, KernelBench's MIT licence and commit beside them)
run in CI; the whole pinned checkout (``bash scripts/fetch_kernelbench.sh``, into ``.kernelbench/``) is
probed by the slow test at the end when it is there.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from cuda_agent.errors import ConfigError
from cuda_agent.harness.evaluation.task_sources import iter_kernelbench
from cuda_agent.harness.kernelbench_sizes import plan_reduction, reduced_code
from cuda_agent.harness.tasks import load_task_code

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "tests" / "kernelbench" / "data"
PINNED = next(line.split("=", 1)[1] for line in (REPO / "scripts" / "kernelbench.lock").read_text().splitlines()
              if line.startswith("commit="))
CHECKOUT = REPO / ".kernelbench"


def test_vendored_problems_are_the_pinned_commits_files() -> None:
    assert (DATA / "COMMIT").read_text().strip() == PINNED
    assert "MIT License" in (DATA / "LICENSE").read_text()
    tasks = list(iter_kernelbench(DATA))
    assert [t.id for t in tasks] == [
        "kernelbench/level1/1_Square_matrix_multiplication_", "kernelbench/level1/19_ReLU",
        "kernelbench/level1/23_Softmax", "kernelbench/level2/12_Gemm_Multiply_LeakyReLU", "kernelbench/level3/1_MLP"]
    for task in tasks:
        assert task.upstream is not None and task.upstream.commit == PINNED
        file = DATA / task.upstream.path
        assert task.upstream.file_sha256 == hashlib.sha256(file.read_bytes()).hexdigest()
        assert task.code == file.read_text()  # full sizes: the file itself
        assert task.meta["kernelbench"]["commit"] == PINNED


def test_reduced_sizes_scale_data_sizes_and_keep_the_operator() -> None:
    relu = (DATA / "KernelBench" / "level1" / "19_ReLU.py").read_text()
    plan = plan_reduction(relu)
    assert set(plan.cpu_sizes) == {"batch_size", "dim"} and plan.cpu_sizes["dim"] < 393216
    softmax_axis = relu.replace("dim = 393216", "dim = 393216\naxis = 1").replace("torch.relu(x)", "torch.softmax(x, axis)")
    assert "axis" in plan_reduction(softmax_axis).not_scalable  # an axis is never scaled
    conv = ("import torch\nbatch_size = 64\nchannels = 256\nkernel_size = 17\nnum_groups = 32\n"
            "bias_shape = (channels, 1, 1)\n"
            "def get_inputs():\n    return [torch.rand(batch_size, channels, 64, 64)]\n"
            "def get_init_inputs():\n    return [channels, kernel_size, num_groups, bias_shape]\n")
    plan = plan_reduction(conv)
    assert "kernel_size" in plan.not_scalable
    groups = plan.cpu_sizes["num_groups"]  # divided with the channels it splits (32 > SMALL)
    assert plan.cpu_sizes["channels"] % groups == 0  # GroupNorm's groups still divide the channels
    assert plan.cpu_sizes["channels"] // groups == 256 // 32  # and a group keeps its width
    shuffle = conv.replace("num_groups = 32", "num_groups = 3").replace("channels = 256", "channels = 480")
    assert plan_reduction(shuffle).cpu_sizes["channels"] % 48 == 0  # its factors of 16 and of the groups kept
    assert plan.cpu_sizes["bias_shape"] == (plan.cpu_sizes["channels"], 1, 1)  # derived constants recomputed


GEMM_GROUP_NORM = """import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self, in_features, out_features, num_groups):
        super().__init__()
        self.matmul = nn.Linear(in_features, out_features)
        self.group_norm = nn.GroupNorm(num_groups, out_features)

    def forward(self, x):
        x = self.matmul(x)
        return self.group_norm(torch.sigmoid(x) * x)

batch_size = {batch}
in_features = {features}
out_features = {features}
num_groups = {groups}

def get_inputs():
    return [torch.rand(batch_size, in_features)]

def get_init_inputs():
    return [in_features, out_features, num_groups]
"""


@pytest.mark.parametrize(("batch", "features", "groups"), [(32768, 4096, 64), (1024, 8192, 512)])
def test_a_reduced_gemm_group_norm_is_still_a_group_norm(batch: int, features: int, groups: int) -> None:
    """KernelBench level2/37 and 62's shapes. Kept whole, the group count left one feature per group at reduced size
    (64 groups of 64 features, 512 of 512): GroupNorm of one element is its bias, and the output was float32
    rounding noise."""
    torch = pytest.importorskip("torch")
    code, plan = reduced_code(GEMM_GROUP_NORM.format(batch=batch, features=features, groups=groups))
    assert plan.factor > 1
    ns: dict = {}
    exec(compile(code, "gemm_group_norm", "exec"), ns)  # noqa: S102 - a KernelBench-format problem
    torch.manual_seed(0)
    model = ns["Model"](*ns["get_init_inputs"]())
    norm = model.group_norm
    assert norm.num_channels // norm.num_groups >= 8, (norm.num_groups, norm.num_channels)
    with torch.no_grad():
        out = model(*ns["get_inputs"]())
    assert out.pow(2).mean().sqrt() > 0.5  # a normalised output, not rounding noise


def test_reduced_tasks_say_they_are_not_comparable_and_probe_on_cpu() -> None:
    tasks = {t.name: t for t in iter_kernelbench(DATA, sizes="reduced")}
    relu = tasks["19_ReLU"]
    assert relu.meta["sizes"] == "reduced" and relu.meta["comparable_to_published"] is False
    assert relu.upstream.file_sha256 == hashlib.sha256((DATA / relu.upstream.path).read_bytes()).hexdigest()
    probed = load_task_code(relu.code, relu.id, device="cpu")
    assert probed.inputs[0].shape == [relu.meta["reduced_sizes"]["batch_size"], relu.meta["reduced_sizes"]["dim"]]
    mlp = load_task_code(tasks["1_MLP"].code, "mlp", device="cpu")
    sizes = tasks["1_MLP"].meta["reduced_sizes"]
    assert mlp.outputs[0].shape == [sizes["batch_size"], sizes["output_size"]] and sizes["output_size"] < 8192


def test_sizes_must_be_full_or_reduced() -> None:
    with pytest.raises(ConfigError, match="valid: full, reduced"):
        list(iter_kernelbench(DATA, sizes="tiny"))


@pytest.mark.slow
@pytest.mark.skipif(not (CHECKOUT / "KernelBench").is_dir(), reason="no .kernelbench (bash scripts/fetch_kernelbench.sh)")
def test_every_level_1_to_3_problem_of_the_pinned_checkout_loads_at_reduced_size(tmp_path: Path) -> None:
    from concurrent.futures import ThreadPoolExecutor

    tasks = list(iter_kernelbench(CHECKOUT, levels="1,2,3", sizes="reduced"))
    assert len(tasks) == 250 and all(t.upstream.commit == PINNED for t in tasks)

    def probe(task):  # type: ignore[no-untyped-def]
        try:
            load_task_code(task.code, task.id, device="cpu", timeout_s=600)
            return None
        except Exception as exc:  # noqa: BLE001 - collected and reported together
            return f"{task.id}: {str(exc)[:300]}"

    with ThreadPoolExecutor(max_workers=2) as pool:
        failures = [f for f in pool.map(probe, tasks) if f]
    (tmp_path / "failures.json").write_text(json.dumps(failures, indent=1))
    assert failures == [], "\n".join(failures)


def test_the_task_source_plugin_takes_sizes_from_the_spec() -> None:
    from cuda_agent.plugins.data.kernelbench import KernelBenchConfig, KernelBenchSource
    from cuda_agent.specs import parse_tasks_spec

    spec = parse_tasks_spec(f"kernelbench:{DATA}?levels=1&ids=19&sizes=reduced", {"kernelbench", "folder"})
    tasks = list(KernelBenchSource(KernelBenchConfig(**spec.config())).iter_tasks())
    assert [t.id for t in tasks] == ["kernelbench/level1/19_ReLU"]
    assert tasks[0].meta["sizes"] == "reduced" and tasks[0].upstream.commit == PINNED
