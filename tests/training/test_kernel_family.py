"""The kernel family a from-scratch policy learns: tasks, expert writer, expert episodes, CI training run.

The expert's files are compiled and verified by the real CPU backend; an expert episode replayed through the
real agent loop produces exactly the token record the synthesizer builds (observations taken from the real
run); a tiny model fine-tuned on <= 50 expert episodes then takes a PPO step whose episodes compile and verify.
"""

from __future__ import annotations

import json
import math
import random
from pathlib import Path

import pytest
import torch

from cuda_agent.training.kernel_family.ops import OPS, chain_apply
from cuda_agent.training.kernel_family.tasks import EquivalenceProbe, family_tasks, memorisation_rate
from cuda_agent.training.kernel_family.trajectories import ExpertPlan, QualityMix, draw_plan, expert_turns
from cuda_agent.training.kernel_family.writer import Bug, Style, write_solution

ROOT = Path(__file__).resolve().parents[2]
CLEAN = QualityMix(fused=1.0, vector=0.0, launch={"t256": 1.0}, bug={"none": 1.0}, improve=0.0)
#: The CI run's experts compile and verify in their first reply: a tiny model reproduces one long reply greedily.
EARLY = QualityMix(fused=1.0, vector=0.0, launch={"t256": 1.0}, bug={"none": 1.0}, improve=0.0, verify_early=1.0)


@pytest.fixture(scope="module")
def tasks():
    return family_tasks(120, 24, seed=3)


def test_heldout_tasks_are_decontaminated_and_not_solved_by_replaying_a_training_solution(tasks) -> None:
    train, heldout, report = tasks
    assert len(heldout) == 24 and len(train) >= 100
    held = {tuple(t.chain) for t in heldout}
    assert not held & {tuple(t.chain) for t in train}
    probe = EquivalenceProbe(heldout)
    assert all(probe.matches(t.chain) == [] for t in train)  # no training solution passes a held-out task
    assert report["memorisation_after"] == memorisation_rate(train, heldout) < 0.2
    # The probe does find equivalent chains: relu after relu is relu.
    relu = next((h for h in heldout if h.chain == ["relu"]), None)
    if relu is not None:
        assert relu.index in probe.matches(["relu", "abs"])


def test_every_operator_expression_matches_torch(tmp_path) -> None:
    """The C expressions the writer emits, compiled by the real C++ compiler, compute torch's operators."""
    import ctypes
    import shutil
    import subprocess

    cxx = shutil.which("g++") or shutil.which("c++")
    if cxx is None:
        pytest.skip("no C++ compiler")
    keys = sorted(OPS)
    body = ["#include <cmath>", "#include <cstdint>", 'extern "C" void eval_op(int k, const float* x, float* y, int64_t n) {',
            "  for (int64_t i = 0; i < n; ++i) {", "    float v = x[i];", "    switch (k) {"]
    body += [f"      case {j}: v = {OPS[k].expr}; break;" for j, k in enumerate(keys)]
    body += ["    }", "    y[i] = v;", "  }", "}"]
    src, lib = tmp_path / "ops.cpp", tmp_path / "ops.so"
    src.write_text("\n".join(body) + "\n")
    subprocess.run([cxx, "-O2", "-shared", "-fPIC", str(src), "-o", str(lib)], check=True)
    fn = ctypes.CDLL(str(lib)).eval_op
    x = torch.linspace(-6, 6, 401)
    for j, key in enumerate(keys):
        v = x.abs() + 0.05 if OPS[key].spec.domain != "real" else x.clone()
        y = torch.empty_like(v)
        fn(ctypes.c_int(j), ctypes.c_void_p(v.data_ptr()), ctypes.c_void_p(y.data_ptr()), ctypes.c_int64(v.numel()))
        assert torch.allclose(y, chain_apply([key], v), atol=1e-5, rtol=1e-5), key


def test_writer_styles_and_bugs(tasks) -> None:
    train, _, _ = tasks
    chain = next(t.chain for t in train if len(t.chain) == 3 and len(set(t.chain)) == 3)
    fused = write_solution(chain, "cuda", Style(fused=True, vector=True, launch="t512"))
    unfused = write_solution(chain, "cuda", Style(fused=False, launch="narrow"))
    assert fused.files["kernels/chain.cu"].count("__global__") == 1 and "float4" in fused.files["kernels/chain.cu"]
    assert unfused.files["kernels/chain.cu"].count("__global__") == 3 and "blocks = 64;" in unfused.files["kernels/chain.cu"]
    buggy = write_solution(chain, "cpu", Style(), Bug("semicolon", 1))
    assert buggy.files != write_solution(chain, "cpu", Style()).files
    assert buggy.repaired() == write_solution(chain, "cpu", Style()).files
    with pytest.raises(ValueError, match="another operator"):
        write_solution(chain, "cpu", Style(), Bug("wrong_op", 0, chain[0]))


def test_manifest_built_without_a_probe_matches_the_probe(tasks) -> None:
    from cuda_agent.harness.tasks import load_task_code

    t = tasks[0][0]
    mine = t.manifest("cpu")
    probed = load_task_code(t.code, t.id, sizes="cpu")
    assert [i.shape for i in mine.inputs] == [i.shape for i in probed.inputs]
    assert [o.shape for o in mine.outputs] == [o.shape for o in probed.outputs]
    assert mine.code_hash == probed.code_hash
    assert [i.domain.kind for i in mine.inputs] == [i.domain.kind for i in probed.inputs]


@pytest.mark.slow
def test_expert_files_pass_and_planted_bugs_are_reported_by_the_real_cpu_backend(tasks, tmp_path) -> None:
    """Compile and verify for real: the clean solution is correct, a planted compile bug gives the compiler error
    line the synthesized observation shows, a wrong formula fails verify and its repair passes."""
    from cuda_agent.plugin_manager import PluginManager
    from cuda_agent.training.kernel_family.trajectories import compiler_log

    train = tasks[0]
    t = next(t for t in train if len(t.chain) >= 2 and len(set(t.chain)) == len(t.chain))
    backend = PluginManager().registry.build("backend", "cpu", {}, where="backend")
    task = t.manifest("cpu")
    try:
        cases = [(Style(vector=True), None), (Style(fused=False, launch="narrow"), Bug("undeclared", 1)),
                 (Style(), Bug("wrong_op", 0, next(k for k in ("neg", "cos", "atan") if k not in t.chain)))]
        for n, (style, bug) in enumerate(cases):
            ws = backend.prepare_workspace(task, tmp_path / f"ws{n}")
            sol = write_solution(t.chain, "cpu", style, bug)
            for path, content in sol.files.items():
                ws.write(path, content)
            compiled = backend.compile(ws, task)
            if bug is not None and bug.phase == "compile":
                assert compiled.status.value == "compile_error"
                real_first = compiled.message.splitlines()[1]
                assert real_first == compiler_log(sol).splitlines()[0]
                ws.write(sol.kernel_path, sol.repaired()[sol.kernel_path])
                assert backend.compile(ws, task).passed
            else:
                assert compiled.passed, compiled.summary_for_agent()
            verified = backend.verify(ws, task)
            if bug is not None and bug.phase == "verify":
                assert verified.status.value == "incorrect"
                ws.write(sol.kernel_path, sol.repaired()[sol.kernel_path])
                verified = backend.verify(ws, task)
            assert verified.passed, verified.summary_for_agent()
    finally:
        backend.close()


class ReplayEngine:
    """Answers each generate call with the next expert turn's token ids (the policy under test is the loop)."""

    def __init__(self, outputs: list[list[int]]) -> None:
        self.outputs = list(outputs)

    def generate(self, prompts, params):
        from cuda_agent.protocols import Generation

        ids = self.outputs.pop(0)
        return [Generation(output_ids=ids, logprobs=[0.0] * len(ids), finish_reason="stop")]


@pytest.mark.slow
def test_an_expert_episode_replayed_through_the_real_loop_has_the_synthesized_token_record(tasks, tmp_path) -> None:
    """Same text, same tool-call ids, same truncation, same token ids: the synthesizer is the loop's format."""
    from transformers import AutoTokenizer

    from cuda_agent.config import RunConfig
    from cuda_agent.loop import run_episode
    from cuda_agent.plugin_manager import PluginManager
    from cuda_agent.protocols import SamplingParams
    from cuda_agent.schemas.trajectory import episode_token_layout, load_trajectory
    from cuda_agent.tokenization import encode
    from cuda_agent.training.kernel_family.corpus import (
        build_family_data,
        family_run_settings,
        prompts,
        tool_schemas,
    )
    from cuda_agent.training.kernel_family.trajectories import Turn, episode_tokens
    from cuda_agent.training.rollout.token_policy import EngineTokenPolicy

    data = tmp_path / "data"
    build_family_data(data, backend="cpu", n_train=4, n_heldout=2, vocab=700, mix=CLEAN, heldout_experts=0)
    tok = AutoTokenizer.from_pretrained(data / "tokenizer")
    train = tasks[0]
    t = next(t for t in train if len(t.chain) >= 2 and len(set(t.chain)) == len(t.chain))
    plan = ExpertPlan(task=t, backend="cpu", style=Style(), bug=Bug("semicolon", 0))
    turns = expert_turns(plan)
    eot = tok.eos_token_id
    engine = ReplayEngine([encode(tok, turn.text) + [eot] for turn in turns])
    policy = EngineTokenPolicy(engine, tok, SamplingParams(max_new_tokens=2000, temperature=1.0, seed=0))
    cfg = RunConfig.model_validate({**family_run_settings(data, "cpu"), "policy": "scripted"})
    end = run_episode(t.manifest("cpu"), config=cfg, plugin_manager=PluginManager(), out_dir=tmp_path / "ep", policy=policy)
    traj = load_trajectory(tmp_path / "ep" / "trajectory.jsonl")
    phases = [(r.phase, r.status.value) for turn in traj.turns for r in turn.results]
    assert phases[:2] == [("compile", "compile_error"), ("compile", "correct")]
    assert ("verify", "correct") in phases and end.exit == "submitted" and end.graded.passed
    real_obs = [[o.content for o in turn.observations] for turn in traj.turns]
    assert [len(o) for o in real_obs] == [len(turn.observations) for turn in turns]
    replayed = [Turn(text=turn.text, calls=turn.calls, observations=obs) for turn, obs in zip(turns, real_obs)]
    system, user = prompts(t, "cpu", data / "system_prompt.j2", tool_schemas())
    assert (system, user) == (traj.header.system_prompt, traj.header.task_prompt)
    synthesized = episode_tokens(tok, system, user, replayed, tool_schemas())
    ids, mask, _ = episode_token_layout(traj.header, traj.turns)
    assert synthesized.token_ids == ids and synthesized.loss_mask == mask
    # The synthesized observations differ from the real ones only in measured numbers.
    planned_first = turns[0].observations[-1].splitlines()[:3]
    assert [ln.split(":")[0] for ln in planned_first] == [ln.split(":")[0] for ln in real_obs[0][-1].splitlines()[:3]]


def test_draw_plan_mix_and_determinism(tasks) -> None:
    train = tasks[0]
    ra, rb = random.Random(1), random.Random(1)
    a = [draw_plan(t, "cuda", ra).label for t in train[:30]]
    b = [draw_plan(t, "cuda", rb).label for t in train[:30]]
    assert a == b and len(set(a)) > 5
    clean = [draw_plan(t, "cpu", random.Random(2), CLEAN) for t in train[:10]]
    assert all(p.bug is None and p.style == Style() and p.improve_to is None for p in clean)


@pytest.mark.slow
def test_from_scratch_policy_sft_then_ppo_step_compiles_and_verifies_on_cpu(tmp_path, monkeypatch) -> None:
    """CI: tokenizer + tiny model from the corpus, SFT on <= 50 expert episodes, one PPO step on the CPU backend:
    an episode's tool calls reach the real compile and verify, and the loss is finite."""
    from cuda_agent.config import load_config
    from cuda_agent.schemas.trajectory import load_trajectory
    from cuda_agent.training.config import TrainConfig
    from cuda_agent.training.kernel_family.corpus import ModelSize, build_family_data, build_model
    from cuda_agent.training.runner import run_training

    monkeypatch.chdir(ROOT)
    data = tmp_path / "data"
    summary = build_family_data(data, backend="cpu", n_train=1, n_heldout=1, per_task=50, vocab=1024, mix=EARLY,
                                heldout_experts=0)
    assert summary["expert_train.pt"]["episodes"] == 50
    build_model(data / "model", data / "tokenizer", ModelSize(hidden=128, layers=2, heads=2, intermediate=256))
    text = (ROOT / "configs/train/ci_kernel_sft_cpu.yaml").read_text().replace("REPLACE_DATA", str(data))
    cfg_path = tmp_path / "ci.yaml"
    cfg_path.write_text(text)
    cfg = load_config(TrainConfig, [cfg_path], [f"run_dir={tmp_path / 'run'}"])
    out = run_training(cfg)
    trajs = sorted((tmp_path / "run" / "1_ppo_agentic" / "episodes").glob("step_*/*/trajectory.jsonl"))
    assert len(trajs) == 2
    reached = []
    assert len({load_trajectory(p).header.task_id for p in trajs}) == 1  # samples_per_task 2: one task, twice
    for path in trajs:
        traj = load_trajectory(path)
        phases = {r.phase for turn in traj.turns for r in turn.results}
        reached.append({"compile", "verify"} <= phases)
    assert any(reached)
    lines = [json.loads(ln) for ln in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    ppo = [ln for ln in lines if ln["stage"] == "ppo_agentic"]
    assert ppo and all(math.isfinite(ppo[-1][k]) for k in ("policy_loss", "value_loss"))
    assert abs(ppo[-1]["is_weight_mean"] - 1.0) < 1e-3  # greedy rollouts report the trainer's own log-probs
    assert ppo[-1]["rollout_episodes"] == 2 and ppo[-1]["rollout_wall_s"] > 0
    assert Path(out["actor"]).joinpath("tokenizer.json").exists()


@pytest.mark.parametrize("backend", ["cpu", "cuda"])
def test_kernel_features_read_back_the_style_the_writer_used(tasks, backend) -> None:
    from cuda_agent.training.kernel_family.features import kernel_features
    from cuda_agent.training.kernel_family.writer import LAUNCHES

    chain = next(t.chain for t in tasks[0] if len(t.chain) >= 2)
    for fused in (True, False):
        for vector in (True, False):
            for launch in LAUNCHES:
                sol = write_solution(chain, backend, Style(fused=fused, vector=vector and fused, launch=launch))
                f = kernel_features({sol.kernel_path: sol.files[sol.kernel_path]})
                assert f["fused"] is fused and f["vector"] is (vector and fused)
                if backend == "cuda":
                    assert f["launch"] == launch
                else:
                    assert (f["launch"] == "narrow") is (launch == "narrow")
    assert kernel_features({}) == {"fused": None, "vector": None, "launch": None}


def test_a_later_phase_on_another_machine_rebuilds_the_data_with_the_carried_tokenizer_and_tasks(tmp_path) -> None:
    """issue 22: the device keeps nothing between runs, so ``--phase rl --state`` rebuilds the family data there; the
    carried core (tokenizer, task files) must give the carried actors the same token ids and held-out tasks."""
    import hashlib
    import tarfile

    from cuda_agent.training.kernel_family.corpus import build_family_data, read_data_core, write_data_core

    def digest(p: Path) -> str:
        return hashlib.sha256(p.read_bytes()).hexdigest()

    first = tmp_path / "first"
    build_family_data(first, backend="cpu", n_train=8, n_heldout=2, seed=0, vocab=600, workers=1)
    core = write_data_core(first, tmp_path / "out" / "data_core.tar.gz")
    assert core.stat().st_size < 16 * 2**20

    # What a machine whose CPU computed the corpus differently would have: a held-out file that differs from its draw.
    carried = read_data_core(core, tmp_path / "carried")
    held = (carried / "tasks_heldout.jsonl").read_text().replace("chain_heldout_00000", "chain_heldout_carried")
    (carried / "tasks_heldout.jsonl").write_text(held)
    # The GPU machine's torch (2.11+cu130) describes the same tasks: not a difference (session 18 read 'False' there).
    train_text = (carried / "tasks_train.jsonl").read_text()
    other_torch = "".join(json.dumps({**r, "meta": {**r["meta"], "probe_torch": "2.11.0+cu130"}}) + "\n"
                          for r in map(json.loads, train_text.splitlines()))
    assert other_torch != train_text
    (carried / "tasks_train.jsonl").write_text(other_torch)
    later = tmp_path / "later"
    summary = build_family_data(later, backend="cpu", n_train=8, n_heldout=2, seed=0, vocab=600, workers=1,
                                carried=carried)
    assert digest(later / "tokenizer" / "tokenizer.json") == digest(first / "tokenizer" / "tokenizer.json")
    assert (later / "tasks_heldout.jsonl").read_text() == held  # the carried tasks are kept, not the new draw
    assert summary["carried"]["tasks_equal"] == {"tasks_train.jsonl": True, "tasks_heldout.jsonl": False}
    assert torch.equal(torch.load(later / "expert_train.pt")[0]["token_ids"],
                       torch.load(first / "expert_train.pt")[0]["token_ids"])

    # An RL or throughput phase needs the tasks and the tokenizer, not the expert corpus.
    lean = tmp_path / "lean"
    build_family_data(lean, backend="cpu", n_train=8, n_heldout=2, seed=0, vocab=600, workers=1, carried=carried,
                      experts=False)
    assert not list(lean.glob("expert_*.pt")) and (lean / "tasks_heldout.jsonl").read_text() == held
    assert digest(lean / "tokenizer" / "tokenizer.json") == digest(first / "tokenizer" / "tokenizer.json")
    with pytest.raises(ValueError, match="carried tokenizer"):
        build_family_data(tmp_path / "nothing", backend="cpu", n_train=8, n_heldout=2, seed=0, vocab=600, workers=1,
                          experts=False)

    evil = tmp_path / "evil.tar.gz"
    (tmp_path / "x").write_text("x")
    with tarfile.open(evil, "w:gz") as tar:
        tar.add(tmp_path / "x", arcname="../x")
    with pytest.raises(ValueError, match="outside"):
        read_data_core(evil, tmp_path / "evil_out")


def test_sft_stops_at_its_time_limit_with_the_held_out_loss_measured(tmp_path, monkeypatch) -> None:
    """issue 22: a device run has a fixed budget, so SFT stops training at ``max_train_s`` (leaving time for the
    held-out evaluation) and measures the held-out loss once more at the stop, keeping the best weights."""
    import yaml

    from cuda_agent.config import load_config
    from cuda_agent.training.config import TrainConfig
    from cuda_agent.training.kernel_family.corpus import ModelSize, build_family_data, build_model
    from cuda_agent.training.runner import run_training

    monkeypatch.chdir(ROOT)
    data = tmp_path / "data"
    build_family_data(data, backend="cpu", n_train=4, n_heldout=2, per_task=3, vocab=600, workers=1)
    build_model(data / "model", data / "tokenizer", ModelSize(hidden=32, layers=1, heads=2, intermediate=64))
    cfg = {"run_dir": str(tmp_path / "run"), "seed": 0, "torch_threads": 1, "backend": "cpu", "model": str(data / "model"),
           "engine": {"zero_stage": 0, "dtype": "fp32"},
           "stages": [{"name": "sft", "config": {
               "episodes": [str(data / "expert_train.pt")], "heldout": [str(data / "expert_heldout.pt")],
               "epochs": 10000, "batch_size": 2, "eval_every": 100000, "patience": 100, "max_train_s": 3,
               "checkpoint_every": 100000}}]}
    path = tmp_path / "sft.yaml"
    path.write_text(yaml.safe_dump(cfg))
    out = run_training(load_config(TrainConfig, [path], []))
    outputs = json.loads((tmp_path / "run" / "0_sft" / "outputs.json").read_text())
    assert outputs["stopped_by"] == "time"
    assert 0 < outputs["steps"] < outputs["planned_steps"]
    assert 3 <= outputs["train_s"] < 60
    # eval_every is never reached, so the only held-out loss is the one measured at the stop
    assert outputs["best_step"] == outputs["steps"] and math.isfinite(outputs["best_heldout_loss"])
    assert Path(out["actor"]).joinpath("config.json").exists()


def test_sft_without_training_evaluates_the_given_actor_on_the_tasks_left(tmp_path, monkeypatch) -> None:
    """issue 22: an SFT evaluation cut by the device budget is finished in another run: ``train: false`` evaluates
    the carried actor unchanged, on the held-out tasks the carried records lack, and ``merge_resumed`` joins the
    two runs' records (partial until every task has one)."""
    import sys

    import yaml

    from cuda_agent.config import load_config
    from cuda_agent.training.config import TrainConfig
    from cuda_agent.training.kernel_family.corpus import ModelSize, build_family_data, build_model, family_run_settings
    from cuda_agent.training.runner import run_training

    sys.path.insert(0, str(ROOT / "benchmarks"))
    from _learning_curve_report import collect_records, merge_resumed

    monkeypatch.chdir(ROOT)
    data = tmp_path / "data"
    build_family_data(data, backend="cpu", n_train=4, n_heldout=3, per_task=1, vocab=600, workers=1)
    build_model(data / "model", data / "tokenizer", ModelSize(hidden=32, layers=1, heads=2, intermediate=64))
    held = [json.loads(x) for x in (data / "tasks_heldout.jsonl").read_text().splitlines()]
    left = tmp_path / "left.jsonl"
    left.write_text("".join(json.dumps(t) + "\n" for t in held[1:]))  # the first task was reached before the cut
    cfg = {"run_dir": str(tmp_path / "sft_eval_seed0"), "seed": 0, "torch_threads": 1, "model": str(data / "model"),
           "reward": "milestone", "engine": {"zero_stage": 0, "dtype": "fp32"},
           **family_run_settings(data, "cpu", 1),
           "plugins": {"cpu": {"harness": {"timing": {"preset": "quick", "compile_baseline": False}}}},
           "stages": [{"name": "sft", "config": {
               "episodes": [str(data / "expert_train.pt")], "train": False, "eval_tasks": [str(left)],
               "max_new_tokens": 40, "rollout": {"concurrency": 2, "build_workers": 1, "max_batch": 2}}}]}
    path = tmp_path / "eval.yaml"
    path.write_text(yaml.safe_dump(cfg))
    run_training(load_config(TrainConfig, [path], []))
    outputs = json.loads((tmp_path / "sft_eval_seed0" / "0_sft" / "outputs.json").read_text())
    assert outputs["stopped_by"] == "no_training" and outputs["steps"] == 0
    assert outputs["actor"] == str(data / "model")  # evaluated as it was: nothing exported, nothing trained
    resumed = collect_records(tmp_path, [0], "sft_eval")
    assert sorted(r["task_id"] for r in resumed["points"]["sft"]["0"]) == sorted(t["id"] for t in held[1:])
    first = {**resumed["points"]["sft"]["0"][0], "task_id": held[0]["id"], "reward": 2.0}
    carried = {"phase": "sft", "points": {"sft": {"0": [first]}}, "partial": {"sft": {"0": 1}}}
    merged = merge_resumed(carried, resumed, "sft", len(held))
    assert sorted(r["task_id"] for r in merged["points"]["sft"]["0"]) == sorted(t["id"] for t in held)
    assert "partial" not in merged and merged["resumed"] == [{"point": "sft", "episodes": {"0": 2}}]
    short = merge_resumed(carried, {"points": {"sft": {"0": resumed["points"]["sft"]["0"][:1]}}}, "sft", len(held))
    assert short["partial"] == {"sft": {"0": 2}}


def test_seeds_side_by_side_share_the_gpu_memory_budget(tmp_path) -> None:
    """issue 22 (session 19): three seeds side by side each took 85% of the free GPU memory as their own budget,
    and their 192 reference processes ran out of memory at start. Each seed's cuda harness now gets its share of
    the preset's ``device_gib``, in a block the real cuda backend's config model accepts."""
    import sys

    from cuda_agent.plugin_manager import PluginManager

    sys.path.insert(0, str(ROOT / "benchmarks"))
    import learning_curve as lc

    p = dict(lc.PRESETS["h200"])
    p["seed_memory_gib"] = round(p["device_gib"] / p["seeds"], 1)
    entry = PluginManager().registry.get("backend", "cuda", where="backend")
    shares = []
    for seed in range(p["seeds"]):
        cfg = lc.train_config(p, tmp_path / "data", "model", tmp_path / f"run{seed}", [], seed)
        block = entry.config_model.model_validate(cfg["plugins"]["cuda"])
        shares.append(block.harness.limits.device_memory_gib)
        assert block.harness.timing.warm_compile is False  # compiles only where a baseline is timed (session 23)
    assert len(set(shares)) == 1 and 0 < sum(shares) <= p["device_gib"]
    # with the per-seed concurrency, the reference processes alone fit the share (768 MiB each)
    assert p["concurrency"] * 0.75 < shares[0]


def test_a_seed_alone_keeps_more_runners_started_ahead_than_seeds_side_by_side(tmp_path) -> None:
    """issue 22 (session 24): one seed alone waited 18 s per session for a runner to start while cores were idle.
    The call's ``runners_ahead`` is shared by the seeds it runs, and reaches the real cuda backend's harness."""
    import sys

    from cuda_agent.plugin_manager import PluginManager

    sys.path.insert(0, str(ROOT / "benchmarks"))
    import learning_curve as lc

    entry = PluginManager().registry.get("backend", "cuda", where="backend")
    ahead = {}
    for n in (1, 3):
        p = dict(lc.PRESETS["h200"])
        p["seed_runners_ahead"] = lc.seed_runners_ahead(p, n)
        cfg = lc.train_config(p, tmp_path / "data", "model", tmp_path / f"run{n}", [], 0)
        ahead[n] = entry.config_model.model_validate(cfg["plugins"]["cuda"]).harness.runners_ahead()
    assert ahead[3] * 3 <= lc.PRESETS["h200"]["runners_ahead"] < ahead[1] * 3
    assert ahead[1] <= lc.PRESETS["h200"]["concurrency"]  # never more started than episodes in flight
    p = dict(lc.PRESETS["cpu_tiny"])
    p["seed_runners_ahead"] = lc.seed_runners_ahead(p, 1)
    cfg = lc.train_config(p, tmp_path / "data", "model", tmp_path / "cpu", [], 0)
    assert "sandbox" not in cfg["plugins"]["cpu"]["harness"]  # the harness's own default where the preset sets none


def test_evaluation_phases_skip_the_corpus_and_a_later_sft_or_control_builds_it_on_the_same_tokenizer(tmp_path) -> None:
    """issue 22 (session 25): ``sft_eval`` only runs episodes but built the expert corpus (24 s of a device call);
    and a warm machine's data folder built without the corpus made a later ``control`` call fail (no expert
    episodes). The corpus is built for the phases that train on it, from the folder's own tokenizer and tasks."""
    import hashlib
    import sys

    from cuda_agent.training.kernel_family.corpus import build_family_data, write_data_core

    sys.path.insert(0, str(ROOT / "benchmarks"))
    import learning_curve as lc

    def digest(p: Path) -> str:
        return hashlib.sha256(p.read_bytes()).hexdigest()

    first = tmp_path / "sft_machine"
    build_family_data(first, backend="cpu", n_train=8, n_heldout=2, seed=0, vocab=600, workers=1)
    core = write_data_core(first, tmp_path / "state" / "data_core.tar.gz")
    p = dict(lc.PRESETS["cpu_tiny"], train_tasks=8, heldout=2, per_task=1, vocab=600, lengths=None)

    data = tmp_path / "gpu_machine" / "data"
    summary = lc.ensure_family_data(data, p, ["sft_eval", "rl_step"], core, tmp_path / "gpu_machine" / "carried")
    assert "expert_train.pt" not in summary and not list(data.glob("expert_*.pt"))
    assert digest(data / "tokenizer" / "tokenizer.json") == digest(first / "tokenizer" / "tokenizer.json")
    held = (data / "tasks_heldout.jsonl").read_text()

    # The next call on the same warm machine, with no state carried: the folder is kept, the corpus added to it.
    summary = lc.ensure_family_data(data, p, ["control"], None, tmp_path / "gpu_machine" / "carried2")
    assert summary["expert_train.pt"]["episodes"] > 0 and (data / "expert_train.pt").exists()
    assert digest(data / "tokenizer" / "tokenizer.json") == digest(first / "tokenizer" / "tokenizer.json")
    assert (data / "tasks_heldout.jsonl").read_text() == held
    assert torch.equal(torch.load(data / "expert_train.pt")[0]["token_ids"],
                       torch.load(first / "expert_train.pt")[0]["token_ids"])
    # Built once: a later call finds it whatever its phases.
    mtime = (data / "summary.json").stat().st_mtime_ns
    lc.ensure_family_data(data, p, ["sft", "rl_eval"], core, tmp_path / "gpu_machine" / "carried3")
    assert (data / "summary.json").stat().st_mtime_ns == mtime
