"""The vLLM server transport for real: ``vllm serve`` on CPU, token ids over HTTP, weights reloaded by RPC."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

pytestmark = [pytest.mark.vllm, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
VENV_PYTHON = Path(os.environ.get("CUDA_AGENT_VLLM_PYTHON", ROOT / ".venv-vllm" / "bin" / "python"))
TOLERANCE = 1e-4


@pytest.fixture(scope="module")
def facts(tmp_path_factory: pytest.TempPathFactory) -> dict:
    if not VENV_PYTHON.exists():
        pytest.skip(f"no vllm venv at {VENV_PYTHON}: run scripts/make_vllm_venv.sh (about 7 min, 3.4 GB)")
    out = tmp_path_factory.mktemp("vllm_server") / "facts.json"
    proc = subprocess.run([str(VENV_PYTHON), str(Path(__file__).with_name("vllm_server_driver.py")), str(out)],
                          capture_output=True, text=True, timeout=1800, cwd=ROOT)
    server_log = out.with_name("server.log")
    if proc.returncode != 0:
        tail = server_log.read_text()[-4000:] if server_log.exists() else ""
        pytest.fail(f"vllm server driver failed ({proc.returncode}):\n{proc.stderr[-4000:]}\nserver log:\n{tail}")
    data = json.loads(out.read_text())
    print(json.dumps(data, indent=1))
    return data


def test_token_ids_in_logprobs_out_over_http(facts: dict) -> None:
    assert all(n_ids == n_lp > 0 for n_ids, n_lp in facts["lengths"])
    assert facts["max_diff"] < TOLERANCE
    assert facts["same_seed_same_tokens"]


def test_policy_episode_over_the_server(facts: dict) -> None:
    assert facts["episode_layout_ok"]


def test_weights_reloaded_through_collective_rpc(facts: dict) -> None:
    assert facts["after_reload_diff_new"] < TOLERANCE
    assert facts["after_reload_diff_old"] > 0.1
