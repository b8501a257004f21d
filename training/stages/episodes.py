"""Where a stage's episodes come from: a toy environment, or the kernel environment via the agent loop.

- ``toy_single`` / ``toy_two_turn``: :class:`cuda_agent.training.toy_env.ToyEnvironment`,
  sampled directly from the actor module (instant grading).
- ``kernel``: the real environment. The actor is exported to HF format
  (gathered from ZeRO) with its tokenizer, the ``hf`` policy plugin loads it
  (token-in/token-out, log-probs), and :func:`cuda_agent.loop.run_episode`
  runs each episode through the configured backend (``cpu`` or ``cuda``)
  with trusted grading; the trajectory files are read back into episodes.

With ``rollout.engine: vllm`` both sample through one vLLM engine per stage
kept in step with the actor (:mod:`cuda_agent.training.stages.vllm_rollout`);
the log-probs it reports are the episodes' behaviour log-probs. Every episode's
``meta`` names the engine (``rollout_engine``) and the actor version it was
sampled from (``weights_version``).
"""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import Any, Literal

import torch

from cuda_agent.config import RunConfig
from cuda_agent.errors import ConfigError
from cuda_agent.schemas.task import TaskManifest
from cuda_agent.training.buffers import Episode, episode_from_trajectory
from cuda_agent.training.engines.checkpoint import export_actor_hf
from cuda_agent.training.settings import RolloutSettings
from cuda_agent.training.stages.runtime import StageRuntime, stable_seed
from cuda_agent.training.stages.vllm_rollout import VLLMActorRollout, actor_version
from cuda_agent.training.toy_env import TOY_ENVS, ToyEnvironment

ENVIRONMENTS: tuple[str, ...] = (*TOY_ENVS, "kernel")


def _stamp(episodes: list[Episode], engine: str, version: int) -> list[Episode]:
    for e in episodes:
        e.meta.update(rollout_engine=engine, weights_version=version)
    return episodes


class ToyEpisodeSource:
    """Episodes of a toy environment, sampled from the actor module itself or from vLLM serving it."""

    def __init__(self, env: str, temperature: float = 1.0, vllm: VLLMActorRollout | None = None) -> None:
        self.env = ToyEnvironment(env)
        self.temperature = temperature
        self.vllm = vllm

    def collect(self, actor: Any, n: int, step: int, gen: torch.Generator, group_size: int = 1) -> list[Episode]:
        """``n`` episodes from the current actor (``group_size`` must be 1: the toy envs draw their own tasks)."""
        if group_size != 1:
            raise ConfigError(f"toy environment {self.env.name!r} cannot sample tasks in groups (group_size {group_size})")
        device = next(actor.module.parameters()).device
        if self.vllm is None:
            episodes = self.env.rollout(actor.module, n, gen, temperature=self.temperature, device=device)
            return _stamp(episodes, "hf", actor_version(actor))
        version = self.vllm.sync(actor)
        episodes = self.env.rollout_with(self.vllm.toy_sampler(gen, self.temperature), n, gen, device=device)
        return _stamp(episodes, "vllm", version)

    def close(self) -> None:
        """Shut a vLLM engine down (the stage's close does it too)."""
        if self.vllm is not None:
            self.vllm.close()


def load_tasks(paths: list[str], backend: str) -> list[TaskManifest]:
    """Task manifests from ``.json`` / ``.jsonl`` manifests or ``.py`` KernelBench-format files (probed by the harness)."""
    if not paths:
        raise ConfigError("env 'kernel' needs 'tasks': a list of .py task files or .json manifests")
    out = []
    for p in paths:
        path = Path(p)
        if not path.is_file():
            raise ConfigError(f"task file {path} does not exist (stage config 'tasks')")
        if path.suffix == ".json":
            out.append(TaskManifest.model_validate_json(path.read_text(encoding="utf-8")))
        elif path.suffix == ".jsonl":  # one manifest per line (data synthesis output)
            out += [TaskManifest.model_validate_json(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
        else:
            from cuda_agent.harness.tasks import load_task_file

            out.append(load_task_file(path, sizes="cpu" if backend == "cpu" else "full"))
    return out


class KernelEpisodeSource:
    """Episodes of the kernel environment through the agent loop and the ``hf`` policy (or vLLM)."""

    def __init__(self, rt: StageRuntime, *, mode: Literal["agent", "single_turn"], tasks: list[str],
                 max_new_tokens: int, temperature: float, vllm: VLLMActorRollout | None = None,
                 rollout: RolloutSettings | None = None) -> None:
        self.rt = rt
        self.vllm = vllm
        self.rollout = rollout or RolloutSettings()
        self._concurrent: Any = None  # ConcurrentKernelRollouts, built on first use (rollout.concurrency > 1)
        self._tokenizer: Any = None
        self._hf: Any = None  # one hf rollout engine for the stage, weights refreshed per step
        self.mode = mode
        self.tasks = load_tasks(tasks, rt.config.backend)
        self.max_new_tokens = max_new_tokens
        self.temperature = temperature
        if rt.tokenizer_dir is None:
            raise ConfigError("env 'kernel' needs a tokenizer: set 'tokenizer' (a folder) or give 'model' as a folder")

    def run_config(self) -> RunConfig:
        """The agent-loop config of the episodes (the run fields of the TrainConfig, mode forced)."""
        data = {k: getattr(self.rt.config, k) for k in RunConfig.model_fields}
        cfg = RunConfig.model_validate({k: (v.model_dump() if hasattr(v, "model_dump") else v) for k, v in data.items()})
        cfg.agent.mode = self.mode
        return cfg

    def collect(self, actor: Any, n: int, step: int, gen: torch.Generator, group_size: int = 1) -> list[Episode]:
        """Export the actor, run ``n`` episodes (tasks drawn with ``gen``), read their trajectories.

        ``group_size`` > 1: ``n / group_size`` tasks are drawn, each run ``group_size`` times (own sampling seeds);
        every episode's ``meta['group']`` names its task's group."""
        from cuda_agent.loop import run_episode

        if self.vllm is None and self.rollout.concurrency > 1:
            return self._collect_concurrent(actor, n, step, gen, group_size)
        if self.vllm is None:
            engine, version = "hf", actor_version(actor)
            model_dir = export_actor_hf(actor, self.rt.dir / "rollout_model", self.rt.tokenizer_dir)
        else:
            engine, version = "vllm", self.vllm.sync(actor)
            assert self.vllm.model_dir is not None
            model_dir = self.vllm.model_dir
        cfg = self.run_config()
        cfg.policy = f"{engine}:{model_dir}"
        if self.rollout.train_max_turns is not None:
            cfg.agent.max_turns = self.rollout.train_max_turns
        pm = self.rt.ctx.plugin_manager
        episodes = []
        order = self._draw(n, gen, group_size)
        for i, t in enumerate(order):
            seed = stable_seed(self.rt.config.seed, step, i, self.rt.rank) % (2**31)
            policy = self._vllm_policy(model_dir, seed) if self.vllm is not None else self._hf_policy(model_dir, seed, i == 0)
            out = self.rt.dir / "episodes" / f"step_{step:05d}" / (f"{i:03d}" if self.rt.rank == 0 else f"r{self.rt.rank}_{i:03d}")
            run_episode(self.tasks[t], config=cfg, plugin_manager=pm, out_dir=out, policy=policy)
            episodes.append(_grouped(episode_from_trajectory(out / "trajectory.jsonl"), i, group_size))
        return _stamp(episodes, engine, version)

    def _draw(self, n: int, gen: torch.Generator, group_size: int) -> list[int]:
        """Task indices of ``n`` episodes: ``n / group_size`` draws, each repeated ``group_size`` times."""
        if group_size < 1 or n % group_size:
            raise ConfigError(f"{n} episodes cannot be split in groups of {group_size}")
        drawn = torch.randint(0, len(self.tasks), (n // group_size,), generator=gen).tolist()
        return [t for t in drawn for _ in range(group_size)]

    def close(self) -> None:
        """Shut a vLLM engine down and the concurrent rollouts' engine and backends (the stage's close does it too)."""
        if self.vllm is not None:
            self.vllm.close()
        if self._concurrent is not None:
            self._concurrent.close()
            self._concurrent = None

    # -- concurrent rollouts (rollout.concurrency > 1) ---------------------------------------------------
    def concurrent(self) -> Any:
        """The stage's :class:`~cuda_agent.training.stages.kernel_rollouts.ConcurrentKernelRollouts`."""
        if self._concurrent is None:
            from cuda_agent.training.stages.kernel_rollouts import ConcurrentKernelRollouts

            device = "cuda" if torch.cuda.is_available() else "cpu"
            self._concurrent = ConcurrentKernelRollouts(self.run_config(), self.rt.ctx.plugin_manager, self.rollout, device)
            self.rt.on_close(self.close)
        return self._concurrent

    def _params(self, temperature: float | None = None) -> Any:
        from cuda_agent.protocols import SamplingParams

        t = self.temperature if temperature is None else temperature
        return SamplingParams(max_new_tokens=self.max_new_tokens, temperature=t, seed=0)

    def _collect_concurrent(self, actor: Any, n: int, step: int, gen: torch.Generator,
                            group_size: int = 1) -> list[Episode]:
        from cuda_agent.training.stages.kernel_rollouts import EpisodeJob

        version = actor_version(actor)
        model_dir = export_actor_hf(actor, self.rt.dir / "rollout_model", self.rt.tokenizer_dir)
        order = self._draw(n, gen, group_size)
        folder = self.rt.dir / "episodes" / f"step_{step:05d}"
        jobs = [EpisodeJob(self.tasks[t], folder / (f"{i:03d}" if self.rt.rank == 0 else f"r{self.rt.rank}_{i:03d}"),
                           stable_seed(self.rt.config.seed, step, i, self.rt.rank) % (2**31)) for i, t in enumerate(order)]
        self.last_stats = self.concurrent().run(jobs, model_dir, self._params(),
                                                max_turns=self.rollout.train_max_turns)
        episodes = [_grouped(episode_from_trajectory(j.out_dir / "trajectory.jsonl"), i, group_size)
                    for i, j in enumerate(jobs) if (j.out_dir / "trajectory.jsonl").exists()]
        return _stamp(episodes, "hf", version)

    def evaluate(self, model_dir: Path, tasks: list[TaskManifest], folder: Path, repeats: int = 1,
                 temperature: float | None = None, seed: int = 0) -> tuple[list[Path], Any]:
        """Run every task ``repeats`` times with the policy in ``model_dir`` (no training); return the episode
        folders and the collection's stats. Episodes run concurrently when ``rollout.concurrency`` > 1; none starts
        after ``rollout.eval_admit_until`` (``stats.not_admitted`` counts them)."""
        from cuda_agent.training.stages.kernel_rollouts import EpisodeJob

        jobs = [EpisodeJob(t, folder / f"{k:03d}_{j:02d}", stable_seed(seed, "heldout", t.id, j) % (2**31))
                for k, t in enumerate(tasks) for j in range(repeats)]
        stats = self.concurrent().run(jobs, Path(model_dir), self._params(temperature),
                                      admit_until=self.rollout.eval_admit_until)
        return [j.out_dir for j in jobs], stats

    def _hf_policy(self, model_dir: Path, seed: int, refresh: bool) -> Any:
        """A token-level policy over the stage's one ``hf`` engine (loaded once; ``refresh``: new actor weights
        from ``model_dir``), sampling with ``seed``. Same settings as the ``hf`` policy plugin's defaults."""
        from transformers import AutoTokenizer

        from cuda_agent.protocols import SamplingParams
        from cuda_agent.training.rollout.hf_engine import HFRolloutEngine
        from cuda_agent.training.rollout.token_policy import EngineTokenPolicy

        if self._hf is None:
            self._tokenizer = AutoTokenizer.from_pretrained(model_dir)
            device = "cuda" if torch.cuda.is_available() else "cpu"
            self._hf = HFRolloutEngine(model_dir, self._tokenizer, device=device, dtype="float32", batch_size=1)
        elif refresh:
            self._hf.update_weights(model_dir)
        params = SamplingParams(max_new_tokens=self.max_new_tokens, temperature=self.temperature, seed=seed)
        return EngineTokenPolicy(self._hf, self._tokenizer, params)

    def _vllm_policy(self, model_dir: Path, seed: int) -> Any:
        """A token-level policy over the stage's shared vLLM engine (context capped at its max_model_len)."""
        from transformers import AutoTokenizer

        from cuda_agent.protocols import SamplingParams
        from cuda_agent.training.rollout.token_policy import EngineTokenPolicy

        assert self.vllm is not None
        if self._tokenizer is None:
            self._tokenizer = AutoTokenizer.from_pretrained(model_dir)
        params = SamplingParams(max_new_tokens=self.max_new_tokens, temperature=self.temperature, seed=seed)
        return EngineTokenPolicy(self.vllm.engine, self._tokenizer, params,
                                 max_context_tokens=self.vllm.settings.max_model_len)


def _grouped(episode: Episode, index: int, group_size: int) -> Episode:
    """``meta['group']`` of the ``index``-th episode of a grouped draw (nothing when groups are of one)."""
    if group_size > 1:
        episode.meta["group"] = index // group_size
    return episode


def make_source(rt: StageRuntime, env: str, *, mode: Literal["agent", "single_turn"], tasks: list[str],
                max_new_tokens: int, temperature: float,
                rollout: RolloutSettings | None = None) -> ToyEpisodeSource | KernelEpisodeSource:
    """The episode source named ``env``, sampling with ``rollout.engine`` (a vLLM engine closes with the stage)."""
    if env not in ENVIRONMENTS:
        raise ConfigError(f"unknown environment {env!r}; valid: {', '.join(ENVIRONMENTS)}")
    vllm = None
    if rollout is not None and rollout.engine == "vllm":
        vllm = VLLMActorRollout(rt.dir, rollout, rt.tokenizer_dir, zero_stage=rt.config.engine.zero_stage,
                                seed=stable_seed(rt.config.seed, rt.dir.name, "vllm", rt.rank) % (2**31))
        rt.on_close(vllm.close)
    if env in TOY_ENVS:
        return ToyEpisodeSource(env, temperature, vllm)
    return KernelEpisodeSource(rt, mode=mode, tasks=tasks, max_new_tokens=max_new_tokens, temperature=temperature,
                               vllm=vllm, rollout=rollout)


def save_rollouts(rt: StageRuntime, tag: str, episodes: list[Episode]) -> Path:
    """Write a collected batch (tokens, mask, behaviour log-probs, rewards, meta) to ``<stage>/rollouts/<tag>.pt``."""
    folder = rt.dir / "rollouts"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / (f"{tag}.pt" if rt.rank == 0 else f"{tag}.rank{rt.rank}.pt")
    torch.save([asdict(e) for e in episodes], path)
    return path
