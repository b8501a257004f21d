"""One command for the learning-curve demonstration: from-scratch policy -> SFT -> value pretraining -> agentic PPO.

    python benchmarks/learning_curve.py --preset h200 --out $OUT            # one H200, CUDA backend
    python benchmarks/learning_curve.py --preset cpu_tiny --out runs/lc     # CPU backend, tiny scale

Everything is rebuilt from this repository (no hub): the kernel family's tasks (data pipeline's composer,
held-out tasks decontaminated), the expert episodes, a BPE tokenizer trained on them, and one random-init
decoder per seed. Per seed (an independent run; seeds run side by side as processes, sharing the device
through its timing lock), ``cuda-agent train`` runs

1. ``sft`` on the expert episodes until held-out loss stops improving, then evaluates the held-out tasks;
2. the control arm: ``sft`` continued from that actor on as many expert episodes as RL samples, evaluated;
3. ``value_pretrain`` then ``ppo_agentic`` on training tasks (concurrent rollouts), evaluating the held-out
   tasks after every step.

Every held-out number comes from the trusted grading of each episode's final state. The result,
``learning_curve.json`` (fields listed in ``docs/training.md``) and ``learning_curve.png``, gives per point
(``sft``, ``rl_1``..``rl_R``, ``control``) the pass rate, mean milestone reward, faster-than-eager rate and
integrity-flag rate, paired bootstrap intervals over (task, seed), the learned-habit shares and two
trajectories side by side.

Phases (``--phase all`` = sft, control, rl in one run; or a comma list) split the work over device runs of
at most 10 minutes: ``sft`` writes ``state_seed<k>.safetensors`` (the SFT actors, bf16, ~12 MB each) and
``records_sft.json`` (an evaluation cut by the deadline keeps the episodes that ended; ``sft_eval`` runs the
carried actors on the held-out tasks still missing and merges); ``control``, ``rl`` and ``throughput`` (``benchmarks/rollout_episodes.py`` with seed 0's
SFT actor) read the actors back from ``--state`` (a folder holding the earlier runs' ``--out`` files; the data
is rebuilt with the sft run's tokenizer and task files, ``data_core.tar.gz``, and the tokenizer's hash is checked)
and write ``records_control.json`` /
``records_rl.json`` / ``rollout_episodes.json``. ``rl_step`` is RL spread over device runs, one PPO step per seed
per run: value pretraining runs first, alone, and its critic is carried the moment it ends
(``rl_critic_seed<k>.safetensors``, ``critic_pretrained`` in ``records_rl.json``); step 1 starts from the SFT actor and
that critic, each later run takes the next step from the carried ``rl_actor_seed<k>.safetensors`` and
``rl_critic_seed<k>.safetensors`` (bf16, ~12 and ~14 MB) and the actor's AdamW moments
``rl_actor_moments_seed<k>.safetensors`` (~2 bytes a weight, ~12 MB; training/engines/moments.py: a step that starts
Adam afresh moves the policy far more; the critic's Adam starts afresh, for the 64 MiB that travel), evaluating the
held-out tasks after each step; ``records_rl.json`` counts the steps done per seed (``steps_done``). A PPO step starts
only with ``ppo_min_s`` seconds per seed stepping left (its rollouts are not resumable). A step's evaluation cut by the deadline is finished by ``rl_eval`` (the carried
actor on the held-out tasks still missing, like ``sft_eval``); ``rl_step`` takes no further step for a seed until
then. ``control`` also writes ``control_actor_seed<k>.safetensors`` (the control actor, exported before its
evaluation), and ``control_eval`` finishes a control evaluation the deadline cut, like ``sft_eval``. The SFT, control
and RL evaluations start no episode in the last ``drain_s`` seconds before the deadline. Every run
rebuilds ``learning_curve.json`` and the PNG from all record files it finds.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from _learning_curve_report import (  # noqa: E402
    build_report, collect_records, collect_rl_step, collect_vp, critic_pretrained, diagnostics, merge_resumed,
    merge_rl_eval, merge_rl_step, merge_seeds, merge_vp, pending_rl_evals, restart_rl, rl_eval_due, rl_stage_folder,
    write_png)

PRESETS: dict[str, dict[str, Any]] = {
    "h200": dict(backend="cuda", seeds=3, heldout=64, train_tasks=1500, per_task=2, vocab=2048,
                 model=dict(hidden=256, layers=6, heads=4, intermediate=768), sft_epochs=8, sft_batch=16, sft_lr=2e-3,
                 rl_steps=16, episodes_per_step=96, vp_episodes=16, actor_lr=1e-4, critic_lr=2e-4, ppo_epochs=1,
                 target_kl=0.02, max_kl=0.1, samples_per_task=4, baseline="group", batching="continuous",
                 negative_scale=0.0, actor_warmup_steps=4, minibatches=6, train_max_turns=4,
                 concurrency=16, build_workers=5, device_steps=4, max_turns=8, max_new_tokens=1100, dtype="bf16",
                 budget_s=560, drain_s=180, ppo_min_s=420, steps_per_run=1, ppo_step_s=280,
                 sft_reserve_s=240, device_gib=120, runners_ahead=15,
                 lengths=None, eval_temperature=1.0,
                 throughput_args=["--concurrency", "16", "--sequential", "4", "--concurrent", "32", "--build-workers", "8",
                                  "--device-steps", "4"]),
    "cpu_tiny": dict(backend="cpu", seeds=1, heldout=8, train_tasks=300, per_task=1, vocab=1024,
                     model=dict(hidden=128, layers=3, heads=2, intermediate=384), sft_epochs=6, sft_batch=4, sft_lr=3e-3,
                     rl_steps=1, episodes_per_step=4, vp_episodes=4, actor_lr=2e-5, critic_lr=1e-4, ppo_epochs=1,
                     target_kl=None,
                     concurrency=2, build_workers=2, device_steps=1, max_turns=6, max_new_tokens=800, dtype="fp32",
                     budget_s=7200, ppo_min_s=0,
                     sft_reserve_s=900,
                     lengths=[0.4, 0.6], eval_temperature=0.0,
                     throughput_args=["--concurrency", "2", "--sequential", "2", "--concurrent", "4", "--build-workers", "2"]),
}

#: h200's RL sizes from its first rl_step run (session 22, one seed alone on the H200): 32 value-pretraining
#: episodes took ~270 s and a PPO step's 32 rollouts ~240 s, ~0.12-0.15 episodes/s whether one seed runs or three
#: (the host's 16 cores bound it). ``vp_episodes`` 16 lets one run pretrain all three seeds' critics side by side
#: (48 episodes, ~350 s); ``ppo_min_s`` is the time one seed's PPO step needs to end with its held-out evaluation
#: started (rollouts ~240 s, update and model loads ~60 s), so a run starts no step it would cut in its rollouts.
#: ``actor_lr`` 2e-5 and ``target_kl`` 0.02 since session 26. At 1e-4, PPO step 1 on the H200 collapsed a few
#: confident tokens (approx_kl 13-532 per seed, ratio_mean 0.96) and the held-out reward fell (seed 0: -0.16 to
#: -0.53). ``benchmarks/ppo_trust_region.py`` replays the update on the carried SFT actor on CPU: at 1e-4, 57 of
#: 33720 policy tokens fell by more than 2 nats (p 0.999 to 7e-6); a warm-up of 8 steps left 38; at 2e-5, 1 token
#: and a mean k1 of 0.001 per token; at 1e-5, none. The target stops an update at the first minibatch whose k3
#: mean (tail-dominated: one collapsed token among 15k adds ~7) passes it, before that minibatch steps.
#: Since session 28 (measured on the H200 then): ``batching`` continuous (a step's 32 rollouts spent 11-19 s of
#: policy time per episode against 33-75 s batched, 92-115 s of wall time), ``samples_per_task`` 4 with the
#: ``baseline`` group (8 tasks x 4 samples, each episode against the other samples of its task; step 1 of the
#: curve used the critic). ``steps_per_run`` (default 1) lets one device run take several PPO steps per seed with one
#: held-out evaluation after the last (the evaluation, 64 episodes, costs more than a step's rollouts); ``ppo_step_s``
#: is what each further step needs (rollouts ~115 s, update and export ~30 s) beyond ``ppo_min_s``.
#: Since session 29 (chosen on the CPU with ``benchmarks/first_turn_rl.py``, not yet run on the H200; the curve's
#: steps 1-2 are retired): 64 episodes per step (16 tasks x 4), one epoch at ``actor_lr`` 1e-4 with 4 warm-up
#: optimizer steps (a fresh Adam every device call), and ``negative_scale`` 0: only samples that beat their group
#: teach. On the CPU proxy, plain PPO at that rate spread the failed replies' mass into the tail (share of replies
#: with a token below p = 0.1: 0.59 to 0.94 in 6 steps); positive-only kept it (0.66 after 8) and the held-out
#: first-turn pass went 0.25 to 0.41. 5e-5 barely moved (k3 1e-4 per step), 3e-4 collapsed in one step.
#: ``ppo_min_s`` 420 and ``ppo_step_s`` 280 hold 64 rollouts at session 28's ~0.3 episodes/s and the update.
#: Since session 30: ``train_max_turns`` 4, ``episodes_per_step`` 96 (24 tasks x 4), ``minibatches`` 6. Step 1 with
#: the session-29 recipe (64 episodes, 4 minibatches, all of them inside the warm-up) moved nothing on the H200:
#: approx_kl 0.0016-0.0025, held-out pass 0.235 against SFT's 0.228 (187 pairs, reward +0.016, 95% -0.18..+0.21).
#: More optimizer steps on the same episodes do not help either: on the CPU proxy, 4 epochs x 8 minibatches on one
#: step's 64 samples (14 steps before target_kl stopped it) left held-out first-turn pass at 0.219 (SFT 0.227),
#: where the session-29 arm reached 0.41 over 8 steps of fresh samples. What teaches is new passing episodes, and
#: the update itself costs ~3 s of the H200 (update_s 2.6): so the step buys episodes. Every pass of the SFT and
#: step-1 evaluations (87 of 376 episodes) came at turn 2-4, the failures ran all 8 turns, and with
#: ``negative_scale`` 0 a failure teaches nothing but its group's baseline: training episodes stop after 4 turns
#: (the paper, too, trained with fewer turns than it evaluated: 150 against 200), the held-out evaluations keep 8.
#: Since session 40: ``max_kl`` 0.1, the whole-batch trust region (training/trust_region.py). Session 39's step 4
#: (96 episodes, 6 minibatches at 1e-4) left it on seeds 1 and 2: whole-batch k3 10.0 and 4.35 after the update, a
#: few tokens 11-12 nats down, while ``target_kl`` (a minibatch's own k3 before its step: 0.0004, 0.0047, then 8.97
#: on seed 1's CPU replay) stopped it one optimizer step too late. The step that takes the batch's k3 past 0.1 is
#: now taken back (weights, Adam state, warm-up position) and ends the update. A recipe key like the others: the
#: carried actors and moments resume under it unchanged (``--set max_kl=null`` runs the step without it).
#: What ``--set`` may change: every preset's keys, and the optional ones read with a default.
SETTABLE = frozenset().union(*PRESETS.values(), {"device_gib", "device_steps", "drain_s", "save_reserve_s",
                                                 "sft_eval_every", "sft_evaluate", "runners_ahead",
                                                 "negative_scale", "actor_warmup_steps", "minibatches",
                                                 "train_max_turns", "rl_eval_every"})

#: h200's ``concurrency`` is per seed, and the seeds run side by side on the one GPU. Every episode in flight holds
#: two CUDA processes (its task's reference process and its candidate runner, ~0.75 GiB each): at 64 per seed, 3
#: seeds started 192 reference processes and the rest hit out-of-memory at start (session 19); the warm-ups'
#: torch.compile runs also starved generation of CPU (the first batch of one row took 260 s) and, since every
#: episode started at once, none had ended when the device run was cut. At 16 per seed episodes end all along the
#: evaluation, and a cut one keeps them (``sft_eval`` resumes with the rest). ``device_gib`` is the GPU memory the
#: seeds' harnesses share: each seed's evaluator gets ``device_gib / seeds`` (``limits.device_memory_gib``), since
#: each would otherwise take 85% of what it sees free as its own.
#: Grading at training scale: real builds, verification and timing with the harness's 'quick' timing preset (few
#: calls, one grading round) and three input sets; fused and unfused kernels differ by 2-4x, far above its noise.
#: ``warm_compile`` off: a task's reference process compiles the torch.compile baseline at the first profile or grade
#: that times it, not at its warm-up. 76% of the SFT episodes never passed verify (session 22), so most tasks never
#: time a baseline; reference processes took 26-28% of the host's CPU, the bound on the episode rate.
HARNESS = {"verify": {"input_sets": 3}, "timing": {"preset": "quick", "warm_compile": False}}

#: ``runners_ahead`` is the candidate runners the call's seeds keep started ahead, shared like ``device_gib``: each
#: seed's harness gets ``runners_ahead / seeds``, at most 3/4 of its concurrency. The harness's own default (one per
#: 3 cores, 5 on the H200) assumes one evaluator per host. One seed alone (a PPO step per call) then waited 18 s per
#: session for a runner to finish starting (session 24: a start is 9.6 s, ~3.5 per episode, 16 episodes in flight)
#: while 7 of the 16 cores were idle; three seeds side by side (5 each) had the host's cores busy already.


def seed_runners_ahead(p: dict[str, Any], seeds: int) -> int | None:
    """Each seed's ``sandbox.runners_ahead`` when ``seeds`` run side by side (None: the harness's default)."""
    total = p.get("runners_ahead")
    if not total:
        return None
    return max(1, min(total // seeds, p["concurrency"] * 3 // 4))


def apply_sets(p: dict[str, Any], sets: list[str]) -> dict[str, Any]:
    """``p`` with each ``KEY=VALUE`` of ``--set`` applied: VALUE as JSON (numbers, booleans, lists, quoted strings),
    else as the bare string (``dtype=fp32``, ``backend=cpu``); a key outside :data:`SETTABLE` is refused."""
    for kv in sets:
        k, sep, v = kv.partition("=")
        if not sep or k not in SETTABLE:
            raise SystemExit(f"--set {kv!r}: expected KEY=VALUE with KEY one of {', '.join(sorted(SETTABLE))}")
        try:
            p[k] = json.loads(v)
        except json.JSONDecodeError:
            p[k] = v
    return p


def sh(cmd: list[str], log: Path, env: dict[str, str] | None = None) -> subprocess.Popen:
    """Start ``cmd`` with its output in ``log``."""
    log.parent.mkdir(parents=True, exist_ok=True)
    fh = log.open("w")
    return subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT, cwd=ROOT, env={**os.environ, **(env or {})})


def train_config(p: dict[str, Any], data: Path, model: str, run_dir: Path, stages: list[dict[str, Any]], seed: int) -> dict:
    """A ``cuda-agent train`` config over the family's data (run fields from ``family_run_settings``)."""
    from cuda_agent.training.kernel_family.corpus import family_run_settings

    cfg: dict[str, Any] = {"run_dir": str(run_dir), "seed": seed, "model": model, "reward": "milestone",
                           "engine": {"zero_stage": 0 if p["dtype"] == "fp32" else 1, "dtype": p["dtype"]},
                           "stages": stages, **family_run_settings(data, p["backend"], p["max_turns"])}
    harness: dict[str, Any] = dict(HARNESS)  # only a top-level key is added
    if p.get("seed_memory_gib"):
        harness["limits"] = {"device_memory_gib": p["seed_memory_gib"]}
    if p.get("seed_runners_ahead"):
        harness["sandbox"] = {"runners_ahead": p["seed_runners_ahead"]}
    cfg["plugins"] = {p["backend"]: {"harness": harness}}
    if p["backend"] == "cpu":
        cfg["torch_threads"] = 1
    return cfg


def rollout_block(p: dict[str, Any], admit_until: float | None = None) -> dict[str, Any]:
    """The stages' rollout settings (concurrent, batched generation); ``admit_until``: no held-out episode starts
    after it (an evaluation that a resumed run can finish, cut between episodes rather than in them)."""
    return {"concurrency": p["concurrency"], "build_workers": p["build_workers"],
            "device_steps": p.get("device_steps", 1), "max_batch": 64, "gather_s": 0.05,
            "batching": p.get("batching", "batch"),
            "dtype": "bfloat16" if p["dtype"] == "bf16" else "float32", "eval_admit_until": admit_until}


def sft_stage(p: dict[str, Any], data: Path, admit_until: float | None = None, **over: Any) -> dict[str, Any]:
    """The ``sft`` stage block (held-out loss from the held-out experts; held-out tasks evaluated at the end, none
    started after ``admit_until``)."""
    cfg = {"episodes": [str(data / "expert_train.pt")], "heldout": [str(data / "expert_heldout.pt")],
           "epochs": p["sft_epochs"], "batch_size": p["sft_batch"], "lr": p["sft_lr"], "warmup_steps": 20,
           "eval_every": p.get("sft_eval_every", 50), "patience": 4, "checkpoint_every": 100000,
           "eval_tasks": [str(data / "tasks_heldout.jsonl")],
           "max_new_tokens": p["max_new_tokens"], "rollout": rollout_block(p, admit_until),
           "temperature": p["eval_temperature"]}
    cfg.update(over)
    return {"name": "sft", "config": cfg}


#: PPO minibatches per epoch for a preset that names none (``cpu_tiny``).
DEFAULT_MINIBATCHES = 4


def rl_stages(p: dict[str, Any], data: Path, steps: int | None = None,
              admit_until: float | None = None) -> list[dict[str, Any]]:
    """``value_pretrain`` then ``ppo_agentic`` (``steps``, default the preset's) with held-out evaluation after
    every step (none of its episodes started after ``admit_until``)."""
    train, held = str(data / "tasks_train.jsonl"), str(data / "tasks_heldout.jsonl")
    vp = {"env": "kernel", "tasks": [train], "collect_episodes": p["vp_episodes"], "max_steps": 40, "batch_size": 8,
          "lr": p["critic_lr"], "ev_gate": 0.5, "eval_every": 5, "max_new_tokens": p["max_new_tokens"],
          "rollout": rollout_block(p), "checkpoint_every": 1000}
    ppo = {"env": "kernel", "tasks": [train], "steps": steps or p["rl_steps"], "episodes_per_step": p["episodes_per_step"],
           "samples_per_task": p.get("samples_per_task", 1),
           "actor_lr": p["actor_lr"], "critic_lr": p["critic_lr"], "max_new_tokens": p["max_new_tokens"],
           "rollout": {**rollout_block(p, admit_until), "save_episodes": True,
                       "train_max_turns": p.get("train_max_turns")},
           "eval_tasks": [held], "eval_at_start": False,
           "checkpoint_every": 1000, "actor_warmup_steps": p.get("actor_warmup_steps", 0),
           "eval_temperature": p["eval_temperature"],
           "ppo": {"ppo_epochs": p["ppo_epochs"], "minibatches": p.get("minibatches", DEFAULT_MINIBATCHES),
                   "gamma": 1.0, "lam": 1.0, "kl_coef": 0.0,
                   "entropy_coef": 0.0, "aggregation": "seq_mean_token_mean", "target_kl": p.get("target_kl"),
                   "max_kl": p.get("max_kl"), "baseline": p.get("baseline", "critic"),
                   "negative_scale": p.get("negative_scale", 1.0)}}
    return [{"name": "value_pretrain", "config": vp}, {"name": "ppo_agentic", "config": ppo}]


def step_stage(p: dict[str, Any], data: Path, done: int, n: int, admit_until: float | None) -> dict[str, Any]:
    """The ``ppo_agentic`` stage of one seed's ``rl_step`` run: ``n`` steps after the ``done`` carried, one held-out
    evaluation after the last (``heldout_every`` n), none where that step is not due one (``rl_eval_every``,
    :func:`rl_eval_due`: the step is taken and carried, the curve has no point there)."""
    ppo = rl_stages(p, data, steps=n, admit_until=admit_until)[1]
    ppo["config"]["heldout_every"] = n
    if not rl_eval_due(done + n, p["rl_steps"], int(p.get("rl_eval_every", 1))):
        ppo["config"]["eval_tasks"] = []
    return ppo


#: The preset keys that make a PPO step's recipe: kept with each step's training metrics and with a restart.
RECIPE_KEYS = ("actor_lr", "target_kl", "max_kl", "ppo_epochs", "minibatches", "episodes_per_step", "samples_per_task",
               "negative_scale", "actor_warmup_steps", "baseline", "train_max_turns")


def ppo_recipe(p: dict[str, Any]) -> dict[str, Any]:
    """The PPO recipe of preset ``p`` (:data:`RECIPE_KEYS`, as :func:`rl_stages` reads them)."""
    return {k: p.get(k, DEFAULT_MINIBATCHES if k == "minibatches" else None) for k in RECIPE_KEYS}


def control_samples(p: dict[str, Any], state: Path | None) -> int:
    """Expert episodes the control trains on: as many as the RL episodes the seeds' carried PPO steps ran (the most
    over the seeds), else ``episodes_per_step`` times ``rl_steps``.

    A step's episodes are its row's ``rollout_episodes``, else its ``groups`` times its recipe's (or the preset's)
    ``samples_per_task``, else the recipe's or the preset's ``episodes_per_step``: the recipe may change between
    device runs (session 30: 64 episodes per step, then more), so the preset's figure alone would miscount."""
    f = state / "records_rl.json" if state else None
    records = json.loads(f.read_text()) if f is not None and f.exists() else {}
    done = {str(s): int(v) for s, v in records.get("steps_done", {}).items() if int(v) > 0}
    if not done:
        return p["rl_steps"] * p["episodes_per_step"]

    def episodes(row: dict[str, Any]) -> int:
        recipe = row.get("recipe") or {}
        if row.get("rollout_episodes"):
            return int(row["rollout_episodes"])
        if row.get("groups"):
            return int(row["groups"]) * int(recipe.get("samples_per_task") or p.get("samples_per_task", 1))
        return int(recipe.get("episodes_per_step") or p["episodes_per_step"])

    totals = []
    for seed, steps in done.items():
        rows = [r for r in records.get("train_metrics", {}).get(seed, []) if r.get("stage") == "ppo_agentic"]
        rows = rows[-steps:]  # the carried steps' rows (a step cut before it ended has none)
        totals.append(sum(episodes(r) for r in rows) + (steps - len(rows)) * p["episodes_per_step"])
    return max(totals)


def run_step_count(p: dict[str, Any], done: int, seed_s: float) -> int:
    """PPO steps one seed takes in an ``rl_step`` run, evaluated once after the last: ``steps_per_run``, at most the
    steps left (``rl_steps - done``), and at most what ``seed_s`` seconds hold (``ppo_min_s`` for the first step and
    its evaluation, ``ppo_step_s`` for each further step's rollouts and update). A run's steps are not resumable:
    a deadline inside them loses them all, so the count is planned up front."""
    n = min(int(p.get("steps_per_run", 1)), p["rl_steps"] - done)
    if p.get("ppo_min_s") and p.get("ppo_step_s"):
        n = min(n, 1 + int(max(0.0, seed_s - p["ppo_min_s"]) // p["ppo_step_s"]))
    return max(1, n)


def run_seeds(cmds: dict[int, list[str]], logs: Path, what: str, deadline: float) -> dict[int, int]:
    """Run one process per seed side by side; kill what is still running at the deadline."""
    procs = {s: sh(c, logs / f"{what}_seed{s}.log") for s, c in cmds.items()}
    codes: dict[int, int] = {}
    while len(codes) < len(procs):
        for s, pr in procs.items():
            if s not in codes and pr.poll() is not None:
                codes[s] = pr.returncode
        if time.time() > deadline:
            for s, pr in procs.items():
                if s not in codes:
                    pr.kill()
                    codes[s] = -9
        time.sleep(2)
    return codes


def write_cfg(cfg: dict[str, Any], path: Path) -> list[str]:
    """Save a config; return the ``cuda-agent train`` command for it."""
    import yaml

    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    return [sys.executable, "-c", "import sys; from cuda_agent.cli import main; sys.exit(main())", "train", "-c", str(path)]


def tokenizer_hash(data: Path) -> str:
    """Hash of the tokenizer file (carried actors need the identical tokenizer)."""
    return hashlib.sha256((data / "tokenizer" / "tokenizer.json").read_bytes()).hexdigest()[:16]


def save_state(actor_dir: Path, dest: Path, tok_hash: str) -> None:
    """The actor's weights in bf16 (one safetensors file, small enough to come back from the device)."""
    import torch
    from safetensors.torch import save_file
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(str(actor_dir), dtype=torch.float32)
    save_file({k: v.to(torch.bfloat16).contiguous() for k, v in model.state_dict().items()}, str(dest),
              metadata={"tokenizer": tok_hash})


def check_tokenizer(src: Path, tok_hash: str) -> None:
    """Refuse a carried state file trained with another tokenizer than this run's data has."""
    from safetensors import safe_open

    with safe_open(str(src), "pt") as f:
        if (f.metadata() or {}).get("tokenizer") != tok_hash:
            raise SystemExit(f"{src} was trained with another tokenizer (data rebuilt differently); run --phase sft again")


def load_state(src: Path, model_dir: Path, dest: Path, tok_hash: str) -> Path:
    """Rebuild an actor folder from a carried state file over the seed's model folder (same config, tokenizer)."""
    import shutil

    import torch
    from safetensors.torch import load_file
    from transformers import AutoModelForCausalLM

    check_tokenizer(src, tok_hash)
    model = AutoModelForCausalLM.from_pretrained(str(model_dir), dtype=torch.float32)
    model.load_state_dict({k: v.float() for k, v in load_file(str(src)).items()})
    if dest.exists():
        shutil.rmtree(dest)
    model.save_pretrained(str(dest))
    for f in model_dir.glob("tokenizer*"):
        shutil.copy(f, dest / f.name)
    for f in ("special_tokens_map.json", "chat_template.jinja"):
        if (model_dir / f).exists():
            shutil.copy(model_dir / f, dest / f)
    return dest


PHASES = ("sft", "sft_eval", "control", "control_eval", "rl", "rl_eval", "rl_step", "throughput")


def save_critic_state(critic_pt: Path, dest: Path, tok_hash: str) -> None:
    """A critic's state dict (``critic.pt``) in bf16, one safetensors file (~14 MB: it comes back from the device)."""
    import torch
    from safetensors.torch import save_file

    state = torch.load(str(critic_pt), map_location="cpu", weights_only=True)
    save_file({k: v.to(torch.bfloat16).contiguous() for k, v in state.items()}, str(dest),
              metadata={"tokenizer": tok_hash})


def load_critic_state(src: Path, dest: Path, tok_hash: str) -> Path:
    """A carried bf16 critic back as the fp32 ``critic.pt`` a PPO stage's ``init_critic`` reads."""
    import torch
    from safetensors.torch import load_file

    check_tokenizer(src, tok_hash)
    dest.parent.mkdir(parents=True, exist_ok=True)
    torch.save({k: v.float() for k, v in load_file(str(src)).items()}, str(dest))
    return dest


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with Path(path).open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def save_moments_state(src: Path, dest: Path, actor_file: Path, seed_step: int, tok_hash: str) -> None:
    """A PPO run's actor moments (its ``actor_moments`` output, ~2 bytes a weight) as the carried
    ``rl_actor_moments_seed<k>.safetensors``, tagged with the carried actor file they belong to (its SHA-256) and
    the seed's step: the next step's run loads them only beside that very actor."""
    from safetensors import safe_open
    from safetensors.torch import save_file

    with safe_open(str(src), "pt") as f:
        meta = dict(f.metadata() or {})
        tensors = {k: f.get_tensor(k) for k in f.keys()}
    meta.update(actor_sha256=file_sha256(actor_file), seed_step=str(seed_step), tokenizer=tok_hash)
    save_file(tensors, str(dest), metadata=meta)


def carried_moments(state: Path | None, s: int, k: int) -> tuple[Path | None, str]:
    """Seed ``s``'s carried actor moments for its step ``k + 1``, or None and why not (the step then starts AdamW
    afresh, as every step did before session 32)."""
    from safetensors import safe_open

    src = state / f"rl_actor_moments_seed{s}.safetensors" if state else None
    actor = state / f"rl_actor_seed{s}.safetensors" if state else None
    if src is None or not src.exists():
        return None, "no rl_actor_moments file was carried"
    with safe_open(str(src), "pt") as f:
        meta = dict(f.metadata() or {})
    if meta.get("seed_step") != str(k):
        return None, f"the carried moments are step {meta.get('seed_step')}'s, the actor is step {k}'s"
    if actor is None or not actor.exists() or meta.get("actor_sha256") != file_sha256(actor):
        return None, f"the carried moments belong to another {actor.name if actor else 'actor'}"
    return src, ""


def heldout_tasks(data: Path) -> list[dict[str, Any]]:
    """The held-out task manifests of the rebuilt data (one JSON object per line)."""
    return [json.loads(x) for x in (data / "tasks_heldout.jsonl").read_text().splitlines() if x.strip()]


def missing_tasks(records: dict[str, Any], point: str, s: int, held: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The held-out tasks that seed ``s``'s records of ``point`` lack (what a resumed evaluation runs)."""
    done = {r["task_id"] for r in records.get("points", {}).get(point, {}).get(str(s), [])}
    return [t for t in held if t["id"] not in done]


def resume_eval_cmd(p: dict[str, Any], data: Path, work: Path, name: str, s: int, actor: Path,
                    left: list[dict[str, Any]], admit: float | None, seed: int) -> list[str]:
    """The command that evaluates ``actor`` on the held-out tasks ``left`` (an ``sft`` stage with ``train: false``)
    in ``work/<name>_seed<s>``: how ``sft_eval`` and ``rl_eval`` finish a cut evaluation."""
    task_file = work / f"{name}_tasks_seed{s}.jsonl"
    task_file.write_text("".join(json.dumps(t) + "\n" for t in left))
    stage = sft_stage(p, data, admit, train=False, eval_tasks=[str(task_file)], heldout=[])
    return write_cfg(train_config(p, data, str(actor), work / f"{name}_seed{s}", [stage], seed=seed),
                     work / f"{name}_seed{s}.yaml")


#: Phases that train on the expert episodes; the others only run episodes on the tasks and skip the corpus.
CORPUS_PHASES = frozenset({"sft", "control"})


def ensure_family_data(data: Path, p: dict[str, Any], phases: list[str], core: Path | None,
                       scratch: Path) -> dict[str, Any]:
    """The family's data in ``data`` for ``phases``; its summary.

    Built once per machine: a warm machine keeps ``data`` between calls. A later phase on another machine builds it
    from the carried data ``core`` (the sft run's tokenizer and task files, so the carried actors meet the same
    token ids and held-out tasks; a tokenizer retrained there could differ, its corpus holds numbers computed on
    that machine's CPU). The expert corpus (~25-40 s of a device run) is built only for :data:`CORPUS_PHASES`, and
    built then into a folder an earlier call left without it, from that folder's own tokenizer and tasks.
    """
    from cuda_agent.training.kernel_family.corpus import build_family_data, read_data_core

    summary_file = data / "summary.json"
    have = json.loads(summary_file.read_text()) if summary_file.exists() else None
    wants_corpus = bool(CORPUS_PHASES & set(phases))
    if have is not None and ("expert_train.pt" in have or not wants_corpus):
        return have
    if have is not None:
        carried: Path | None = data
    else:
        carried = read_data_core(core, scratch) if core is not None and core.exists() else None
    build_family_data(data, backend=p["backend"], n_train=p["train_tasks"], n_heldout=p["heldout"], seed=0,
                      per_task=p["per_task"], vocab=p["vocab"], lengths=p["lengths"], carried=carried,
                      experts=carried is None or wants_corpus)
    return json.loads(summary_file.read_text())


#: Each call's run folders live in ``WORK/calls/<time>_<pid>`` (see main).
CALLS = "calls"


def model_dir(call_work: Path, s: int) -> Path:
    """Seed ``s``'s random-init model (config and tokenizer of every carried actor), shared by the calls in WORK."""
    return call_work.parent.parent / f"model_seed{s}"


def seed_actor(work: Path, s: int, state: Path | None, tok_hash: str) -> Path | None:
    """The seed's SFT actor: trained in this call's folder, else rebuilt from a carried state file."""
    actor = work / f"sft_seed{s}" / "0_sft" / "actor"
    if actor.exists():
        return actor
    src = state / f"state_seed{s}.safetensors" if state else None
    if src is not None and src.exists():
        return load_state(src, model_dir(work, s), work / f"carried_seed{s}", tok_hash)
    return None


def restart_rl_state(state: Path | None, reason: str, settings: dict[str, Any]) -> None:
    """``--restart-rl``: rewrite ``state``'s records_rl.json by :func:`restart_rl` and delete its RL actors."""
    path = state / "records_rl.json" if state else None
    if path is None or not path.exists():
        raise SystemExit("--restart-rl rewrites an RL state: --state must hold records_rl.json")
    if not reason.strip():
        raise SystemExit("--restart-rl needs a reason (it is kept with the retired steps)")
    records = json.loads(path.read_text())
    path.write_text(json.dumps(restart_rl(records, reason, settings), default=str))
    gone = sorted(state.glob("rl_actor_seed*.safetensors"))
    for f in gone:
        f.unlink()
    print(f"retired RL steps {records.get('steps_done', {})}; deleted {[f.name for f in gone]}; critics kept: "
          f"{sorted(f.name for f in state.glob('rl_critic_seed*.safetensors'))}")


def main() -> None:  # noqa: C901 - one linear script
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--preset", choices=sorted(PRESETS), default="h200")
    ap.add_argument("--out", type=Path, required=True, help="results: learning_curve.json/png, state and record files")
    ap.add_argument("--work", type=Path, default=None, help="working folder (default: /tmp/learning_curve)")
    ap.add_argument("--phase", default="all", help=f"'all' or a comma list of {', '.join(PHASES)}")
    ap.add_argument("--state", type=Path, default=None,
                    help="folder holding an earlier run's --out files (state_seed*.safetensors, records_*.json)")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="override a preset value (JSON)")
    ap.add_argument("--seeds", default=None, metavar="LIST", nargs="+",
                    help="run only these seeds (e.g. '0', '1,2' or '1 2'): a phase spread over device runs one seed at a "
                         "time; its records are merged with the carried --state records of the other seeds")
    ap.add_argument("--restart-rl", default=None, metavar="REASON",
                    help="no device work: retire the RL steps recorded in --state's records_rl.json (kept there under "
                         "retired_runs with REASON), delete its rl_actor_seed*.safetensors and keep the critics, so "
                         "the next --phase rl_step takes step 1 from the SFT actors again")
    args = ap.parse_args()
    p = apply_sets(dict(PRESETS[args.preset]), args.set)
    if args.restart_rl is not None:
        restart_rl_state(args.state, args.restart_rl, ppo_recipe(p))
        return
    phases = ["sft", "control", "rl"] if args.phase == "all" else args.phase.split(",")
    unknown = [x for x in phases if x not in PHASES]
    if unknown:
        raise SystemExit(f"unknown phase(s) {unknown}; valid: all, {', '.join(PHASES)}")
    t_start = time.time()
    deadline = t_start + p["budget_s"]
    # The SFT evaluations (resumable by --phase sft_eval) start no episode in the last drain_s: the device is then
    # spent on ending the episodes in flight, where a kill at the deadline would throw them away.
    admit = deadline - p["drain_s"] if p.get("drain_s") else None
    work = args.work or Path("/tmp/learning_curve")
    out = args.out
    out.mkdir(parents=True, exist_ok=True)
    data = work / "data"
    seeds = list(range(p["seeds"]))
    if args.seeds is not None:
        try:
            chosen = [int(x) for a in args.seeds for x in a.split(",") if x.strip()]
        except ValueError:
            raise SystemExit(f"--seeds {' '.join(args.seeds)!r}: seeds are integers, e.g. '0,1' or '0 1'") from None
        if not chosen or any(x not in seeds for x in chosen):
            raise SystemExit(f"--seeds {' '.join(args.seeds)!r}: choose among {seeds}")
        seeds = chosen
    all_seeds = list(range(p["seeds"]))
    if p.get("device_gib"):  # the seeds of this call share the GPU's memory (see PRESETS)
        p["seed_memory_gib"] = round(p["device_gib"] / len(seeds), 1)
    p["seed_runners_ahead"] = seed_runners_ahead(p, len(seeds))

    def records_file(name: str, records: dict[str, Any]) -> None:
        """Write ``records_<name>.json``, keeping the carried file's other seeds when only some seeds ran."""
        carried_file = args.state / f"records_{name}.json" if args.state else None
        if seeds != all_seeds and carried_file is not None and carried_file.exists():
            records = merge_seeds(json.loads(carried_file.read_text()), records)
        (out / f"records_{name}.json").write_text(json.dumps(records, default=str))
    timings: dict[str, float] = {}

    from cuda_agent.training.kernel_family.corpus import ModelSize, build_model, write_data_core

    t0 = time.time()
    summary = ensure_family_data(data, p, phases, args.state / "data_core.tar.gz" if args.state else None,
                                 work / "carried_data")
    if args.state is None or not (args.state / "data_core.tar.gz").exists():
        # built in this run: it comes back (a carried one is already where the state is kept; leaving it out keeps a
        # step call's returned files at 7 of the 8 a device call returns)
        write_data_core(data, out / "data_core.tar.gz")
    tok_hash = tokenizer_hash(data)
    for s in seeds:
        if not (work / f"model_seed{s}" / "config.json").exists():
            build_model(work / f"model_seed{s}", data / "tokenizer", ModelSize(**p["model"]), seed=s)
    timings["data_s"] = time.time() - t0
    # This call's run folders. A warm GPU machine keeps /tmp between calls, and `cuda-agent train` refuses a run
    # folder that holds another configuration: session 23's fourth call (sft_eval after sft_eval on the same
    # machine) evaluated nothing that way. What a call needs from an earlier one comes through --state; the data and
    # the random-init models above are shared (model_dir).
    work = work / CALLS / f"{time.strftime('%Y%m%dT%H%M%S')}_{os.getpid()}"
    work.mkdir(parents=True)
    logs = work / "logs"

    if "sft" in phases:
        t0 = time.time()
        # Training stops in time for the export and the held-out evaluation (sft_reserve_s: process start included).
        # With sft_evaluate false the whole budget trains (save_reserve_s left for the export), and a later
        # ``sft_eval`` run evaluates.
        evaluate = p.get("sft_evaluate", True)
        reserve = p["sft_reserve_s"] if evaluate else p.get("save_reserve_s", 45)
        max_train_s = max(60.0, deadline - time.time() - reserve)
        # Actors carried in --state continue training (SFT spread over device runs; the optimizer starts afresh
        # with its warm-up), else each seed starts from its random-init model.
        start = {s: seed_actor(work, s, args.state, tok_hash) if args.state else None for s in seeds}
        over = {} if evaluate else {"eval_tasks": []}
        cmds = {s: write_cfg(train_config(p, data, str(start[s] or model_dir(work, s)), work / f"sft_seed{s}",
                                          [sft_stage(p, data, admit, max_train_s=round(max_train_s), **over)], seed=s),
                             work / f"sft_seed{s}.yaml") for s in seeds}
        codes = run_seeds(cmds, logs, "sft", deadline)
        timings["sft_s"] = time.time() - t0
        print(f"sft exit codes {codes} after {timings['sft_s']:.0f} s", flush=True)
        for s in seeds:
            actor = work / f"sft_seed{s}" / "0_sft" / "actor"
            if actor.exists():
                save_state(actor, out / f"state_seed{s}.safetensors", tok_hash)
        records = collect_records(work, seeds, "sft")
        carried_path = args.state / "records_sft.json" if args.state else None
        if any(start.values()) and carried_path is not None and carried_path.exists():
            before = json.loads(carried_path.read_text())  # the earlier SFT runs' training records, oldest first
            records["history"] = before.get("history", []) + [before.get("outputs", {})]
        records_file("sft", records)

    if "sft_eval" in phases:
        # An SFT evaluation the device budget cut: the carried actors on the held-out tasks their records lack.
        carried_path = args.state / "records_sft.json" if args.state else None
        if carried_path is None or not carried_path.exists():
            raise SystemExit("--phase sft_eval finishes a cut SFT evaluation: --state must hold records_sft.json "
                             "and the state_seed*.safetensors of the sft run")
        carried_recs = json.loads(carried_path.read_text())
        held = heldout_tasks(data)
        t0 = time.time()
        cmds = {}
        for s in seeds:
            left = missing_tasks(carried_recs, "sft", s, held)
            actor = seed_actor(work, s, args.state, tok_hash)
            if not left or actor is None:
                continue
            cmds[s] = resume_eval_cmd(p, data, work, "sft_eval", s, actor, left, admit, seed=s)
        codes = run_seeds(cmds, logs, "sft_eval", deadline)
        timings["sft_eval_s"] = time.time() - t0
        print(f"sft_eval exit codes {codes} after {timings['sft_eval_s']:.0f} s", flush=True)
        merged = merge_resumed(carried_recs, collect_records(work, seeds, "sft_eval"), "sft", len(held))
        (out / "records_sft.json").write_text(json.dumps(merged, default=str))

    if "control" in phases:
        n_control = control_samples(p, args.state)
        n_expert = summary["expert_train.pt"]["episodes"]
        t0 = time.time()
        cmds = {}
        for s in seeds:
            actor = seed_actor(work, s, args.state, tok_hash)
            if actor is None:
                continue
            stage = sft_stage(p, data, admit, limit=n_control, epochs=1.0, heldout=[], warmup_steps=0,
                              lr=p["sft_lr"] * 0.1, offset=(s * n_control) % max(1, n_expert - n_control))
            cmds[s] = write_cfg(train_config(p, data, str(actor), work / f"control_seed{s}", [stage], seed=s),
                                work / f"control_seed{s}.yaml")
        codes = run_seeds(cmds, logs, "control", deadline)
        timings["control_s"] = time.time() - t0
        print(f"control exit codes {codes} after {timings['control_s']:.0f} s", flush=True)
        for s in cmds:  # the trained control actor (exported before its evaluation): control_eval finishes a cut one
            actor = work / f"control_seed{s}" / "0_sft" / "actor"
            if (actor / "config.json").exists():
                save_state(actor, out / f"control_actor_seed{s}.safetensors", tok_hash)
        records_file("control", collect_records(work, seeds, "control"))

    if "control_eval" in phases:
        # A control evaluation the device budget cut: the carried control actors on the held-out tasks their
        # records lack (like sft_eval), merged into records_control.json.
        carried_path = args.state / "records_control.json" if args.state else None
        if carried_path is None or not carried_path.exists():
            raise SystemExit("--phase control_eval finishes a cut control evaluation: --state must hold "
                             "records_control.json and the control_actor_seed*.safetensors of the control run")
        carried_ctl = json.loads(carried_path.read_text())
        held = heldout_tasks(data)
        t0 = time.time()
        cmds = {}
        for s in seeds:
            left = missing_tasks(carried_ctl, "control", s, held)
            if not left:
                continue
            src = args.state / f"control_actor_seed{s}.safetensors"
            if not src.exists():
                raise SystemExit(f"seed {s}'s control evaluation lacks {len(left)} task(s), but --state lacks "
                                 f"{src.name} (run --phase control again for that seed)")
            actor = load_state(src, model_dir(work, s), work / f"control_eval_actor_seed{s}", tok_hash)
            cmds[s] = resume_eval_cmd(p, data, work, "control_eval", s, actor, left, admit, seed=s)
        codes = run_seeds(cmds, logs, "control_eval", deadline)
        timings["control_eval_s"] = time.time() - t0
        print(f"control_eval exit codes {codes} after {timings['control_eval_s']:.0f} s", flush=True)
        merged = merge_resumed(carried_ctl, collect_records(work, list(cmds), "control_eval"), "control", len(held))
        (out / "records_control.json").write_text(json.dumps(merged, default=str))

    if "rl" in phases:
        t0 = time.time()
        cmds = {}
        for s in seeds:
            actor = seed_actor(work, s, args.state, tok_hash)
            if actor is not None:
                cmds[s] = write_cfg(train_config(p, data, str(actor), work / f"rl_seed{s}", rl_stages(p, data), seed=s),
                                    work / f"rl_seed{s}.yaml")
        codes = run_seeds(cmds, logs, "rl", deadline)
        timings["rl_s"] = time.time() - t0
        print(f"rl exit codes {codes} after {timings['rl_s']:.0f} s", flush=True)
        records_file("rl", collect_records(work, seeds, "rl", p["rl_steps"]))

    if "rl_eval" in phases:
        # Finish the held-out evaluations that rl_step runs cut: per seed, the carried actor of its last step on the
        # held-out tasks that point still lacks (like sft_eval), merged into records_rl.json.
        carried_path = args.state / "records_rl.json" if args.state else None
        if carried_path is None or not carried_path.exists():
            raise SystemExit("--phase rl_eval finishes cut RL evaluations: --state must hold records_rl.json and the "
                             "rl_actor_seed*.safetensors of the rl_step runs")
        carried_rl = json.loads(carried_path.read_text())
        held = heldout_tasks(data)
        pending = pending_rl_evals(carried_rl, seeds, len(held), p["rl_steps"], int(p.get("rl_eval_every", 1)))
        t0 = time.time()
        cmds = {}
        for s, k in pending.items():
            src = args.state / f"rl_actor_seed{s}.safetensors"
            if not src.exists():
                raise SystemExit(f"records_rl.json says seed {s}'s step {k} evaluation is unfinished, but --state "
                                 f"lacks {src.name}")
            actor = load_state(src, model_dir(work, s), work / f"rl_eval_actor_seed{s}", tok_hash)
            left = missing_tasks(carried_rl, f"rl_{k}", s, held)
            cmds[s] = resume_eval_cmd(p, data, work, "rl_eval", s, actor, left, admit, seed=s + 1000 * k)
        codes = run_seeds(cmds, logs, "rl_eval", deadline)
        timings["rl_eval_s"] = time.time() - t0
        print(f"rl_eval exit codes {codes} after {timings['rl_eval_s']:.0f} s (steps {pending})", flush=True)
        merged = merge_rl_eval(carried_rl, collect_records(work, list(pending), "rl_eval"), pending, len(held))
        (out / "records_rl.json").write_text(json.dumps(merged, default=str))

    if "rl_step" in phases:
        # RL one PPO step per seed per device run. Value pretraining runs first, alone in its own run folder
        # (``rl_vp_seed<s>``), for the seeds about to take step 1 without a pretrained critic: its critic is carried
        # the moment it ends (``critic_pretrained`` in records_rl.json), so a run whose deadline falls in the PPO
        # step keeps it. A PPO step starts only with ``ppo_min_s`` left (its rollouts are not resumable: a step cut
        # in them would throw them away); it starts from the SFT actor and the pretrained critic (step 1) or from
        # the carried actor and critic (bf16 files) and the actor's AdamW moments where they belong to that actor
        # (the critic's optimizer starts afresh each run). The seed of run k is seed + 1000 k, so every step draws its own training tasks.
        carried_path = args.state / "records_rl.json" if args.state else None
        carried_rl = json.loads(carried_path.read_text()) if carried_path is not None and carried_path.exists() else {}
        if "rl_eval" in phases and (out / "records_rl.json").exists():  # rl_eval ran first in this call: its merge
            carried_rl = json.loads((out / "records_rl.json").read_text())
        done = {s: int(carried_rl.get("steps_done", {}).get(str(s), 0)) for s in seeds}
        n_held = len(heldout_tasks(data))
        every = int(p.get("rl_eval_every", 1))
        waiting = pending_rl_evals(carried_rl, seeds, n_held, p["rl_steps"], every)
        for s, k in waiting.items():
            print(f"rl_step: seed {s} waits for step {k}'s held-out evaluation to be finished (--phase rl_eval)",
                  flush=True)
        t0 = time.time()
        todo = [s for s in seeds if done[s] < p["rl_steps"] and s not in waiting]
        pretrained = critic_pretrained(carried_rl)
        critics: dict[int, Path] = {}  # fp32 critics of this run's value pretraining
        vp_cmds = {}
        for s in todo:
            if done[s] == 0 and s not in pretrained:
                actor = seed_actor(work, s, args.state, tok_hash)
                if actor is not None:
                    vp_cmds[s] = write_cfg(train_config(p, data, str(actor), work / f"rl_vp_seed{s}",
                                                        rl_stages(p, data)[:1], seed=s), work / f"rl_vp_seed{s}.yaml")
        if vp_cmds:
            codes = run_seeds(vp_cmds, logs, "rl_vp", deadline)
            print(f"rl_step: value pretraining exit codes {codes} after {time.time() - t0:.0f} s", flush=True)
            for s in vp_cmds:
                outputs = work / f"rl_vp_seed{s}" / "0_value_pretrain" / "outputs.json"
                if outputs.exists():
                    critics[s] = Path(json.loads(outputs.read_text())["critic"])
                    save_critic_state(critics[s], out / f"rl_critic_seed{s}.safetensors", tok_hash)
            carried_rl = merge_vp(carried_rl, collect_vp(work, sorted(critics)))
            pretrained = critic_pretrained(carried_rl)
            (out / "records_rl.json").write_text(json.dumps(carried_rl, default=str))
            timings["rl_vp_s"] = time.time() - t0
        cmds, stepping, run_steps = {}, {}, {}
        # Seeds whose value pretraining did not end in this run wait for the next run; of the others, as many step
        # as the time left allows (seeds side by side share the machine's cores: ppo_min_s each).
        ready = [s for s in todo if done[s] > 0 or s in pretrained]
        left_s = deadline - time.time()
        fit = len(ready) if not p.get("ppo_min_s") else int(left_s // p["ppo_min_s"])
        per_seed_s = left_s / max(1, min(fit, len(ready)))
        for s in ready[fit:]:
            print(f"rl_step: seed {s}'s PPO step {done[s] + 1} is left to the next run: {left_s:.0f} s are left, "
                  f"{len(ready)} seed(s) stepping side by side need ppo_min_s={p.get('ppo_min_s')} s each", flush=True)
        for s in ready[:fit]:
            k = done[s]
            critic_src = args.state / f"rl_critic_seed{s}.safetensors" if args.state else None
            if k == 0:
                actor = seed_actor(work, s, args.state, tok_hash)
                if s not in critics and (critic_src is None or not critic_src.exists()):
                    raise SystemExit(f"records_rl.json says seed {s}'s critic is pretrained, but --state lacks "
                                     f"rl_critic_seed{s}.safetensors")
            else:
                src = args.state / f"rl_actor_seed{s}.safetensors" if args.state else None
                if src is None or not src.exists() or critic_src is None or not critic_src.exists():
                    raise SystemExit(f"records_rl.json says seed {s} took {k} RL step(s), but --state lacks "
                                     f"rl_actor_seed{s}.safetensors or rl_critic_seed{s}.safetensors")
                actor = load_state(src, model_dir(work, s), work / f"rl_carried_seed{s}", tok_hash)
            if actor is None:
                continue
            critic = critics.get(s) or load_critic_state(critic_src, work / f"rl_carried_critic_seed{s}.pt", tok_hash)
            n = run_step_count(p, k, per_seed_s)
            ppo = step_stage(p, data, k, n, admit)
            ppo["config"]["init_critic"] = str(critic)
            if p.get("carry_moments", True):
                ppo["config"]["save_actor_moments"] = True
                moments, why = carried_moments(args.state, s, k) if k > 0 else (None, "")
                if moments is not None:
                    ppo["config"]["init_actor_moments"] = str(moments)
                elif k > 0:
                    print(f"rl_step: seed {s}'s step {k + 1} starts AdamW afresh: {why}", flush=True)
            if not ppo["config"]["eval_tasks"]:
                print(f"rl_step: seed {s}'s step {k + n} is not evaluated (rl_eval_every={every})", flush=True)
            cmds[s] = write_cfg(train_config(p, data, str(actor), work / f"rl_seed{s}", [ppo], seed=s + 1000 * k),
                                work / f"rl_seed{s}.yaml")
            stepping[s], run_steps[s] = k + n, n
            print(f"rl_step: seed {s} takes PPO step(s) {k + 1}..{k + n} in this run", flush=True)
        codes = run_seeds(cmds, logs, "rl_step", deadline)
        timings["rl_step_s"] = time.time() - t0
        print(f"rl_step exit codes {codes} after {timings['rl_step_s']:.0f} s (steps {stepping})", flush=True)
        finished = {}
        for s, step in stepping.items():
            outputs = work / f"rl_seed{s}" / rl_stage_folder(step) / "outputs.json"
            if outputs.exists():  # the step and its held-out evaluation ended: carry its actor and critic
                o = json.loads(outputs.read_text())
                save_state(Path(o["actor"]), out / f"rl_actor_seed{s}.safetensors", tok_hash)
                save_critic_state(Path(o["critic"]), out / f"rl_critic_seed{s}.safetensors", tok_hash)
                if o.get("actor_moments"):
                    save_moments_state(Path(o["actor_moments"]), out / f"rl_actor_moments_seed{s}.safetensors",
                                       out / f"rl_actor_seed{s}.safetensors", step, tok_hash)
                elif o.get("actor_moments_error"):
                    print(f"rl_step: seed {s}'s step {step} kept no Adam moments: {o['actor_moments_error']}", flush=True)
                finished[s] = step
            # the step's rollouts (tokens, mask, sampling log-probs, rewards; ~1-2 MB; gpu_session.sh returns them in
            # $OUT/rollouts/): what benchmarks/ppo_trust_region.py --keep-rewards replays on CPU to choose a rate
            for j in range(1, run_steps[s] + 1):
                rollouts = work / f"rl_seed{s}" / rl_stage_folder(step) / "rollouts" / f"step_{j:05d}.pt"
                if rollouts.exists():
                    shutil.copy(rollouts, out / f"rollouts_seed{s}_step{step - run_steps[s] + j}.pt")
        new = collect_rl_step(work, {s: st for s, st in stepping.items() if s in finished}, run_steps)
        merged = merge_rl_step(carried_rl, new, {**done, **finished}, ppo_recipe(p))
        (out / "records_rl.json").write_text(json.dumps(merged, default=str))

    if "throughput" in phases:
        actor = seed_actor(work, 0, args.state, tok_hash)
        if actor is not None:
            t0 = time.time()
            cmd = [sys.executable, str(ROOT / "benchmarks" / "rollout_episodes.py"), "--data", str(data), "--model",
                   str(actor), "--backend", p["backend"], "--max-turns", str(p["max_turns"]),
                   "--max-new-tokens", str(p["max_new_tokens"]), "--out", str(out / "rollout_episodes.json"),
                   "--work", str(work / "rollout_episodes"),
                   *[str(x) for x in p.get("throughput_args", [])]]
            proc = sh(cmd, logs / "throughput.log")
            left = max(30.0, deadline - time.time())
            try:
                proc.wait(timeout=left)
            except subprocess.TimeoutExpired:
                proc.kill()
            timings["throughput_s"] = time.time() - t0

    timings["wall_s"] = time.time() - t_start
    tails = []  # what each process printed last: one file comes back from the device
    for log in sorted(logs.glob("*.log")) if logs.exists() else []:
        lines = log.read_text(errors="replace").splitlines()
        tails.append(f"==== {log.name} ({len(lines)} lines, last 150)\n" + "\n".join(x[:400] for x in lines[-150:]))
    (out / "learning_curve_logs.txt").write_text("\n".join(tails))
    # where the time went (training metrics, per-episode seconds by policy/tool/grading, a sample episode): the work
    # folder stays on the device machine
    (out / "diagnostics.json").write_text(json.dumps(diagnostics(work, seeds), indent=1, default=str))
    result = build_report(work, all_seeds, p, summary, timings, [d for d in (args.state, out) if d is not None])
    (out / "learning_curve.json").write_text(json.dumps(result, indent=1, default=str))
    write_png(result, out / "learning_curve.png")
    print(json.dumps({k: result[k] for k in ("points", "comparisons", "timings") if k in result}, indent=1, default=str))


if __name__ == "__main__":
    main()
