"""Secrets: redacted by field identity, never by substring; a planted API key reaches no file, output or logger.

The key is planted where users put it: inside the ``--policy`` spec (``openai:MODEL?base_url=...&api_key=...``)
and in the ``plugins.openai`` block. Everything else, ``max_tokens`` included, is shown, saved, hashed and
compared on resume.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from cuda_agent import cli
from cuda_agent.config import RunConfig, config_hash, load_config
from cuda_agent.harness.evaluation.config import EvalConfig
from cuda_agent.harness.evaluation.resume import ResumeRefused, check_or_save_config

ROOT = Path(__file__).resolve().parents[2]
TOY_DIR = Path(__file__).parent / "toy_plugins"
FAKES = ROOT / "tests"
KEY = "sk-planted-0123456789abcdef"
sys.path.insert(0, str(FAKES))

from fakes.chat_server import FakeChatServer, Reply  # noqa: E402


def test_config_show_redacts_secrets_by_identity_and_shows_everything_else(capsys):
    spec = f"openai:m?base_url=http://127.0.0.1:9/v1&api_key={KEY}&max_tokens=64"
    assert cli.main(["config", "show", "-o", "agent.max_tokens=4096", "-o", f"plugins.openai.api_key={KEY}",
                     "-o", f"policy={json.dumps(spec)}"]) == 0
    out = capsys.readouterr().out
    shown = yaml.safe_load(out)
    assert KEY not in out
    assert shown["agent"]["max_tokens"] == 4096  # 'tokens' in a name is no secret
    assert shown["plugins"]["openai"]["api_key"] == "***"
    assert shown["policy"] == "openai:m?base_url=http://127.0.0.1:9/v1&api_key=***&max_tokens=64"


def test_training_configs_keep_their_token_counts(capsys):
    assert cli.main(["config", "show", "--model", "cuda_agent.training.config:TrainConfig",
                     "-c", str(ROOT / "configs" / "train" / "paper.yaml")]) == 0
    out = capsys.readouterr().out
    assert "***" not in out and "max_new_tokens:" in out


def test_redaction_is_exact_not_by_substring():
    from cuda_agent.config import redact

    data = {"max_tokens": 5, "token_budget": 7, "api_key": KEY, "api_key_env": "OPENAI_API_KEY", "secret_sauce": 1,
            "nested": [{"api_key": KEY}], "policy": f"openai:m?api_key={KEY}&temperature=0.2"}
    assert redact(data) == {"max_tokens": 5, "token_budget": 7, "api_key": "***", "api_key_env": "OPENAI_API_KEY",
                            "secret_sauce": 1, "nested": [{"api_key": "***"}], "policy": "openai:m?api_key=***&temperature=0.2"}


def test_config_hash_excludes_secrets_and_includes_everything_else():
    base = load_config(RunConfig, overrides=["policy=openai:m", "agent.max_tokens=100"])
    keyed = load_config(RunConfig, overrides=[f"policy=openai:m?api_key={KEY}", "agent.max_tokens=100",
                                              f"plugins.openai.api_key={KEY}"])
    other = load_config(RunConfig, overrides=["policy=openai:m", "agent.max_tokens=200"])
    assert config_hash(base) == config_hash(keyed) != config_hash(other)


def test_resume_notices_a_changed_max_tokens_and_ignores_a_key(tmp_path):
    def eval_config(max_tokens: int, key: str | None = None):
        policy = "openai:m" + (f"?api_key={key}" if key else "")
        return load_config(EvalConfig, overrides=[f"policy={policy}", f"agent.max_tokens={max_tokens}",
                                                  "eval.tasks=folder:x"])

    assert check_or_save_config(tmp_path, eval_config(100, KEY)) is False
    assert KEY not in (tmp_path / "config.json").read_text()
    assert check_or_save_config(tmp_path, eval_config(100)) is True  # the key is no part of the comparison
    with pytest.raises(ResumeRefused, match=r"agent\.max_tokens: saved 100 != now 200"):
        check_or_save_config(tmp_path, eval_config(200, KEY))


TASK = "import torch\nimport torch.nn as nn\n\n\nclass Model(nn.Module):\n    def forward(self, x):\n        return x + 1\n\n\n" \
       "def get_inputs():\n    return [torch.rand(8)]\n\n\ndef get_init_inputs():\n    return []\n"


def _cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "cuda_agent.cli", "-p", "toy_backend", *args],
                          capture_output=True, text=True, env=env, timeout=600)


def _files_holding(root: Path, needle: str) -> list[str]:
    return [str(p) for p in root.rglob("*") if p.is_file() and needle.encode() in p.read_bytes()]


@pytest.mark.slow
def test_a_planted_key_is_in_no_run_file_no_output_and_no_logger(tmp_path, monkeypatch, task):
    finish = Reply('<tool_call>{"name": "finish", "arguments": {}}</tool_call>')
    env = {**os.environ, "PYTHONPATH": str(TOY_DIR) + os.pathsep + os.environ.get("PYTHONPATH", ""),
           "CUDA_AGENT_PLUGINS": "", "OPENAI_API_KEY": ""}
    task_json = tmp_path / "task.json"
    task_json.write_text(task.model_dump_json())
    tasks = tmp_path / "tasks"
    tasks.mkdir()
    (tasks / "plus_one.py").write_text(TASK)
    with FakeChatServer(default=finish, models=["m"], api_key=KEY) as server:
        spec = f"openai:m?base_url={server.base_url}&api_key={KEY}&max_tokens=64"
        outputs = [
            _cli("run", str(task_json), "--policy", spec, "--backend", "toy", "--out", str(tmp_path / "run"),
                 "-o", f"plugins.openai.api_key={KEY}", env=env),
            _cli("eval", "--tasks", str(tasks), "--policy", spec, "--backend", "toy", "--out", str(tmp_path / "eval"),
                 "-o", "eval.probe=false", "-o", "eval.progress=false", env=env),
            _cli("report", str(tmp_path / "eval"), "--dest", str(tmp_path / "report"), env=env),
            _cli("config", "show", "-o", f"policy={json.dumps(spec)}", env=env),
        ]
        used = [{k.lower(): v for k, v in r.headers.items()}.get("authorization") for r in server.requests
                if r.path.endswith("/chat/completions")]
    for proc in outputs:
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert KEY not in proc.stdout and KEY not in proc.stderr
    assert used and all(h == f"Bearer {KEY}" for h in used)  # the key did its job
    assert _files_holding(tmp_path, KEY) == []
    header = json.loads((tmp_path / "run" / "trajectory.jsonl").read_text().splitlines()[0])
    assert "api_key=***" in header["policy"] and "max_tokens=64" in header["policy"]
    assert json.loads((tmp_path / "run" / "config.json").read_text())["plugins"]["openai"]["api_key"] == "***"

    # loggers receive the config only through log_run_config: TensorBoard's text and W&B's run config
    pytest.importorskip("tensorboard")
    monkeypatch.syspath_prepend(str(FAKES / "fakes" / "wandb_client"))  # W&B is an outside service: its stand-in
    monkeypatch.setenv("WANDB_DIR", str(tmp_path / "wandb"))
    from cuda_agent.plugin_manager import PluginManager
    from cuda_agent.run_metadata import log_run_config

    config = load_config(RunConfig, overrides=[f"policy={spec}", f"plugins.openai.api_key={KEY}", "agent.max_tokens=4096"])
    registry = PluginManager(load_entrypoints=False).registry
    loggers = [registry.build("logger", "tensorboard", {"log_dir": str(tmp_path / "tb")}),
               registry.build("logger", "wandb", {"mode": "offline", "name": "secrets"})]
    log_run_config(loggers, config)
    for logger in loggers:
        logger.log({"loss": 1.0}, step=1, stage="rft")
        logger.close()
    assert list((tmp_path / "tb").iterdir()) and list((tmp_path / "wandb").rglob("config.yaml"))
    assert _files_holding(tmp_path / "tb", KEY) == [] and _files_holding(tmp_path / "wandb", KEY) == []
    assert _files_holding(tmp_path / "tb", "max_tokens: 4096") and _files_holding(tmp_path / "wandb", "max_tokens: 4096")
