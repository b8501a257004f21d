"""DeepSpeed engines: process group, config, actor/critic/reference initialisation.

CPU notes (measured on the 2-core CI machines, DeepSpeed 0.19.8):

- ``deepspeed.initialize`` needs a process group even for one process; we
  create a ``gloo`` one (``nccl`` on GPU) with ``MASTER_ADDR``/``MASTER_PORT``
  defaults when no launcher set them. ``DS_ACCELERATOR=cpu`` is set when no
  CUDA device is visible.
- The CPU accelerator's comm backend JIT-builds a shared-memory all-reduce op
  (``deepspeed_shm_comm``) on first use: 220 s on 2 cores, 21 s per process
  afterwards to load it from ``~/.cache/torch_extensions``. We mark it
  incompatible (``deepspeed.ops.__compatible_ops__``) before the comm backend
  starts, so nothing is built and DeepSpeed's collectives go through
  torch.distributed's gloo backend (fine for CI's tiny models, 1 or 2 processes).
- The client optimizer is torch's AdamW (``fused=True`` on CUDA): DeepSpeed's
  own FusedAdam/CPUAdam would JIT-compile on a fresh machine.
"""

from __future__ import annotations

import os
import socket
from typing import Any, Literal

import structlog
import torch
from torch import nn

from cuda_agent.training.engines.models import enable_gradient_checkpointing

log = structlog.get_logger(__name__)
from cuda_agent.training.settings import EngineSettings


def device_kind() -> str:
    """'cuda' when torch sees a GPU, else 'cpu'."""
    return "cuda" if torch.cuda.is_available() else "cpu"


def resolve_dtype(settings: EngineSettings) -> torch.dtype:
    """The training dtype: bf16 on GPU for 'auto', fp32 on CPU (bf16 is not requested there)."""
    if settings.dtype == "bf16":
        return torch.bfloat16
    if settings.dtype == "fp32":
        return torch.float32
    return torch.bfloat16 if device_kind() == "cuda" else torch.float32


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def ensure_distributed() -> tuple[int, int]:
    """Initialise the process group once (launcher env or single-process defaults); returns (rank, world)."""
    if device_kind() == "cpu":
        os.environ.setdefault("DS_ACCELERATOR", "cpu")
    import deepspeed
    import torch.distributed as dist

    if not dist.is_initialized():
        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        os.environ.setdefault("MASTER_PORT", str(_free_port()))
        os.environ.setdefault("RANK", "0")
        os.environ.setdefault("LOCAL_RANK", "0")
        os.environ.setdefault("WORLD_SIZE", "1")
        if device_kind() == "cpu":
            # Skip the shared-memory all-reduce op: it would JIT-build (220 s on 2 cores); DeepSpeed then
            # falls back to torch.distributed (gloo) collectives, which is all tiny CPU runs need.
            import deepspeed.ops

            deepspeed.ops.__compatible_ops__["deepspeed_shm_comm"] = False
        if device_kind() == "cuda":
            torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
        deepspeed.init_distributed(dist_backend="nccl" if device_kind() == "cuda" else "gloo", verbose=False)
    return dist.get_rank(), dist.get_world_size()


def local_device() -> torch.device:
    """This rank's device."""
    if device_kind() == "cuda":
        return torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
    return torch.device("cpu")


def ds_config(settings: EngineSettings, *, micro_batch: int = 1, train: bool = True) -> dict[str, Any]:
    """The DeepSpeed config dict for an engine."""
    dtype = resolve_dtype(settings)
    stage = settings.zero_stage if train else (3 if settings.zero_stage == 3 else 0)
    cfg: dict[str, Any] = {
        "train_micro_batch_size_per_gpu": micro_batch,
        "gradient_accumulation_steps": 1,
        "zero_optimization": {"stage": stage},
        "bf16": {"enabled": dtype == torch.bfloat16, "check_grad_overflow": settings.overflow_check},
        "steps_per_print": 10**9,
        "wall_clock_breakdown": False,
        # The throughput timer (on by default) synchronises the device at every forward and step to time them for
        # a log line we never print (steps_per_print); off, forward and step stay asynchronous.
        "timers": {"throughput": {"enabled": False}},
    }
    if train:
        cfg["gradient_clipping"] = settings.grad_clip
    if stage in (1, 2):
        # Gradients reduced in big buckets as backward produces them (overlap), into one contiguous buffer.
        cfg["zero_optimization"].update(
            {
                "overlap_comm": device_kind() == "cuda" if settings.zero_overlap_comm == "auto" else settings.zero_overlap_comm == "on",
                "contiguous_gradients": settings.zero_contiguous_gradients,
                "reduce_bucket_size": settings.zero_bucket_size,
                "allgather_bucket_size": settings.zero_bucket_size,
            }
        )
    if train and dtype == torch.bfloat16 and settings.master_weights == "bf16":
        if stage == 0:
            # DeepSpeed's stage-0 bf16 optimizers keep fp32 masters; its native mode (no mixed-precision wrapper)
            # lets the client optimizer step the bf16 module itself (training/engines/native_step.py).
            cfg["bf16"] = {"enabled": False}
        else:
            cfg["bf16"].update({"bf16_master_weights_and_grads": True, "bf16_optimizer_states": True})
    if stage == 3:
        cfg["zero_optimization"].update({"stage3_param_persistence_threshold": 0, "stage3_prefetch_bucket_size": 5e7})
    return cfg


def client_optimizer(model: nn.Module, lr: float, settings: EngineSettings) -> torch.optim.Optimizer:
    """torch AdamW (fused on CUDA) over trainable parameters: nothing JIT-builds."""
    params = [p for p in model.parameters() if p.requires_grad]
    kwargs: dict[str, Any] = {"lr": lr, "betas": settings.betas, "eps": settings.eps, "weight_decay": settings.weight_decay}
    if device_kind() == "cuda":
        kwargs["fused"] = True
    return torch.optim.AdamW(params, **kwargs)


def to_training_dtype(model: nn.Module, dtype: torch.dtype) -> nn.Module:
    """Cast ``model``'s floating parameters to ``dtype`` and leave its buffers as they are.

    ``model.to(dtype=...)`` would cast buffers too: a Llama/Qwen2 RoPE table (``rotary_emb.inv_freq``, fp32 by
    construction) in bf16 is off by up to 0.37% per frequency, so the rotation angle at position 3000 is off by
    radians. The rollout engine loads its weights with ``from_pretrained(dtype=...)``, which keeps that buffer in
    fp32, so the trainer would score a different model from the one that sampled, worse the later the token (on
    the H200, session 24: rollout-vs-trainer log-prob gap 0.049 mean, 16 max). Parameters only is also what
    DeepSpeed's own mixed-precision cast does.
    """
    for p in model.parameters():
        if p.is_floating_point() and p.dtype != dtype:
            p.data = p.data.to(dtype)
    return model


def build_train_engine(model: nn.Module, lr: float, settings: EngineSettings, *, micro_batch: int = 1) -> Any:
    """``deepspeed.initialize`` a trainable model with the client AdamW; returns the engine."""
    ensure_distributed()
    import deepspeed

    if settings.gradient_checkpointing:
        enable_gradient_checkpointing(model, settings.checkpoint_fraction)
    dtype = resolve_dtype(settings)
    model = to_training_dtype(model.to(device=local_device()), dtype)
    opt = client_optimizer(model, lr, settings)
    engine, *_ = deepspeed.initialize(model=model, optimizer=opt, config=ds_config(settings, micro_batch=micro_batch))
    warn_if_partition_misaligned(engine)
    if settings.fused_zero_step and settings.zero_stage in (1, 2):
        from cuda_agent.training.engines.zero_step import install

        install(engine.optimizer)
    elif settings.fused_zero_step and settings.zero_stage == 0:
        from cuda_agent.training.engines import native_step

        native_step.install(engine, overflow_check=settings.overflow_check)
    return engine


def warn_if_partition_misaligned(engine: Any) -> None:
    """Log a warning when a ZeRO-1/2 flat partition's element count is not a multiple of 4: torch's fused AdamW
    and foreach kernels then take their scalar path for the whole partition (1.7-1.9x slower optimizer step on
    the H200). :class:`~cuda_agent.training.engines.models.CriticModel` pads itself; other models are warned."""
    sizes = [int(p.numel()) for p in getattr(engine.optimizer, "single_partition_of_fp32_groups", [])]
    if any(n % 4 for n in sizes):
        log.warning("zero_partition_misaligned", partition_elements=sizes,
                    advice="pad the model's parameter count to a multiple of 4 x data-parallel ranks")


def build_frozen_engine(model: nn.Module, settings: EngineSettings) -> Any:
    """A frozen (reference) model through ``deepspeed.initialize`` without optimizer, in eval mode."""
    ensure_distributed()
    import deepspeed

    model = to_training_dtype(model.to(device=local_device()), resolve_dtype(settings))
    for p in model.parameters():
        p.requires_grad_(False)
    model.eval()
    engine, *_ = deepspeed.initialize(model=model, config=ds_config(settings, train=False))
    engine.eval()
    return engine


def set_learning_rate(engine: Any, lr: float) -> None:
    """Set the learning rate of every param group (schedules call this before a step)."""
    for group in engine.optimizer.param_groups:
        group["lr"] = lr
