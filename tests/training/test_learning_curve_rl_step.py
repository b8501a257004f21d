"""RL spread over device runs (``learning_curve.py --phase rl_step``): value pretraining's critic is carried as soon
as it ends, the records of each run's one PPO step join the carried ones as the next point, and the carried critic
survives its bf16 round trip."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

from _learning_curve_report import (  # noqa: E402
    collect_records, collect_rl_step, collect_vp, critic_pretrained, merge_rl_eval, merge_rl_step, merge_vp,
    pending_rl_evals, restart_rl, rl_stage_folder)


def _run(work: Path, seed: int, step: int, rewards: dict[str, float]) -> None:
    """What a finished ``rl_step`` run leaves: the stage's held-out records after its one step, its metrics."""
    held = work / f"rl_seed{seed}" / rl_stage_folder(step) / "heldout"
    held.mkdir(parents=True)
    (held / "step_00001.jsonl").write_text("".join(json.dumps({"task_id": t, "reward": r}) + "\n"
                                                   for t, r in rewards.items()))
    metrics = [{"stage": "ppo_agentic", "step": 1, "reward_mean": sum(rewards.values()) / len(rewards)}]
    (work / f"rl_seed{seed}" / "metrics.jsonl").write_text("".join(json.dumps(m) + "\n" for m in metrics))


def _vp(work: Path, seed: int) -> None:
    """What a value pretraining that ended leaves in its own run folder: its metrics."""
    (work / f"rl_vp_seed{seed}").mkdir(parents=True)
    rows = [{"stage": "value_pretrain", "step": 4, "explained_variance": 0.6, "value_loss": 0.2}]
    (work / f"rl_vp_seed{seed}" / "metrics.jsonl").write_text("".join(json.dumps(m) + "\n" for m in rows))


def test_a_run_cut_after_value_pretraining_keeps_the_pretrained_critic_and_takes_no_step(tmp_path: Path) -> None:
    """Run 1: seed 0's and seed 1's pretraining ran, only seed 0's ended (seed 1's was killed at the deadline): only
    seed 0 is marked pretrained, with its metrics; no step is counted and no evaluation is pending. Run 2 steps seed
    0 from that critic: its metrics follow the pretraining's."""
    first = tmp_path / "call1"
    _vp(first, 0)
    (first / "rl_vp_seed1").mkdir(parents=True)  # killed: no metrics, no outputs
    records = merge_vp({}, collect_vp(first, [0]))
    assert critic_pretrained(records) == {0}
    assert records["steps_done"] == {"0": 0} and pending_rl_evals(records, [0, 1], 2) == {}
    assert [m["stage"] for m in records["train_metrics"]["0"]] == ["value_pretrain"]
    assert critic_pretrained(merge_vp(records, collect_vp(tmp_path / "nothing", []))) == {0}  # a later run keeps it

    second = tmp_path / "call2"
    _run(second, 0, 1, {"a": 1.0, "b": -1.0})
    records = merge_rl_step(records, collect_rl_step(second, {0: 1}), {0: 1})
    assert records["steps_done"] == {"0": 1} and critic_pretrained(records) == {0}
    assert [m["stage"] for m in records["train_metrics"]["0"]] == ["value_pretrain", "ppo_agentic"]


def test_two_runs_make_points_rl_1_and_rl_2_and_count_the_steps_per_seed(tmp_path: Path) -> None:
    first = tmp_path / "call1"
    _vp(first, 1)
    _run(first, 0, 1, {"a": 1.0, "b": -1.0})
    _run(first, 1, 1, {"a": 2.0, "b": 1.0})
    records = merge_rl_step(merge_vp({}, collect_vp(first, [1])), collect_rl_step(first, {0: 1, 1: 1}), {0: 1, 1: 1})
    assert records["steps_done"] == {"0": 1, "1": 1}
    assert sorted(records["points"]) == ["rl_1"] and sorted(records["points"]["rl_1"]) == ["0", "1"]

    second = tmp_path / "call2"  # only seed 1 took its second step in this run (seed 0's was cut)
    _run(second, 1, 2, {"a": 3.0, "b": 2.0})
    recipe = {"actor_lr": 1e-4, "ppo_epochs": 4, "minibatches": 8}  # the recipe changed between the two runs
    records = merge_rl_step(json.loads(json.dumps(records)), collect_rl_step(second, {1: 2}), {0: 1, 1: 2}, recipe)
    assert records["steps_done"] == {"0": 1, "1": 2}
    ppo_rows = [m for m in records["train_metrics"]["1"] if m["stage"] == "ppo_agentic"]
    assert "recipe" not in ppo_rows[0] and ppo_rows[1]["recipe"] == recipe  # each step says what it ran with
    assert [(m["step"], m["run_step"]) for m in ppo_rows] == [(1, 1), (2, 1)]  # the seed's step, the run's count
    assert all("recipe" not in m for m in records["train_metrics"]["1"] if m["stage"] == "value_pretrain")
    assert [r["reward"] for r in records["points"]["rl_2"]["1"]] == [3.0, 2.0]
    assert [r["reward"] for r in records["points"]["rl_1"]["1"]] == [2.0, 1.0]  # the carried point stays
    assert "0" not in records["points"]["rl_2"]
    assert [m["stage"] for m in records["train_metrics"]["1"]] == ["value_pretrain", "ppo_agentic", "ppo_agentic"]


def test_a_step_cut_before_any_evaluation_episode_ended_gives_no_point_and_says_partial(tmp_path: Path) -> None:
    cut = tmp_path / "rl_seed0" / rl_stage_folder(2) / "heldout" / "step_00001"
    (cut / "task_a").mkdir(parents=True)  # an episode folder without a trajectory: nothing ended
    new = collect_rl_step(tmp_path, {0: 2})
    assert new["points"] == {} and new["partial"] == {"rl_2": {"0": 0}}
    merged = merge_rl_step({"steps_done": {"0": 1}}, new, {0: 1})  # the step is not counted: the next run redoes it
    assert merged["steps_done"] == {"0": 1}


def _ended_episode(folder: Path, task_id: str, reward: float) -> None:
    """An episode folder whose trajectory ended (what a cut evaluation keeps)."""
    from cuda_agent.schemas.trajectory import EndRecord, HeaderRecord, append_record

    folder.mkdir(parents=True)
    with (folder / "trajectory.jsonl").open("w") as fh:
        append_record(fh, HeaderRecord(run_id="r", task_id=task_id, task_code_hash="h", policy="hf", backend="cpu",
                                       system_prompt="s", task_prompt="p", started_at="2026-12-03T00:00:00Z"))
        append_record(fh, EndRecord(exit="max_turns", turns=0, reward=reward, wall_s=1.0))


def test_a_cut_step_evaluation_waits_for_rl_eval_which_joins_its_missing_tasks(tmp_path: Path) -> None:
    """Seed 0's step-2 evaluation kept 1 of 3 tasks, seed 1's step 1 is whole: only seed 0 is pending; the
    resumed evaluation's records join point rl_2 for seed 0 and the point is then whole (no partial left)."""
    carried = {"steps_done": {"0": 2, "1": 1},
               "points": {"rl_1": {"0": [{"task_id": t, "reward": 1.0} for t in "abc"],
                                   "1": [{"task_id": t, "reward": 1.0} for t in "abc"]},
                          "rl_2": {"0": [{"task_id": "a", "reward": 2.0}]}},
               "partial": {"rl_2": {"0": 1}}}
    assert pending_rl_evals(carried, [0, 1], 3) == {0: 2}
    assert pending_rl_evals(carried, [0, 1], 2) == {0: 2}  # still short of 2
    assert pending_rl_evals({"steps_done": {"0": 0}}, [0], 3) == {}  # no step taken: nothing to evaluate

    final = tmp_path / "rl_eval_seed0" / "0_sft" / "heldout" / "final"
    _ended_episode(final / "000_00", "b", 3.0)
    _ended_episode(final / "001_00", "c", -1.0)
    resumed = collect_records(tmp_path, [0], "rl_eval")
    merged = merge_rl_eval(json.loads(json.dumps(carried)), resumed, {0: 2}, 3)
    assert sorted((r["task_id"], r["reward"]) for r in merged["points"]["rl_2"]["0"]) == [
        ("a", 2.0), ("b", 3.0), ("c", -1.0)]
    assert "partial" not in merged and pending_rl_evals(merged, [0, 1], 3) == {}
    assert merged["points"]["rl_1"] == carried["points"]["rl_1"] and merged["steps_done"] == carried["steps_done"]


def test_the_carried_critic_round_trips_through_bf16_and_refuses_another_tokenizer(tmp_path: Path) -> None:
    import learning_curve

    state = {"backbone.w": torch.randn(8, 4), "value_head.weight": torch.randn(1, 4)}
    torch.save(state, tmp_path / "critic.pt")
    carried = tmp_path / "rl_critic_seed0.safetensors"
    learning_curve.save_critic_state(tmp_path / "critic.pt", carried, "tok1")
    back = torch.load(learning_curve.load_critic_state(carried, tmp_path / "back" / "critic.pt", "tok1"),
                      weights_only=True)
    assert set(back) == set(state) and all(back[k].dtype == torch.float32 for k in back)
    assert all(torch.equal(back[k], state[k].to(torch.bfloat16).float()) for k in state)
    with pytest.raises(SystemExit, match="another tokenizer"):
        learning_curve.load_critic_state(carried, tmp_path / "x.pt", "tok2")


def test_set_takes_json_or_bare_strings_and_refuses_unknown_keys() -> None:
    import learning_curve

    p = learning_curve.apply_sets({}, ["dtype=fp32", "budget_s=440", "lengths=[0.4, 0.6]", "backend=cpu",
                                       "sft_evaluate=false"])
    assert p == {"dtype": "fp32", "budget_s": 440, "lengths": [0.4, 0.6], "backend": "cpu", "sft_evaluate": False}
    with pytest.raises(SystemExit, match="budget_sx=1.*one of .*budget_s"):
        learning_curve.apply_sets({}, ["budget_sx=1"])
    with pytest.raises(SystemExit, match="expected KEY=VALUE"):
        learning_curve.apply_sets({}, ["budget_s"])


def test_a_cut_control_evaluation_is_finished_by_control_eval_into_the_control_point(tmp_path: Path) -> None:
    """The control run kept 1 of 3 tasks for seed 0 (cut) and all of seed 1's; ``control_eval`` evaluates seed 0's
    two missing tasks and its records join point ``control``, which is then whole."""
    from _learning_curve_report import merge_resumed

    carried = {"phase": "control", "points": {"control": {"0": [{"task_id": "a", "reward": 1.0}],
                                                          "1": [{"task_id": t, "reward": -1.0} for t in "abc"]}},
               "partial": {"control": {"0": 1}}}
    final = tmp_path / "control_eval_seed0" / "0_sft" / "heldout" / "final"
    _ended_episode(final / "000_00", "b", 2.0)
    _ended_episode(final / "001_00", "c", -1.0)
    resumed = collect_records(tmp_path, [0], "control_eval")
    assert sorted(resumed["points"]) == ["control"]
    merged = merge_resumed(carried, resumed, "control", 3)
    assert sorted((r["task_id"], r["reward"]) for r in merged["points"]["control"]["0"]) == [
        ("a", 1.0), ("b", 2.0), ("c", -1.0)]
    assert "partial" not in merged and merged["points"]["control"]["1"] == carried["points"]["control"]["1"]


def test_a_restart_retires_the_steps_keeps_the_critics_and_the_next_run_takes_step_1_again(tmp_path: Path) -> None:
    """RL started again with other settings: the old step's point and PPO metrics are kept under retired_runs with
    the reason, the seeds count no step, their critics stay pretrained, and the next run's step is point rl_1."""
    _vp(tmp_path / "vp", 0)
    _vp(tmp_path / "vp", 1)
    records = merge_vp({}, collect_vp(tmp_path / "vp", [0, 1]))
    _run(tmp_path / "c1", 0, 1, {"a": -1.0, "b": -1.0})
    _run(tmp_path / "c1", 1, 1, {"a": 1.0, "b": -1.0})
    records = merge_rl_step(records, collect_rl_step(tmp_path / "c1", {0: 1, 1: 1}), {0: 1, 1: 1})
    fresh = restart_rl(records, "lr 1e-4 collapsed tokens", {"actor_lr": 2e-5})
    assert fresh["steps_done"] == {"0": 0, "1": 0} and critic_pretrained(fresh) == {0, 1}
    assert "rl_1" not in fresh["points"] and pending_rl_evals(fresh, [0, 1], 2) == {}
    assert [m["stage"] for m in fresh["train_metrics"]["0"]] == ["value_pretrain"]
    (old,) = fresh["retired_runs"]
    assert old["reason"] == "lr 1e-4 collapsed tokens" and old["restart_settings"] == {"actor_lr": 2e-5}
    assert old["steps_done"] == {"0": 1, "1": 1} and sorted(old["points"]["rl_1"]) == ["0", "1"]
    assert [m["stage"] for m in old["train_metrics"]["1"]] == ["ppo_agentic"]
    assert records["steps_done"] == {"0": 1, "1": 1}  # the carried records are not changed in place

    _run(tmp_path / "c2", 0, 1, {"a": 1.0, "b": 1.0})
    again = merge_rl_step(fresh, collect_rl_step(tmp_path / "c2", {0: 1}), {0: 1})
    assert again["steps_done"] == {"0": 1, "1": 0}
    assert [r["reward"] for r in again["points"]["rl_1"]["0"]] == [1.0, 1.0]
    assert again["retired_runs"][0]["points"]["rl_1"]["0"][0]["reward"] == -1.0


def test_restart_rl_on_a_state_folder_deletes_the_rl_actors_and_keeps_the_critics(tmp_path: Path) -> None:
    import subprocess

    import learning_curve

    state = tmp_path / "state"
    state.mkdir()
    records = {"phase": "rl", "critic_pretrained": {"0": True}, "steps_done": {"0": 1},
               "points": {"rl_1": {"0": [{"task_id": "a", "reward": -1.0}]}}, "train_metrics": {}}
    (state / "records_rl.json").write_text(json.dumps(records))
    (state / "rl_actor_seed0.safetensors").write_bytes(b"actor")
    (state / "rl_critic_seed0.safetensors").write_bytes(b"critic")
    (state / "state_seed0.safetensors").write_bytes(b"sft")
    cmd = [sys.executable, str(ROOT / "benchmarks" / "learning_curve.py"), "--state", str(state), "--out",
           str(tmp_path / "out"), "--set", "actor_lr=3e-5", "--restart-rl", "lr too high"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert sorted(p.name for p in state.iterdir()) == ["records_rl.json", "rl_critic_seed0.safetensors",
                                                      "state_seed0.safetensors"]
    after = json.loads((state / "records_rl.json").read_text())
    settings = after["retired_runs"][0]["restart_settings"]  # what the new steps run with: the preset and --set
    assert after["steps_done"] == {"0": 0} and settings["actor_lr"] == 3e-5
    assert settings["negative_scale"] == learning_curve.PRESETS["h200"]["negative_scale"]
    proc = subprocess.run(cmd[:-1] + [" "], capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0 and "needs a reason" in proc.stderr


def test_the_report_shows_retired_steps_beside_the_curve_never_in_it(tmp_path: Path) -> None:
    from _learning_curve_report import build_report

    def rec(task: str, reward: float) -> dict:
        return {"task_id": task, "reward": reward, "passed": reward > 0, "speedup_eager": None, "speedup_compile": None,
                "hack": False, "turns": 3, "first_pass_turn": 1 if reward > 0 else None}

    sft = {"phase": "sft", "points": {"sft": {"0": [rec(t, 1.0) for t in "ab"]}}}
    rl = {"phase": "rl", "critic_pretrained": {"0": True}, "steps_done": {"0": 1},
          "points": {"rl_1": {"0": [rec(t, -1.0) for t in "ab"]}}, "train_metrics": {}}
    (tmp_path / "records_sft.json").write_text(json.dumps(sft))
    (tmp_path / "records_rl.json").write_text(json.dumps(restart_rl(rl, "too fast", {"actor_lr": 2e-5})))
    preset = {"rl_steps": 2}
    report = build_report(tmp_path / "work", [0], preset, {}, {}, [tmp_path])
    assert report["order"] == ["sft"] and report["comparisons"] == {}
    (old,) = report["retired_runs"]
    assert old["reason"] == "too fast" and old["points"]["rl_1"]["reward_mean"] == -1.0
    assert old["vs_sft"]["rl_1"]["reward"]["diff"] == pytest.approx(-2.0)


def test_a_run_of_three_steps_gives_one_point_from_its_last_step_evaluation(tmp_path: Path) -> None:
    """``steps_per_run`` 3: the stage evaluates after its third step only (``heldout_every`` 3, tag step_00003);
    the run's point is ``rl_<k+3>`` and no point is made for the steps between."""
    held = tmp_path / "rl_seed0" / rl_stage_folder(5) / "heldout"
    held.mkdir(parents=True)
    (held / "step_00003.jsonl").write_text(json.dumps({"task_id": "a", "reward": 3.0}) + "\n")
    (tmp_path / "rl_seed0" / "metrics.jsonl").write_text("".join(
        json.dumps({"stage": "ppo_agentic", "step": i}) + "\n" for i in (1, 2, 3)))
    carried = {"phase": "rl", "steps_done": {"0": 2}, "points": {"rl_2": {"0": [{"task_id": "a", "reward": 1.0}]}}}
    records = merge_rl_step(carried, collect_rl_step(tmp_path, {0: 5}, {0: 3}), {0: 5})
    assert records["steps_done"] == {"0": 5}
    assert sorted(records["points"]) == ["rl_2", "rl_5"] and records["points"]["rl_5"]["0"][0]["reward"] == 3.0
    assert [m["step"] for m in records["train_metrics"]["0"]] == [1, 2, 3]
    assert collect_rl_step(tmp_path, {0: 5})["points"] == {}  # read as a one-step run, it finds no evaluation


def test_run_step_count_plans_the_steps_that_fit_before_the_run_starts() -> None:
    import learning_curve

    p = {**learning_curve.PRESETS["h200"], "steps_per_run": 3, "rl_steps": 16, "ppo_min_s": 330, "ppo_step_s": 160}
    assert learning_curve.run_step_count(p, 0, 700.0) == 3  # 330 + 2 x 160 = 650 fit
    assert learning_curve.run_step_count(p, 0, 600.0) == 2  # one further step fits, not two
    assert learning_curve.run_step_count(p, 0, 300.0) == 1  # the first step is never planned away (ppo_min_s gates it)
    assert learning_curve.run_step_count(p, 15, 900.0) == 1  # only one step left of rl_steps
    assert learning_curve.run_step_count({**p, "steps_per_run": 1}, 0, 900.0) == 1


def test_the_control_trains_on_as_many_episodes_as_the_rl_steps_taken(tmp_path: Path) -> None:
    import learning_curve

    p = {**learning_curve.PRESETS["h200"], "rl_steps": 16, "episodes_per_step": 32}
    assert learning_curve.control_samples(p, None) == 16 * 32  # nothing carried: the planned steps
    (tmp_path / "records_rl.json").write_text(json.dumps({"steps_done": {"0": 5, "1": 4, "2": 5}}))
    assert learning_curve.control_samples(p, tmp_path) == 5 * 32  # no rows carried: the preset's size per step
    # the recipe changed after step 1: 16 groups of 4, then 96 episodes a step (counted, or from the recipe)
    rows = [{"stage": "value_pretrain", "step": 1},
            {"stage": "ppo_agentic", "step": 1, "groups": 16.0},
            {"stage": "ppo_agentic", "step": 2, "rollout_episodes": 96.0, "recipe": {"episodes_per_step": 96}},
            {"stage": "ppo_agentic", "step": 3, "recipe": {"episodes_per_step": 96}}]
    (tmp_path / "records_rl.json").write_text(json.dumps({"steps_done": {"0": 3, "1": 2},
                                                          "train_metrics": {"0": rows, "1": rows[:3]}}))
    assert learning_curve.control_samples({**p, "samples_per_task": 4}, tmp_path) == 64 + 96 + 96


def test_seeds_are_taken_as_a_comma_list_or_separate_words(tmp_path: Path) -> None:
    """``--seeds 0 1`` and ``--seeds 0,1`` name the same seeds (session 30 lost a device call to the first spelling);
    a seed the preset does not have, or a word that is not a seed, is refused with the valid choices."""
    import subprocess
    import sys

    script = Path(__file__).resolve().parents[2] / "benchmarks" / "learning_curve.py"
    for spelling in (["0", "1"], ["0,1"]):
        res = subprocess.run([sys.executable, str(script), "--preset", "cpu_tiny", "--out", str(tmp_path / "o"),
                              "--seeds", *spelling], capture_output=True, text=True, timeout=120)
        assert res.returncode != 0 and "choose among [0]" in res.stderr  # cpu_tiny has one seed: 1 is refused
    res = subprocess.run([sys.executable, str(script), "--preset", "cpu_tiny", "--out", str(tmp_path / "o"),
                          "--seeds", "first"], capture_output=True, text=True, timeout=120)
    assert res.returncode != 0 and "seeds are integers" in res.stderr


def test_a_steps_adam_moments_are_carried_only_beside_the_actor_and_step_they_belong_to(tmp_path: Path) -> None:
    """issue 22: the next step's run loads the carried moments (``rl_actor_moments_seed<k>``) only with the very actor
    file and step they were saved with; otherwise it says why and starts AdamW afresh."""
    import learning_curve
    from safetensors.torch import save_file

    from cuda_agent.training.engines.moments import AdamMoments, pack, read_moments_file

    state = tmp_path / "state"
    state.mkdir()
    actor = state / "rl_actor_seed1.safetensors"
    save_file({"w": torch.ones(4, dtype=torch.bfloat16)}, str(actor), metadata={"tokenizer": "t"})
    tensors, meta = pack(AdamMoments({"w": torch.full((4,), 0.5)}, {"w": torch.ones(4)}, {"w": 12}),
                         {"actor_steps": "12"})
    stage_out = tmp_path / "actor_moments.safetensors"
    save_file(tensors, str(stage_out), metadata=meta)

    assert learning_curve.carried_moments(state, 1, 2) == (None, "no rl_actor_moments file was carried")
    learning_curve.save_moments_state(stage_out, state / "rl_actor_moments_seed1.safetensors", actor, 2, "t")
    src, why = learning_curve.carried_moments(state, 1, 2)
    assert src == state / "rl_actor_moments_seed1.safetensors" and why == ""
    moments, kept = read_moments_file(src)  # the stage's own metadata survives the tagging
    assert kept["actor_steps"] == "12" and moments.steps == {"w": 12}
    assert torch.allclose(moments.exp_avg["w"], torch.full((4,), 0.5), rtol=0.02)

    src, why = learning_curve.carried_moments(state, 1, 3)  # the actor moved on a step, the moments did not
    assert src is None and "step 2's, the actor is step 3's" in why
    save_file({"w": torch.zeros(4, dtype=torch.bfloat16)}, str(actor), metadata={"tokenizer": "t"})  # another actor
    src, why = learning_curve.carried_moments(state, 1, 2)
    assert src is None and "belong to another rl_actor_seed1.safetensors" in why


def test_rl_eval_every_skips_the_held_out_evaluation_of_steps_not_due_and_never_waits_for_them(tmp_path: Path) -> None:
    """``rl_eval_every`` 3: steps 3, 6, ... and the last get a point; a step between is taken without one (its
    stage has no held-out tasks), and the next step call does not wait for an evaluation it will never get."""
    import learning_curve
    from _learning_curve_report import rl_eval_due

    assert [k for k in range(1, 11) if rl_eval_due(k, 10, 3)] == [3, 6, 9, 10]
    assert all(rl_eval_due(k, 10) for k in range(1, 11))  # the default: every step
    p = {**learning_curve.PRESETS["h200"], "rl_steps": 16, "rl_eval_every": 3}
    data = tmp_path / "data"
    assert learning_curve.step_stage(p, data, 3, 1, None)["config"]["eval_tasks"] == []  # step 4: none
    evaluated = learning_curve.step_stage(p, data, 5, 1, None)["config"]  # step 6: the held-out tasks
    assert evaluated["eval_tasks"] == [str(data / "tasks_heldout.jsonl")] and evaluated["heldout_every"] == 1
    assert learning_curve.step_stage({**p, "rl_eval_every": 1}, data, 3, 1, None)["config"]["eval_tasks"]
    assert learning_curve.step_stage(p, data, 3, 2, None)["config"]["eval_tasks"] == []  # steps 4-5, 5 not due
    assert learning_curve.step_stage(p, data, 14, 2, None)["config"]["eval_tasks"]  # step 16, the last: due

    # Seed 0 took step 4 (not due: no point), seed 1's step 3 evaluation is cut (due): only seed 1 waits.
    carried = {"steps_done": {"0": 4, "1": 3},
               "points": {"rl_3": {"0": [{"task_id": t, "reward": 1.0} for t in "abc"],
                                   "1": [{"task_id": "a", "reward": 1.0}]}}}
    assert pending_rl_evals(carried, [0, 1], 3, 16, 3) == {1: 3}
    assert pending_rl_evals(carried, [0, 1], 3) == {0: 4, 1: 3}  # every step due: seed 0's step 4 would wait
    # A step run that evaluated nothing leaves no point and counts the step.
    (tmp_path / "rl_seed0").mkdir()
    (tmp_path / "rl_seed0" / "metrics.jsonl").write_text(json.dumps({"stage": "ppo_agentic", "step": 1}) + "\n")
    new = collect_rl_step(tmp_path, {0: 5})
    assert new["points"] == {} and "partial" not in new
    assert merge_rl_step(carried, new, {0: 5, 1: 3})["steps_done"] == {"0": 5, "1": 3}
