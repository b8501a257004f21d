"""Adam's moments carried between runs (training/engines/moments.py): real DeepSpeed engines on CPU, real AdamW."""

from __future__ import annotations

import math

import pytest
import torch

from cuda_agent.training.engines.deepspeed_engine import build_train_engine
from cuda_agent.training.engines.models import load_causal_lm
from cuda_agent.training.engines.moments import (
    BLOCK,
    AdamMoments,
    load_moments,
    pack,
    read_moments,
    read_moments_file,
    save_moments,
    unpack,
    write_moments,
)
from cuda_agent.training.settings import EngineSettings

SETTINGS = [EngineSettings(zero_stage=1), EngineSettings(zero_stage=2), EngineSettings(zero_stage=0),
            EngineSettings(zero_stage=0, dtype="bf16", master_weights="bf16")]
IDS = ["zero1", "zero2", "zero0", "zero0-native-bf16"]


def _batch(seed: int) -> torch.Tensor:
    return torch.randint(0, 32, (4, 6), generator=torch.Generator().manual_seed(seed))


def _step(engine, ids) -> None:
    logits = engine(input_ids=ids).logits[:, :-1].float()
    loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), ids[:, 1:].reshape(-1))
    engine.backward(loss)
    engine.step()


def _weights(engine) -> dict[str, torch.Tensor]:
    return {k: v.detach().float().clone() for k, v in engine.module.state_dict().items()}


def _update_error(before, after_ref, after_got) -> float:
    """|| got's update - the reference's update || / || the reference's update ||, over all weights."""
    num = sum(float(((after_got[k] - before[k]) - (after_ref[k] - before[k])).norm() ** 2) for k in before)
    den = sum(float((after_ref[k] - before[k]).norm() ** 2) for k in before)
    return math.sqrt(num / den)


def test_packing_keeps_the_update_direction_and_zeros_within_its_stated_error():
    g = torch.Generator().manual_seed(0)
    n = 5 * BLOCK + 17  # a partial last block
    s = torch.exp2(torch.empty(n).uniform_(-30, 0, generator=g))  # the gradient's RMS over 30 octaves
    s[:300] = 0.0  # never had a gradient: must stay exactly zero
    r = torch.empty(n).uniform_(-3, 3, generator=g)
    m, v = r * s, s * s
    moments = AdamMoments({"w": m.view(-1, 1)}, {"w": v.view(-1, 1)}, {"w": 7})
    tensors, meta = pack(moments, {"actor_steps": "12"})
    back = unpack(tensors, meta)
    assert back.steps == {"w": 7} and meta["actor_steps"] == "12"
    assert back.exp_avg["w"].shape == (n, 1)
    bm, bv = back.exp_avg["w"].view(-1), back.exp_avg_sq["w"].view(-1)
    assert torch.equal(bm[:300], torch.zeros(300)) and torch.equal(bv[:300], torch.zeros(300))
    nz = s > 0
    bs = bv.sqrt()
    # s: half a code step of a block's log range (at most 30 octaves) / 254
    assert float((torch.log2(bs[nz]) - torch.log2(s[nz])).abs().max()) <= 30 / 254 / 2 + 1e-4
    # the normalised momentum m / s (Adam's update direction): at most max|r| / 254 off
    assert float((bm[nz] / bs[nz] - r[nz]).abs().max()) <= 3 / 254 + 1e-4
    packed = sum(t.numel() * t.element_size() for t in tensors.values())
    assert packed < 2.1 * n  # about two bytes a weight


def test_pack_refuses_reserved_metadata_and_unpack_refuses_other_formats():
    moments = AdamMoments({"w": torch.ones(3)}, {"w": torch.ones(3)}, {"w": 1})
    with pytest.raises(ValueError, match="reserved"):
        pack(moments, {"steps": "3"})
    tensors, meta = pack(moments)
    with pytest.raises(ValueError, match="format"):
        unpack(tensors, {**meta, "format": "something-else/1"})


@pytest.mark.parametrize("settings", SETTINGS, ids=IDS)
def test_a_step_after_carrying_the_moments_is_the_step_the_original_engine_takes(toy_config, tmp_path, settings):
    lr = 1e-2
    a = build_train_engine(load_causal_lm(toy_config, seed=2), lr, settings)
    for k in range(3):
        _step(a, _batch(k))
    path = save_moments(a, tmp_path / "m.safetensors", {"actor_steps": "3"})
    assert path.stat().st_size < 2.3 * sum(p.numel() for p in a.module.parameters()) + 50_000
    carried_from = _weights(a)
    state = {k: v.clone() for k, v in a.module.state_dict().items()}

    def continued(with_moments: bool):
        model = load_causal_lm(toy_config, seed=99)
        model.load_state_dict({k: v.to(model.state_dict()[k].dtype) for k, v in state.items()})
        e = build_train_engine(model, lr, settings)
        if with_moments:
            meta = load_moments(e, path)
            assert meta["actor_steps"] == "3"
            assert set(read_moments(e).steps.values()) == {3}
        _step(e, _batch(10))
        return _weights(e)

    _step(a, _batch(10))
    want = _weights(a)
    carried = _update_error(carried_from, want, continued(True))
    fresh = _update_error(carried_from, want, continued(False))
    assert carried < 0.05, (carried, fresh)
    assert fresh > 0.3, (carried, fresh)  # what a run without them takes instead: a different step


@pytest.mark.parametrize("settings", SETTINGS[:1] + SETTINGS[2:3], ids=["zero1", "zero0"])
def test_moments_read_by_name_match_the_optimizer_state(toy_config, settings):
    e = build_train_engine(load_causal_lm(toy_config, seed=3), 1e-2, settings)
    assert read_moments(e).exp_avg == {}  # no step yet: AdamW has no state
    _step(e, _batch(0))
    moments = read_moments(e)
    params = dict(e.module.named_parameters())
    assert set(moments.exp_avg) == {n for n, p in params.items() if p.requires_grad}
    for n, p in params.items():
        assert moments.exp_avg[n].shape == p.shape
        # after one step from zero: m = (1 - beta1) g and v = (1 - beta2) g^2, so m^2 / v = (1 - b1)^2 / (1 - b2)
        big = moments.exp_avg_sq[n] > 1e-20
        ratio = moments.exp_avg[n][big] ** 2 / moments.exp_avg_sq[n][big]
        assert torch.allclose(ratio, torch.full_like(ratio, 0.01 / 0.001), rtol=1e-3), n
    assert set(moments.steps.values()) == {1}


def test_moments_of_another_model_are_refused_by_name_and_by_shape(toy_config, tmp_path):
    a = build_train_engine(load_causal_lm(toy_config, seed=4), 1e-2, EngineSettings(zero_stage=1))
    _step(a, _batch(0))
    moments, _ = read_moments_file(save_moments(a, tmp_path / "m.safetensors"))
    b = build_train_engine(load_causal_lm(toy_config, seed=5), 1e-2, EngineSettings(zero_stage=1))
    name = next(iter(moments.exp_avg))
    renamed = AdamMoments({"other." + name: moments.exp_avg[name]}, {"other." + name: moments.exp_avg_sq[name]},
                          {"other." + name: 1})
    with pytest.raises(ValueError, match="belong to another model"):
        write_moments(b, renamed)
    reshaped = AdamMoments({name: moments.exp_avg[name].reshape(-1)[:3]}, {name: moments.exp_avg_sq[name].reshape(-1)[:3]},
                           {name: 1})
    with pytest.raises(ValueError, match="shapes differ"):
        write_moments(b, reshaped)
    with pytest.raises(FileNotFoundError, match="does not exist"):
        load_moments(b, tmp_path / "missing.safetensors")


@pytest.mark.gpu
def test_carried_moments_on_the_curves_engine_bf16_zero1_fused_adamw(tmp_path):
    """The learning curve's engine on the device (bf16 weights, ZeRO-1 with fp32 masters, torch's fused AdamW with its
    step count on the device): the update after loading the moments is the one the original engine takes, compared on
    the fp32 masters (the new engine's masters start from the bf16 weights)."""
    cfg = {"model_type": "qwen2", "vocab_size": 512, "hidden_size": 128, "intermediate_size": 256,
           "num_hidden_layers": 2, "num_attention_heads": 2, "num_key_value_heads": 1, "max_position_embeddings": 256}
    settings = EngineSettings(zero_stage=1, dtype="bf16")
    ids = [torch.randint(0, 512, (2, 64), device="cuda", generator=torch.Generator("cuda").manual_seed(k))
           for k in range(4)]
    a = build_train_engine(load_causal_lm(cfg, seed=0), 1e-3, settings)
    assert a.optimizer.optimizer.defaults.get("fused") is True
    for k in range(3):
        _step(a, ids[k])
    path = save_moments(a, tmp_path / "m.safetensors")
    state = {k: v.clone() for k, v in a.module.state_dict().items()}

    def master_update(engine) -> torch.Tensor:
        before = engine.optimizer.single_partition_of_fp32_groups[0].detach().clone()
        _step(engine, ids[3])
        return engine.optimizer.single_partition_of_fp32_groups[0].detach() - before

    def continued(with_moments: bool) -> torch.Tensor:
        model = load_causal_lm(cfg, seed=9)
        model.load_state_dict({k: v.float() for k, v in state.items()})
        e = build_train_engine(model, 1e-3, settings)
        if with_moments:
            load_moments(e, path)
            st = e.optimizer.optimizer.state[e.optimizer.single_partition_of_fp32_groups[0]]
            assert st["step"].device.type == "cuda" and int(st["step"]) == 3
        return master_update(e)

    want = master_update(a)
    carried, fresh = continued(True), continued(False)
    assert float((carried - want).norm() / want.norm()) < 0.05
    assert float((fresh - want).norm() / want.norm()) > 0.3
