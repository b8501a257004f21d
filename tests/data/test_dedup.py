"""Decontamination and near-duplicate removal by AST similarity (threshold 0.9)."""

from __future__ import annotations

from pathlib import Path

import pytest

from cuda_agent.training.synthesis.ast_normalize import statement_tokens
from cuda_agent.training.synthesis.dedup import DedupSettings, ReferenceIndex, ast_similarity, near_duplicates, similarity

REFERENCE = '''import torch
import torch.nn as nn


class Model(nn.Module):
    """Conv2d, ReLU, bias add, scale."""

    def __init__(self, in_channels, out_channels, kernel_size, bias_shape, scale):
        super(Model, self).__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.bias = nn.Parameter(torch.randn(bias_shape))
        self.scale = scale

    def forward(self, x):
        x = self.conv(x)
        x = torch.relu(x)
        x = x + self.bias
        x = torch.clamp(x, min=0.0, max=1.0)
        return x * self.scale


batch_size = 128
in_channels = 3
out_channels = 16
height, width = 32, 32
kernel_size = 3
bias_shape = (out_channels, 1, 1)
scale = 2.0


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, bias_shape, scale]
'''

RENAMED = (REFERENCE.replace("in_channels", "c_in").replace("out_channels", "c_out").replace("self.conv", "self.layer")
           .replace("bias_shape", "b_shape").replace("self.bias", "self.offset").replace("(self, x)", "(self, inp)")
           .replace("x = ", "inp = ").replace("(x)", "(inp)").replace("x + ", "inp + ").replace("(x,", "(inp,")
           .replace("return x", "return inp").replace("kernel_size", "ks").replace("scale", "factor"))

REORDERED = (REFERENCE
             .replace("def __init__(self, in_channels, out_channels, kernel_size, bias_shape, scale)",
                      "def __init__(self, scale, kernel_size, bias_shape, out_channels, in_channels)")
             .replace("return [in_channels, out_channels, kernel_size, bias_shape, scale]",
                      "return [scale, kernel_size, bias_shape, out_channels, in_channels]")
             .replace("x = x + self.bias", "x = self.bias + x")
             .replace("torch.clamp(x, min=0.0, max=1.0)", "torch.clamp(x, max=1.0, min=0.0)")
             .replace("return x * self.scale", "return self.scale * x"))

CONSTANTS = (REFERENCE.replace("batch_size = 128", "batch_size = 64").replace("height, width = 32, 32", "height, width = 64, 48")
             .replace("kernel_size = 3", "kernel_size = 5").replace("scale = 2.0", "scale = 0.5")
             .replace("min=0.0, max=1.0", "min=-1.0, max=6.0"))

# Same operators, composed differently: relu and clamp before the conv, bias scaled instead of added.
RECOMPOSED = REFERENCE.replace('''        x = self.conv(x)
        x = torch.relu(x)
        x = x + self.bias
        x = torch.clamp(x, min=0.0, max=1.0)
        return x * self.scale''', '''        x = torch.clamp(x, min=0.0, max=1.0)
        x = torch.relu(x) * self.scale
        x = self.conv(x)
        return x * self.bias''').replace("bias_shape = (out_channels, 1, 1)", "bias_shape = (out_channels, 1, 1, 1)")


@pytest.fixture()
def kernelbench(tmp_path: Path) -> Path:
    """A KernelBench-shaped checkout: KernelBench/level2/*.py plus unrelated code outside the levels."""
    level = tmp_path / "KernelBench" / "level2"
    level.mkdir(parents=True)
    (level / "1_Conv2d_ReLU_BiasAdd.py").write_text(REFERENCE)
    (level / "2_Matmul_Softmax.py").write_text(
        "import torch\nimport torch.nn as nn\n\nclass Model(nn.Module):\n    def __init__(self, n):\n        super().__init__()\n"
        "        self.fc = nn.Linear(n, n)\n\n    def forward(self, x):\n        return torch.softmax(self.fc(x), dim=1)\n\n"
        "n = 64\n\ndef get_inputs():\n    return [torch.randn(8, n)]\n\ndef get_init_inputs():\n    return [n]\n")
    (tmp_path / "scripts").mkdir()
    (tmp_path / "scripts" / "eval.py").write_text(REFERENCE)  # not a task: outside level folders
    return tmp_path


def test_copies_are_identical_after_normalisation():
    ref = statement_tokens(REFERENCE)
    for copy in (RENAMED, REORDERED, CONSTANTS):
        assert copy != REFERENCE
        assert statement_tokens(copy) == ref


def test_similarity_measure_properties():
    assert ast_similarity(REFERENCE, REFERENCE) == 1.0
    assert similarity(["a", "b", "c", "d"], ["a", "b", "c", "e"]) == pytest.approx(0.75)  # 2*3/8
    assert ast_similarity(REFERENCE, RECOMPOSED) < 0.9
    assert ast_similarity(REFERENCE, RECOMPOSED) == ast_similarity(RECOMPOSED, REFERENCE)


def test_reference_index_drops_copies_and_keeps_recomposition(kernelbench: Path):
    index = ReferenceIndex.from_folder(kernelbench, DedupSettings(reference=kernelbench))
    assert len(index) == 2  # scripts/eval.py is not a task
    for copy in (RENAMED, REORDERED, CONSTANTS):
        match = index.best_match(copy)
        assert match is not None and match.other.endswith("1_Conv2d_ReLU_BiasAdd.py") and match.score >= 0.9
    assert index.best_match(RECOMPOSED) is None


def test_near_duplicates_keep_the_smallest_id():
    tasks = [("synth/b", RENAMED), ("synth/a", REFERENCE), ("synth/c", CONSTANTS), ("synth/d", RECOMPOSED)]
    dropped = near_duplicates(tasks, DedupSettings())
    assert set(dropped) == {"synth/b", "synth/c"}
    assert all(m.other == "synth/a" for m in dropped.values())


def test_missing_reference_folder_is_a_clear_error(tmp_path: Path):
    with pytest.raises(FileNotFoundError, match="dedup.reference"):
        ReferenceIndex.from_folder(tmp_path / "nope", DedupSettings())


def test_lsh_candidates_agree_with_all_pairs(monkeypatch):
    from cuda_agent.training.synthesis import dedup

    tasks = [("synth/b", RENAMED), ("synth/a", REFERENCE), ("synth/c", CONSTANTS), ("synth/d", RECOMPOSED)]
    with_lsh = {k: (m.other, m.score) for k, m in near_duplicates(tasks, DedupSettings()).items()}
    monkeypatch.setattr(dedup, "_lsh", lambda settings: dedup._AllPairs())  # what runs without datasketch
    exact = {k: (m.other, m.score) for k, m in near_duplicates(tasks, DedupSettings()).items()}
    assert with_lsh == exact
