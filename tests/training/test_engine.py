"""Real DeepSpeed (ZeRO-2, torch AdamW) on CPU: training, checkpoints, HF export; GPU tests for the bf16/ZeRO-3 path."""

from __future__ import annotations

import pytest
import torch

from cuda_agent.training.engines.checkpoint import export_actor_hf, load_checkpoint, save_checkpoint
from cuda_agent.training.engines.deepspeed_engine import build_frozen_engine, build_train_engine, ds_config
from cuda_agent.training.engines.models import CriticModel, load_causal_lm
from cuda_agent.training.settings import EngineSettings


def _batch(seed: int = 0) -> torch.Tensor:
    return torch.randint(0, 32, (4, 6), generator=torch.Generator().manual_seed(seed))


def _train(engine, ids, steps: int) -> list[float]:
    """``steps`` language-model steps on ``ids``; the losses."""
    losses = []
    for _ in range(steps):
        loss = _lm_loss(engine, ids)
        engine.backward(loss)
        engine.step()
        losses.append(float(loss.detach()))
    return losses


def _tiny_qwen2(layers: int) -> dict:
    """A Qwen2 config small enough for CPU steps in milliseconds (vocabulary 32, hidden 32)."""
    return {"model_type": "qwen2", "vocab_size": 32, "hidden_size": 32, "intermediate_size": 64,
            "num_hidden_layers": layers, "num_attention_heads": 2, "num_key_value_heads": 1}


def _lm_loss(engine, ids):
    logits = engine(input_ids=ids).logits[:, :-1].float()
    return torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), ids[:, 1:].reshape(-1))


def test_zero2_engine_trains_on_cpu_with_client_adamw(toy_config):
    import deepspeed

    engine = build_train_engine(load_causal_lm(toy_config, seed=1), 1e-2, EngineSettings(zero_stage=2))
    assert isinstance(engine, deepspeed.DeepSpeedEngine)
    assert engine.zero_optimization_stage() == 2
    assert isinstance(engine.optimizer.optimizer, torch.optim.AdamW)  # ZeRO wraps the client optimizer
    losses = _train(engine, _batch(), 8)
    assert losses[-1] < losses[0] - 0.5, losses


@pytest.mark.parametrize("settings", [EngineSettings(zero_stage=2),
                                      EngineSettings(zero_stage=0, dtype="bf16", master_weights="bf16")],
                         ids=["zero2", "zero0-native-bf16"])
def test_checkpoint_roundtrip_restores_weights_and_optimizer(toy_config, tmp_path, settings):
    s = settings
    a = build_train_engine(load_causal_lm(toy_config, seed=2), 1e-2, s)
    ids = _batch(1)
    for _ in range(2):
        a.backward(_lm_loss(a, ids))
        a.step()
    save_checkpoint(tmp_path / "ck", 2, {"actor": a}, {"cursor": 7})
    # continue the original for one step
    a.backward(_lm_loss(a, ids))
    a.step()
    want = {k: v.clone() for k, v in a.module.state_dict().items()}
    # a fresh engine from other weights, loaded from the checkpoint, takes the same step
    b = build_train_engine(load_causal_lm(toy_config, seed=99), 1e-2, s)
    state = load_checkpoint(tmp_path / "ck" / "step_2", {"actor": b})
    assert state["step"] == 2 and state["cursor"] == 7
    b.backward(_lm_loss(b, ids))
    b.step()
    got = b.module.state_dict()
    for k in want:
        assert torch.equal(want[k], got[k]), k


def test_export_to_hf_and_critic_and_reference(toy_config, tmp_path):
    from transformers import AutoModelForCausalLM

    s = EngineSettings(zero_stage=2)
    a = build_train_engine(load_causal_lm(toy_config, seed=3), 1e-3, s)
    out = export_actor_hf(a, tmp_path / "hf")
    back = AutoModelForCausalLM.from_pretrained(out)
    ids = _batch(2)
    with torch.no_grad():
        assert torch.allclose(back(input_ids=ids).logits, a.module(input_ids=ids).logits, atol=1e-6)
    critic = build_train_engine(CriticModel(load_causal_lm(toy_config, seed=3)), 1e-3, s)
    v = critic(ids, torch.ones_like(ids))
    assert v.shape == ids.shape and torch.count_nonzero(v) == 0  # zero-initialised head
    ref = build_frozen_engine(load_causal_lm(toy_config, seed=3), s)
    assert not any(p.requires_grad for p in ref.module.parameters())


@pytest.mark.parametrize("stage", [1, 2])
def test_critic_partition_is_vectorisable_and_its_pad_stays_zero(stage):
    """The scalar head's one-element bias made the critic's flat ZeRO partition odd-sized (torch's fused AdamW and
    foreach kernels then run their scalar path: 1.7-1.9x slower step on the H200); the pad keeps it a multiple of
    PARAMETER_ALIGNMENT, takes no part in the values, and stays zero while the critic learns."""
    from cuda_agent.training.engines.models import PARAMETER_ALIGNMENT, count_parameters

    cfg = _tiny_qwen2(layers=1)
    unpadded = count_parameters(load_causal_lm(cfg, seed=0).base_model) + cfg["hidden_size"] + 1
    assert unpadded % 4 != 0  # the case that was slow: without the pad this critic's partition is misaligned
    critic = build_train_engine(CriticModel(load_causal_lm(cfg, seed=0)), 1e-2, EngineSettings(zero_stage=stage))
    assert count_parameters(critic.module) % PARAMETER_ALIGNMENT == 0
    assert [p.numel() % 4 for p in critic.optimizer.single_partition_of_fp32_groups] == [0]
    # DeepSpeed moved every parameter into its flat buffer in parameter order: each backbone weight still starts on
    # a 16-byte boundary (an odd-sized pad listed first had shifted them all: a 4x slower forward on the H200), and
    # the head's tensors come last.
    names = [n for n, _ in critic.module.named_parameters()]
    assert names[-3:] == ["value_head.weight", "value_head.bias", "value_head.pad"]
    misaligned = [n for n, p in critic.module.named_parameters() if n.startswith("backbone.") and p.data_ptr() % 16]
    assert misaligned == []
    ids = _batch(4)
    target = torch.linspace(-1, 1, ids.shape[1]).expand(ids.shape[0], -1)
    losses = []
    for _ in range(10):
        loss = ((critic(ids, torch.ones_like(ids)) - target) ** 2).mean()
        critic.backward(loss)
        critic.step()
        losses.append(float(loss.detach()))
    assert losses[-1] < losses[0] * 0.8, losses
    assert torch.count_nonzero(critic.module.value_head.pad) == 0
    assert torch.count_nonzero(critic.module.value_head.weight) > 0


def test_ds_config_dtype_and_stage():
    cfg = ds_config(EngineSettings(zero_stage=3, dtype="bf16"))
    assert cfg["bf16"]["enabled"] is True and cfg["zero_optimization"]["stage"] == 3
    assert ds_config(EngineSettings(zero_stage=2), train=False)["zero_optimization"]["stage"] == 0


@pytest.mark.gpu
@pytest.mark.parametrize("stage", [2, 3])
def test_bf16_zero_gpu_engine_trains_and_exports(stage, tmp_path):
    from transformers import AutoModelForCausalLM

    cfg = {"model_type": "qwen2", "vocab_size": 512, "hidden_size": 128, "intermediate_size": 256,
           "num_hidden_layers": 2, "num_attention_heads": 2, "num_key_value_heads": 1, "max_position_embeddings": 256}
    s = EngineSettings(zero_stage=stage, dtype="auto", gradient_checkpointing=True)
    engine = build_train_engine(load_causal_lm(cfg, seed=0), 1e-3, s)
    assert next(engine.module.parameters()).dtype == torch.bfloat16
    assert engine.optimizer.optimizer.defaults.get("fused") is True
    ids = torch.randint(0, 512, (2, 64), device="cuda")
    losses = _train(engine, ids, 6)
    assert losses[-1] < losses[0]
    out = export_actor_hf(engine, tmp_path / "hf")
    back = AutoModelForCausalLM.from_pretrained(out)
    assert sum(p.numel() for p in back.parameters()) > 0
    assert all(p.abs().sum() > 0 for n, p in back.named_parameters() if "norm" not in n)


def test_ds_config_buckets_for_zero_1_and_2():
    cfg = ds_config(EngineSettings(zero_stage=2, zero_bucket_size=123_000_000))["zero_optimization"]
    assert cfg["reduce_bucket_size"] == cfg["allgather_bucket_size"] == 123_000_000
    assert cfg["contiguous_gradients"] is True
    assert "reduce_bucket_size" not in ds_config(EngineSettings(zero_stage=3))["zero_optimization"]


def test_ds_config_overlap_and_contiguous_gradients_follow_the_settings():
    auto = ds_config(EngineSettings(zero_stage=1))["zero_optimization"]
    assert auto["overlap_comm"] is False and auto["contiguous_gradients"] is True  # 'auto' on CPU: no side stream
    cfg = ds_config(EngineSettings(zero_stage=1, zero_overlap_comm="on", zero_contiguous_gradients=False))["zero_optimization"]
    assert cfg["overlap_comm"] is True and cfg["contiguous_gradients"] is False
    assert ds_config(EngineSettings(zero_stage=2, zero_overlap_comm="off"))["zero_optimization"]["overlap_comm"] is False
    with pytest.raises(ValueError, match="zero_overlap_comm"):
        EngineSettings(zero_overlap_comm="yes")


def test_bf16_master_weights_keep_optimizer_state_in_bf16_and_train():
    cfg = _tiny_qwen2(layers=2)
    ids = _batch()
    dtypes = {}
    for masters in ("fp32", "bf16"):
        engine = build_train_engine(load_causal_lm(cfg, seed=1), 1e-2, EngineSettings(zero_stage=2, dtype="bf16", master_weights=masters))
        losses = _train(engine, ids, 6)
        assert losses[-1] < losses[0] - 0.3, (masters, losses)
        masters_dtype = {g.dtype for g in engine.optimizer.single_partition_of_fp32_groups}
        adam_dtype = {s["exp_avg"].dtype for s in engine.optimizer.optimizer.state.values()}
        dtypes[masters] = (masters_dtype, adam_dtype)
    assert dtypes["fp32"] == ({torch.float32}, {torch.float32})
    assert dtypes["bf16"] == ({torch.bfloat16}, {torch.bfloat16})


def test_bf16_master_weights_at_stage_0_run_deepspeeds_native_mode():
    # DeepSpeed's stage-0 bf16 optimizers keep fp32 masters: bf16 masters there mean no mixed-precision wrapper
    assert ds_config(EngineSettings(zero_stage=0, dtype="bf16", master_weights="bf16"))["bf16"] == {"enabled": False}
    assert ds_config(EngineSettings(zero_stage=0, dtype="bf16", master_weights="fp32"))["bf16"]["enabled"] is True
    # fp32 runs (the CPU default) are untouched by the setting
    assert "bf16_master_weights_and_grads" not in ds_config(EngineSettings(zero_stage=2, dtype="fp32", master_weights="bf16"))["bf16"]
    engine = build_train_engine(load_causal_lm(_tiny_qwen2(layers=2), seed=1), 1e-2,
                                EngineSettings(zero_stage=0, dtype="bf16", master_weights="bf16"))
    assert engine.optimizer is engine.basic_optimizer and isinstance(engine.optimizer, torch.optim.AdamW)
    assert {p.dtype for p in engine.module.parameters()} == {torch.bfloat16}
    losses = _train(engine, _batch(), 6)
    assert losses[-1] < losses[0] - 0.3, losses
    assert {s["exp_avg"].dtype for s in engine.optimizer.state.values()} == {torch.bfloat16}


@pytest.mark.parametrize("fraction,recomputed", [(1.0, [0, 1, 2, 3]), (0.5, [0, 2]), (0.25, [0])])
def test_checkpoint_fraction_recomputes_only_chosen_layers_with_the_same_gradients(fraction, recomputed):
    from cuda_agent.training.engines.models import enable_gradient_checkpointing

    cfg = _tiny_qwen2(layers=4)
    ids = _batch()
    grads = []
    for ckpt in (False, True):
        model = load_causal_lm(cfg, seed=3)
        model.train()
        if ckpt:
            assert enable_gradient_checkpointing(model, fraction) == len(recomputed)
        calls = [0] * 4
        for i, layer in enumerate(model.model.layers):
            layer.register_forward_pre_hook(lambda *_a, i=i: calls.__setitem__(i, calls[i] + 1))
        _lm_loss(model, ids).backward()
        grads.append({n: p.grad.clone() for n, p in model.named_parameters()})
        want = [2 if (ckpt and i in recomputed) else 1 for i in range(4)]  # a recomputed layer runs again in backward
        assert calls == want, (ckpt, calls)
    for n in grads[0]:
        torch.testing.assert_close(grads[0][n], grads[1][n], rtol=1e-5, atol=1e-6, msg=n)


def test_checkpoint_fraction_out_of_range_is_refused():
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="checkpoint_fraction"):
        EngineSettings(checkpoint_fraction=0)


@pytest.mark.parametrize("check", [True, False])
def test_overflow_check_skips_a_non_finite_step_only_when_on(check):
    cfg = _tiny_qwen2(layers=2)
    engine = build_train_engine(load_causal_lm(cfg, seed=1), 1e-2, EngineSettings(zero_stage=2, dtype="bf16", overflow_check=check))
    before = {n: p.detach().clone() for n, p in engine.module.named_parameters()}
    loss = engine(input_ids=_batch()).logits.float().sum() * float("nan")
    engine.backward(loss)
    engine.step()
    finite = all(bool(torch.isfinite(p).all()) for p in engine.module.parameters())
    unchanged = all(torch.equal(before[n], p) for n, p in engine.module.named_parameters())
    assert (finite and unchanged) if check else not finite


def _fused_vs_deepspeed_run(fused: bool, stage: int, masters: str, clip: float, device: str = "cpu", **extra) -> dict:
    """Six steps of a tiny bf16 Qwen2 on DeepSpeed: a NaN loss at step 3, an inf in one gradient element at step 4."""
    cfg = _tiny_qwen2(layers=2)
    s = EngineSettings(zero_stage=stage, dtype="bf16", master_weights=masters, grad_clip=clip, fused_zero_step=fused, **extra)
    engine = build_train_engine(load_causal_lm(cfg, seed=1), 1e-2, s)
    ids = _batch().to(device)
    weight = engine.module.model.layers[0].mlp.down_proj.weight
    norms = []
    for k in range(6):
        loss = _lm_loss(engine, ids)
        if k == 3:
            loss = loss * float("nan")
        hook = weight.register_hook(lambda g: g.index_fill(0, torch.tensor([0], device=g.device), float("inf"))) if k == 4 else None
        engine.backward(loss)
        if hook is not None:
            hook.remove()
        engine.step()
        norms.append(float(engine.get_global_grad_norm()))
    state = [v.clone() for st in engine.optimizer.optimizer.state.values() for v in st.values() if torch.is_tensor(v)]
    return {"class": type(engine.optimizer).__name__, "norms": norms, "skipped": engine.skipped_steps, "state": state,
            "masters": [g.detach().clone() for g in engine.optimizer.single_partition_of_fp32_groups],
            "params": {n: p.detach().clone() for n, p in engine.module.named_parameters()}}


def _assert_same_run(a: dict, b: dict) -> None:
    assert a["norms"] == b["norms"]  # inf on the two skipped steps
    assert a["skipped"] == b["skipped"] == 2
    assert all(torch.equal(x, y) for x, y in zip(a["masters"], b["masters"]))
    assert len(a["state"]) == len(b["state"]) and all(torch.equal(x, y) for x, y in zip(a["state"], b["state"]))
    for n in a["params"]:
        assert torch.equal(a["params"][n], b["params"][n]), n


@pytest.mark.parametrize("stage,masters,clip", [(1, "fp32", 0.05), (1, "bf16", 0.05), (2, "fp32", 0.05),
                                                (2, "bf16", 0.05), (2, "fp32", 1e3)])
def test_fused_zero_step_matches_deepspeed_step_bit_for_bit(stage, masters, clip):
    # clip 0.05: every applied step is clipped (norms ~2); clip 1e3: none is (the multiply is skipped)
    plain = _fused_vs_deepspeed_run(False, stage, masters, clip)
    fused = _fused_vs_deepspeed_run(True, stage, masters, clip)
    assert (plain["class"], fused["class"]) == ("DeepSpeedZeroOptimizer", "FusedStepZeroOptimizer")
    assert fused["norms"][3] == fused["norms"][4] == float("inf")
    assert all(0 < n < float("inf") for i, n in enumerate(fused["norms"]) if i not in (3, 4))
    _assert_same_run(plain, fused)


@pytest.mark.parametrize("stage", [1, 2])
def test_gradient_layout_settings_do_not_change_the_arithmetic(stage):
    """Without contiguous gradients DeepSpeed reduces from each parameter's own .grad, not from its bucket buffer:
    the same six steps (skipped ones included), bit for bit."""
    contiguous = _fused_vs_deepspeed_run(True, stage, "fp32", 0.05)
    separate = _fused_vs_deepspeed_run(True, stage, "fp32", 0.05, zero_contiguous_gradients=False, zero_overlap_comm="off")
    _assert_same_run(contiguous, separate)


@pytest.mark.parametrize("stage", [0, 2])
def test_fused_zero_step_matches_on_fp32_without_bf16(stage):
    # stage 0 in fp32 is DeepSpeed's native mode as well (no mixed-precision wrapper): native_step applies
    a, b = (build_train_engine(load_causal_lm(_tiny_qwen2(layers=2), seed=1), 1e-2,
                               EngineSettings(zero_stage=stage, dtype="fp32", grad_clip=0.05, fused_zero_step=f)) for f in (False, True))
    if stage == 0:
        assert (a.enable_backward_allreduce, b.enable_backward_allreduce) == (True, False)
    ids = _batch()
    assert _train(a, ids, 4) == _train(b, ids, 4)
    assert all(torch.equal(p, q) for p, q in zip(a.module.parameters(), b.module.parameters()))


def test_fused_zero_step_issues_a_fraction_of_deepspeeds_operators():
    from torch.profiler import ProfilerActivity, profile

    counts = {}
    for fused in (False, True):
        engine = build_train_engine(load_causal_lm(_tiny_qwen2(layers=8), seed=1), 1e-2,
                                    EngineSettings(zero_stage=2, dtype="bf16", fused_zero_step=fused))
        _train(engine, _batch(), 1)
        engine.backward(_lm_loss(engine, _batch()))
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            engine.step()
        counts[fused] = sum(e.count for e in prof.key_averages() if e.key.startswith("aten::"))
    # 99 tensors: DeepSpeed ~55 ops per tensor (overflow scan, fp64 copy + norm), fused ~11 (CPU's foreach_norm loop)
    assert counts[True] < counts[False] / 3, counts


def test_fused_zero_step_repoints_parameters_that_moved():
    engine = build_train_engine(load_causal_lm(_tiny_qwen2(layers=2), seed=1), 1e-2,
                                EngineSettings(zero_stage=2, dtype="bf16", fused_zero_step=True))
    flat = engine.optimizer.bit16_groups_flat[0]
    _train(engine, _batch(), 1)
    p = engine.optimizer.bit16_groups[0][1]
    p.data = p.data.clone()  # no longer a view of the flat buffer: the next step must re-point it
    _train(engine, _batch(), 1)
    start, end = flat.data_ptr(), flat.data_ptr() + flat.numel() * flat.element_size()
    assert all(start <= q.data_ptr() < end for q in engine.optimizer.bit16_groups[0])


def test_fused_zero_step_applies_to_zero_1_and_2_only():
    from cuda_agent.training.engines.zero_step import install

    assert install(torch.optim.AdamW([torch.nn.Parameter(torch.zeros(2))])) is False
    off = build_train_engine(load_causal_lm(_tiny_qwen2(layers=1), seed=1), 1e-2,
                             EngineSettings(zero_stage=2, dtype="bf16", fused_zero_step=False))
    assert type(off.optimizer).__name__ == "DeepSpeedZeroOptimizer"
    assert ds_config(EngineSettings())["timers"] == {"throughput": {"enabled": False}}  # no device sync per forward


@pytest.mark.gpu
@pytest.mark.parametrize("stage,masters", [(1, "fp32"), (2, "bf16")])
def test_fused_zero_step_matches_deepspeed_step_on_cuda(stage, masters):
    # CUDA runs the fused kernels (multi-tensor norm and multiply) the CPU tests cannot reach
    _assert_same_run(_fused_vs_deepspeed_run(False, stage, masters, 0.05, "cuda"),
                     _fused_vs_deepspeed_run(True, stage, masters, 0.05, "cuda"))


@pytest.mark.gpu
@pytest.mark.parametrize("stage", [1, 2])
def test_gradient_layout_settings_do_not_change_the_arithmetic_on_cuda(stage):
    # on CUDA 'on' reduces on DeepSpeed's side stream while backward runs; off and without the bucket buffer: same run
    overlapped = _fused_vs_deepspeed_run(True, stage, "bf16", 0.05, "cuda", zero_overlap_comm="on")
    separate = _fused_vs_deepspeed_run(True, stage, "bf16", 0.05, "cuda", zero_overlap_comm="off",
                                       zero_contiguous_gradients=False)
    _assert_same_run(overlapped, separate)


def _native_engine(s: EngineSettings, fused_adamw: bool):
    """A native-mode engine; ``fused_adamw`` builds it around torch's fused AdamW on CPU too (CUDA's client optimizer),
    the optimizer whose ``found_inf`` lets the clip run without a host sync."""
    if not fused_adamw:
        return build_train_engine(load_causal_lm(_tiny_qwen2(layers=2), seed=1), 1e-2, s)
    import deepspeed

    from cuda_agent.training.engines import native_step
    from cuda_agent.training.engines.deepspeed_engine import ensure_distributed

    ensure_distributed()
    model = load_causal_lm(_tiny_qwen2(layers=2), seed=1).to(torch.bfloat16)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2, betas=s.betas, eps=s.eps, weight_decay=0.0, fused=True)
    engine, *_ = deepspeed.initialize(model=model, optimizer=opt, config=ds_config(s))
    if s.fused_zero_step:
        assert native_step.install(engine, overflow_check=s.overflow_check)
    return engine


def _native_run(fused: bool, clip: float, device: str = "cpu", nan_step: int | None = None, fused_adamw: bool = False,
                **extra) -> dict:
    """Five steps of a tiny bf16 Qwen2 in DeepSpeed's native mode (ZeRO 0, bf16 masters), optionally a NaN loss."""
    s = EngineSettings(zero_stage=0, dtype="bf16", master_weights="bf16", grad_clip=clip, fused_zero_step=fused, **extra)
    engine = _native_engine(s, fused_adamw)
    ids = _batch().to(device)
    norms, losses = [], []
    for k in range(5):
        loss = _lm_loss(engine, ids)
        if k == nan_step:
            loss = loss * float("nan")
        engine.backward(loss)
        engine.step()
        losses.append(float(loss.detach()))
        norm = engine.get_global_grad_norm()
        norms.append(None if norm is None else float(norm))
    state = [v.clone() for st in engine.optimizer.state.values() for v in st.values() if torch.is_tensor(v)]
    return {"engine": engine, "norms": norms, "losses": losses, "state": state,
            "params": {n: p.detach().clone() for n, p in engine.module.named_parameters()}}


@pytest.mark.parametrize("fused_adamw", [False, True], ids=["host-path", "device-path"])
@pytest.mark.parametrize("clip", [0.05, 1e3])
def test_native_stage0_step_matches_deepspeed_bit_for_bit(clip, fused_adamw):
    # clip 0.05: every step is clipped (norms ~2); 1e3: nothing is clipped (the host path skips the multiply by 1).
    # The device path (fused AdamW) is what CUDA runs; on CPU its fp32 factor gives DeepSpeed's products exactly.
    ds, fused = _native_run(False, clip, fused_adamw=fused_adamw), _native_run(True, clip, fused_adamw=fused_adamw)
    assert ds["engine"].enable_backward_allreduce is True and fused["engine"].enable_backward_allreduce is False
    assert ds["losses"] == fused["losses"]
    for n in ds["params"]:
        assert torch.equal(ds["params"][n], fused["params"][n]), n
    assert len(ds["state"]) == len(fused["state"]) and all(torch.equal(x, y) for x, y in zip(ds["state"], fused["state"]))
    assert ds["norms"] == [None] * 5  # DeepSpeed's native mode keeps no norm; ours reports the clip's
    assert all(1.0 < n < 5.0 for n in fused["norms"]), fused["norms"]


def test_native_stage0_norm_is_deepspeeds_clip_norm():
    from deepspeed.runtime.utils import clip_grad_norm_

    fused = _native_run(True, 1e3)["engine"]
    fused.backward(_lm_loss(fused, _batch()))
    grads = [p.grad.clone() for p in fused.module.parameters()]
    want = float(clip_grad_norm_(list(fused.module.parameters()), 1e3))
    for p, g in zip(fused.module.parameters(), grads):
        p.grad = g
    fused.step()
    assert fused.get_global_grad_norm() == want


def test_native_stage0_backward_copies_no_gradient_at_one_rank():
    # DeepSpeed's one-rank all-reduce flattens every gradient (one cat) and copies each back; skipped, backward
    # leaves the gradients where autograd put them
    from torch.profiler import ProfilerActivity, profile

    counts = {}
    for fused in (False, True):
        engine = _native_run(fused, 1e3)["engine"]
        loss = _lm_loss(engine, _batch())
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            engine.backward(loss)
        counts[fused] = {k: sum(e.count for e in prof.key_averages() if e.key == k) for k in ("aten::cat", "aten::copy_")}
        engine.step()
    assert counts[False]["aten::cat"] >= 1 and counts[True]["aten::cat"] == 0, counts
    assert counts[True]["aten::copy_"] < counts[False]["aten::copy_"], counts


@pytest.mark.parametrize("fused_adamw", [False, True], ids=["host-path", "device-path"])
@pytest.mark.parametrize("check", [True, False])
def test_native_stage0_overflow_check_skips_a_non_finite_step(check, fused_adamw):
    from cuda_agent.training.engines import native_step

    run = _native_run(True, 0.05, nan_step=2, overflow_check=check, fused_adamw=fused_adamw)
    ref = _native_run(False, 0.05, nan_step=2, fused_adamw=fused_adamw)  # DeepSpeed's native mode applies it
    finite = all(bool(torch.isfinite(p).all()) for p in run["params"].values())
    if check:
        assert finite and native_step.settle(run["engine"]) == 1 and run["norms"][2] == float("inf")
        assert all(n < float("inf") for i, n in enumerate(run["norms"]) if i != 2)
        # the skipped step left the Adam step counts alone: 4 applied steps of 5
        steps = {float(st["step"]) for st in run["engine"].optimizer.state.values()}
        assert steps == {4.0}, steps
        # and otherwise the run of a model that never took that step: losses after it are one step behind
        clean = _native_run(True, 0.05, overflow_check=check, fused_adamw=fused_adamw)
        assert run["losses"][:2] == clean["losses"][:2] and run["losses"][3:] == clean["losses"][2:4]
    else:
        assert not finite and native_step.settle(run["engine"]) == 0
        assert all(torch.equal(run["params"][n], ref["params"][n], ) or torch.isnan(ref["params"][n]).any()
                   for n in ref["params"])


NATIVE_RANK = """
import json, os, sys, torch
from cuda_agent.training.engines.deepspeed_engine import build_train_engine
from cuda_agent.training.engines.models import load_causal_lm
from cuda_agent.training.settings import EngineSettings
cfg = json.loads(sys.argv[1])
engine = build_train_engine(load_causal_lm(cfg, seed=1), 1e-2, EngineSettings(zero_stage=0, dtype="bf16",
                            master_weights="bf16", grad_clip=0.05))
ids = torch.randint(0, 32, (4, 6), generator=torch.Generator().manual_seed(int(os.environ["RANK"])))
logits = engine(input_ids=ids).logits[:, :-1].float()
engine.backward(torch.nn.functional.cross_entropy(logits.reshape(-1, 32), ids[:, 1:].reshape(-1)))
grads = [p.grad.float().sum().item() for p in engine.module.parameters()]
engine.step()
print(json.dumps({"allreduce": engine.enable_backward_allreduce, "grads": grads,
                  "params": [p.float().sum().item() for p in engine.module.parameters()]}))
"""


@pytest.mark.slow
def test_native_stage0_still_averages_gradients_over_two_ranks():
    import json
    import os
    import socket
    import subprocess
    import sys

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    procs = [subprocess.Popen([sys.executable, "-c", NATIVE_RANK, json.dumps(_tiny_qwen2(layers=1))],
                              env={**os.environ, "RANK": str(r), "LOCAL_RANK": str(r), "WORLD_SIZE": "2",
                                   "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "OMP_NUM_THREADS": "1"},
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for r in range(2)]
    outs = []
    for p in procs:
        out, err = p.communicate(timeout=600)
        assert p.returncode == 0, err[-3000:]
        outs.append(json.loads(out.strip().splitlines()[-1]))
    assert [o["allreduce"] for o in outs] == [True, True]
    assert outs[0]["grads"] == outs[1]["grads"]  # averaged: the two ranks saw different batches
    assert outs[0]["params"] == outs[1]["params"]


@pytest.mark.gpu
def test_native_stage0_step_matches_deepspeed_on_cuda_when_nothing_is_clipped():
    # CUDA's device path: multi-tensor fp32 norm, a factor of exactly 1 multiplied on device, found_inf unset
    ds, fused = _native_run(False, 1e3, "cuda"), _native_run(True, 1e3, "cuda")
    assert fused["engine"].optimizer.defaults.get("fused") is True
    assert ds["losses"] == fused["losses"]
    for n in ds["params"]:
        assert torch.equal(ds["params"][n], fused["params"][n]), n
    assert all(torch.equal(x, y) for x, y in zip(ds["state"], fused["state"]))


@pytest.mark.gpu
def test_native_stage0_clip_on_cuda_multiplies_by_the_bf16_factor():
    # bf16 gradients on CUDA: g x bf16(factor) in one multi-tensor kernel (DeepSpeed's native loop: g x fp32 factor)
    from deepspeed.runtime.utils import clip_grad_norm_

    engine = _native_run(True, 0.05, "cuda")["engine"]
    engine.backward(_lm_loss(engine, _batch().to("cuda")))
    before = [p.grad.clone() for p in engine.module.parameters()]
    want_norm = float(clip_grad_norm_(_with_grads(engine.module, before), 1e9))
    seen = []
    hook = engine.optimizer.register_step_pre_hook(lambda opt, *_: seen.append([p.grad.clone() for p in engine.module.parameters()]))
    engine.step()
    hook.remove()
    norm = float(engine.get_global_grad_norm())
    assert norm == pytest.approx(want_norm, rel=1e-5)
    total = torch.tensor(norm, device="cuda")
    factor = torch.min(torch.tensor([1.0], device="cuda"), torch.tensor([0.05], device="cuda") / (total + 1e-6))
    assert float(factor) < 1.0
    for g0, g1 in zip(before, seen[0]):
        assert torch.equal(g1, g0 * factor.reshape(()).to(torch.bfloat16))


def _with_grads(module, grads):
    """Copies of ``module``'s parameters carrying ``grads`` (for DeepSpeed's own clip_grad_norm_ to read)."""
    out = []
    for p, g in zip(module.parameters(), grads):
        q = torch.nn.Parameter(p.detach().clone())
        q.grad = g.clone()
        out.append(q)
    return out


@pytest.mark.gpu
def test_native_stage0_skips_a_non_finite_step_on_cuda_without_waiting():
    from cuda_agent.training.engines import native_step

    run = _native_run(True, 0.05, "cuda", nan_step=2)
    clean = _native_run(True, 0.05, "cuda")
    assert native_step.settle(run["engine"]) == 1 and run["norms"][2] == float("inf")
    assert {float(st["step"]) for st in run["engine"].optimizer.state.values()} == {4.0}
    assert run["losses"][:2] == clean["losses"][:2] and run["losses"][3:] == clean["losses"][2:4]


@pytest.mark.parametrize("settings", [EngineSettings(zero_stage=0, dtype="bf16", master_weights="bf16"),
                                      EngineSettings(zero_stage=2, dtype="bf16")], ids=["zero0-native", "zero2"])
def test_bf16_trainer_scores_the_model_the_rollout_engine_samples(tmp_path, settings):
    """The trainer's bf16 module keeps the RoPE table in fp32 like ``from_pretrained(dtype=bf16)`` (the rollout
    engine's load): casting buffers made the two models differ more the later the position."""
    from transformers import AutoModelForCausalLM

    from cuda_agent.training.logprobs import token_logprobs

    cfg = {"model_type": "llama", "vocab_size": 64, "hidden_size": 64, "intermediate_size": 128,
           "num_hidden_layers": 2, "num_attention_heads": 2, "num_key_value_heads": 2, "max_position_embeddings": 4096}
    load_causal_lm(cfg, seed=3).save_pretrained(str(tmp_path / "m"))
    trainer = build_train_engine(load_causal_lm(tmp_path / "m"), 1e-3, settings).module
    sampler = AutoModelForCausalLM.from_pretrained(str(tmp_path / "m"), dtype=torch.bfloat16).eval()
    trainer_buffers = dict(trainer.named_buffers())
    for name, buf in sampler.named_buffers():
        assert trainer_buffers[name].dtype == buf.dtype and torch.equal(trainer_buffers[name], buf), name
    assert {p.dtype for p in trainer.parameters()} == {torch.bfloat16}
    ids = torch.randint(0, 64, (1, 3000), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        gap = (token_logprobs(trainer, ids) - token_logprobs(sampler, ids)).abs()
    assert float(gap.max()) == 0.0, f"trainer vs sampler log-prob gap {float(gap.max()):.3g}"
