"""Every stage runs a few steps and checkpoints; a killed run resumes to the uninterrupted result; CLI and config errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from cuda_agent.cli import main as cli_main
from cuda_agent.config import load_config
from cuda_agent.errors import ConfigError
from cuda_agent.hookspecs import hookimpl
from cuda_agent.plugin_manager import PluginManager
from cuda_agent.training.config import TrainConfig
from cuda_agent.training.runner import run_training

CONFIGS = Path(__file__).resolve().parents[2] / "configs" / "train"


class Killed(Exception):
    """Stands for the process being killed after a step was logged."""


class KillAt:
    """Observer plugin that 'kills' the run after a given step of a given stage."""

    def __init__(self, stage: str, step: int) -> None:
        self.stage, self.step = stage, step

    @hookimpl
    def on_train_step(self, stage, step, metrics):
        if stage == self.stage and step == self.step:
            raise Killed(f"{stage} step {step}")


class StepRecorder:
    """Observer plugin recording every on_train_step call."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, int, dict]] = []

    @hookimpl
    def on_train_step(self, stage, step, metrics):
        self.calls.append((stage, step, dict(metrics)))


def _config(run_dir: Path, *overrides: str) -> TrainConfig:
    return load_config(TrainConfig, [CONFIGS / "ci_toy_chain.yaml"], [f"run_dir={run_dir}", *overrides])


def _weights(folder: str) -> dict[str, torch.Tensor]:
    return load_file(str(Path(folder) / "model.safetensors"))


@pytest.fixture(scope="module")
def chain_run(tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("chain")
    rec = StepRecorder()
    pm = PluginManager(extra_plugins=[("recorder", rec)])
    outputs = run_training(_config(run_dir), pm)
    return run_dir, outputs, rec


@pytest.mark.slow
def test_all_four_stages_run_checkpoint_and_chain(chain_run):
    run_dir, outputs, rec = chain_run
    ids = ["0_ppo_single_turn", "1_rft", "2_value_pretrain", "3_ppo_agentic"]
    for sid in ids:
        assert (run_dir / sid / "outputs.json").exists(), sid
        assert any((run_dir / sid / "checkpoints").glob("step_*/COMPLETE")), sid
    rft = json.loads((run_dir / "1_rft" / "outputs.json").read_text())
    assert rft["actor"].endswith("1_rft/actor") and rft["kept"] >= 1
    vp = json.loads((run_dir / "2_value_pretrain" / "outputs.json").read_text())
    assert vp["actor"] == rft["actor"]  # value pretraining leaves the actor alone
    agentic = json.loads((run_dir / "3_ppo_agentic" / "outputs.json").read_text())
    assert outputs["actor"] == agentic["actor"] and Path(outputs["critic"]).exists()
    # metrics reach the JSONL logger and the on_train_step hook
    lines = [json.loads(l) for l in (run_dir / "metrics.jsonl").read_text().splitlines()]
    ppo = [l for l in lines if l["stage"] == "ppo_agentic" and l["step"] >= 1]
    for key in ("reward_mean", "pass_rate", "kl", "entropy", "clip_frac", "value_loss", "explained_variance",
                "tokens_per_s", "turns_mean", "reward_frac[-1]"):
        assert key in ppo[-1], key
    assert ppo[-1]["turns_mean"] == 2.0
    stages_seen = {(s, st) for s, st, _ in rec.calls}
    assert ("ppo_single_turn", 3) in stages_seen and ("ppo_agentic", 3) in stages_seen and ("rft", 3) in stages_seen


@pytest.mark.slow
def test_finished_run_is_skipped_and_changed_config_refused(chain_run):
    run_dir, outputs, _ = chain_run
    again = run_training(_config(run_dir))
    assert again["actor"] == outputs["actor"]
    with pytest.raises(ConfigError, match=r"stages"):
        run_training(_config(run_dir, "stages=[{name: rft}]"))


@pytest.mark.slow
def test_killed_run_resumes_to_the_uninterrupted_result(tmp_path):
    stages = ("stages=[{name: ppo_single_turn, config: {env: toy_single, steps: 4, episodes_per_step: 16, "
              "actor_lr: 0.003, critic_lr: 0.003, checkpoint_every: 2, ppo: {kl_coef: 0.05}}}, "
              "{name: rft, config: {env: toy_single, collect_episodes: 256, steps: 2, batch_size: 2, lr: 0.003}}]")
    full = run_training(_config(tmp_path / "full", stages))
    pm = PluginManager(extra_plugins=[("killer", KillAt("ppo_single_turn", 3))])
    with pytest.raises(Killed):
        run_training(_config(tmp_path / "cut", stages), pm)
    assert (tmp_path / "cut" / "0_ppo_single_turn" / "checkpoints" / "step_2" / "COMPLETE").exists()
    resumed = run_training(_config(tmp_path / "cut", stages))
    a, b = _weights(full["actor"]), _weights(resumed["actor"])
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    ca, cb = torch.load(full["critic"]), torch.load(resumed["critic"])
    assert all(torch.equal(ca[k], cb[k]) for k in ca)
    m1 = json.loads((tmp_path / "full" / "0_ppo_single_turn" / "outputs.json").read_text())["metrics"]
    m2 = json.loads((tmp_path / "cut" / "0_ppo_single_turn" / "outputs.json").read_text())["metrics"]
    timing = {"update_s", "rollout_s", "step_s", "tokens_per_s"}
    assert {k: v for k, v in m1.items() if k not in timing} == {k: v for k, v in m2.items() if k not in timing}


def test_train_cli_reports_config_errors(tmp_path, capsys):
    cfg = tmp_path / "bad.yaml"
    cfg.write_text("model: {model_type: llama}\nstages: [{name: no_such_stage}]\nrun_dir: " + str(tmp_path / "r") + "\n")
    assert cli_main(["train", "-c", str(cfg)]) == 2
    err = capsys.readouterr().err
    assert "no_such_stage" in err and "ppo_agentic" in err  # names the valid stages
    cfg.write_text("stages: [{name: rft}]\n")
    assert cli_main(["train", "-c", str(cfg)]) == 2
    assert "model" in capsys.readouterr().err


def test_stage_config_unknown_key_lists_valid_keys(tmp_path):
    cfg = _config(tmp_path / "r", "stages=[{name: rft, config: {stepz: 3}}]")
    with pytest.raises(ConfigError, match="valid keys: .*steps"):
        run_training(cfg)


def test_tensorboard_logger_missing_package_says_what_to_install():
    import importlib.util

    pm = PluginManager()
    if importlib.util.find_spec("tensorboard") is not None:
        pytest.skip("tensorboard is installed here")
    with pytest.raises(ConfigError, match="pip install tensorboard"):
        pm.registry.build("logger", "tensorboard", {"log_dir": "unused"})


@pytest.mark.gpu
@pytest.mark.parametrize("zero_stage", [2, 3])
def test_toy_chain_on_gpu_bf16(tmp_path, zero_stage):
    cfg = _config(tmp_path, f"engine.zero_stage={zero_stage}", "engine.gradient_checkpointing=true")
    out = run_training(cfg)
    assert Path(out["actor"], "model.safetensors").exists() and Path(out["critic"]).exists()
    lines = [json.loads(l) for l in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert all(l["value_loss"] == l["value_loss"] for l in lines if "value_loss" in l)  # no NaN in bf16


def test_a_ppo_stage_starts_from_a_carried_critic_and_refuses_a_missing_one(tmp_path):
    """issue 22: RL spread over device runs carries its critic between runs (``init_critic``): the critic a stage
    builds is that file's, not the previous stage's nor a fresh head; a path that is not there is a clear error."""
    from cuda_agent.protocols import StageContext
    from cuda_agent.training.engines.checkpoint import full_state_dict
    from cuda_agent.training.engines.models import CriticModel, load_causal_lm
    from cuda_agent.training.stages.runtime import StageRuntime

    config = _config(tmp_path / "run", "engine.zero_stage=0")
    carried = CriticModel(load_causal_lm(config.model, seed=123))
    with torch.no_grad():
        carried.value_head.weight.fill_(0.25)  # distinct from any fresh head (zeros)
    path = tmp_path / "carried_critic.pt"
    torch.save(carried.state_dict(), path)
    other = tmp_path / "previous_stage_critic.pt"
    torch.save(CriticModel(load_causal_lm(config.model, seed=7)).state_dict(), other)

    rt = StageRuntime("ppo_agentic", StageContext(run_dir=tmp_path / "stage", config=config,
                                                  plugin_manager=PluginManager(), inputs={"critic": str(other)}))
    built = full_state_dict(rt.build_critic(1e-3, init=str(path)))
    want = carried.state_dict()
    assert set(built) == set(want)
    assert all(torch.equal(built[k].float().cpu(), want[k].float()) for k in want)
    previous = full_state_dict(rt.build_critic(1e-3))  # without init: the previous stage's critic, as before
    assert torch.equal(previous["backbone.embed_tokens.weight"].float().cpu(),
                       torch.load(other)["backbone.embed_tokens.weight"].float())

    missing = str(tmp_path / "nowhere.pt")
    stage = ("stages=[{name: ppo_agentic, config: {env: toy_two_turn, steps: 1, episodes_per_step: 4, "
             f"init_critic: '{missing}'}}}}]")
    with pytest.raises(FileNotFoundError, match=r"critic state .*nowhere.pt does not exist \(init_critic"):
        run_training(_config(tmp_path / "run2", stage))


def test_a_ppo_stage_carries_adams_moments_into_the_next_run(tmp_path):
    """issue 22: a run that continues from a carried actor continues its AdamW too (``save_actor_moments`` then
    ``init_actor_moments``): the second run's Adam step count and rate warm-up go on from the first run's."""
    from cuda_agent.training.engines.moments import read_moments_file

    block = ("{{name: ppo_agentic, config: {{env: toy_two_turn, steps: {steps}, episodes_per_step: 8, actor_lr: 3.0e-3, "
             "critic_lr: 3.0e-3, actor_warmup_steps: 3, save_actor_moments: true, ppo: {{minibatches: 2}}{extra}}}}}")
    first = run_training(_config(tmp_path / "r1", "engine.zero_stage=1", f"stages=[{block.format(steps=2, extra='')}]"))
    moments, meta = read_moments_file(Path(first["actor_moments"]))
    steps1 = int(meta["actor_steps"])
    assert steps1 >= 2 and set(moments.steps.values()) == {steps1}  # Adam's count = the learner's optimizer steps

    carried = f", init_actor_moments: '{first['actor_moments']}'"
    second = run_training(_config(tmp_path / "r2", "engine.zero_stage=1", f"model={first['actor']}",
                                  f"stages=[{block.format(steps=1, extra=carried)}]"))
    lines = [json.loads(l) for l in (tmp_path / "r2" / "metrics.jsonl").read_text().splitlines()]
    rows = [l for l in lines if "approx_kl" in l]
    assert rows and all(l["actor_moments_carried"] == 1.0 and l["actor_steps_carried"] == steps1 for l in rows)
    moments2, meta2 = read_moments_file(Path(second["actor_moments"]))
    steps2 = int(meta2["actor_steps"])
    assert steps2 > steps1 and set(moments2.steps.values()) == {steps2}

    fresh = run_training(_config(tmp_path / "r3", "engine.zero_stage=1", f"model={first['actor']}",
                                 f"stages=[{block.format(steps=1, extra='')}]"))
    _, meta3 = read_moments_file(Path(fresh["actor_moments"]))
    assert int(meta3["actor_steps"]) == steps2 - steps1  # without them: counted from zero again


def test_a_stage_whose_moments_cannot_be_written_still_ends_with_its_actor(tmp_path):
    """Writing the moments comes after the stage's training: where the engine's optimizer is one the moments module
    does not support (ZeRO-3 here), the stage ends with its actor and critic and says why there are no moments."""
    block = ("{name: ppo_agentic, config: {env: toy_two_turn, steps: 1, episodes_per_step: 4, actor_lr: 3.0e-3, "
             "critic_lr: 3.0e-3, save_actor_moments: true}}")
    out = run_training(_config(tmp_path / "r", "engine.zero_stage=3", f"stages=[{block}]"))
    assert Path(out["actor"], "model.safetensors").exists() and Path(out["critic"]).exists()
    assert "actor_moments" not in out and "ZeRO-3" in out["actor_moments_error"]
