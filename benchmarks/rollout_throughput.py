"""Rollout throughput of the ``hf`` engine, against transformers' own ``generate``, plus log-prob recomputation.

    python benchmarks/rollout_throughput.py --device cuda --shape qwen2-0.5b --out rollout.json
    python benchmarks/rollout_throughput.py            # CPU, tiny model: checks the script runs

A random-init model of the named shape (no download) generates ``--new``
tokens after ``--prompt`` prompt tokens for each batch size, through
:class:`HFRolloutEngine` (sampling loop with log-probs) and through
``model.generate`` (no log-probs) for reference; ``token_logprobs`` is timed
over the full sequences. Prints a table and writes JSON with the figures.
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from pathlib import Path

SHAPES = {
    "tiny": dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=1,
                 num_key_value_heads=1, vocab_size=512),
    "qwen2-0.5b": dict(hidden_size=896, intermediate_size=4864, num_hidden_layers=24, num_attention_heads=14,
                       num_key_value_heads=2, vocab_size=151936),
    "qwen2-1.5b": dict(hidden_size=1536, intermediate_size=8960, num_hidden_layers=28, num_attention_heads=12,
                       num_key_value_heads=2, vocab_size=151936),
}


def _sync(device: str) -> None:
    import torch

    if device.startswith("cuda"):
        torch.cuda.synchronize()


def main() -> None:
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    from cuda_agent.protocols import SamplingParams
    from cuda_agent.training.logprobs import token_logprobs
    from cuda_agent.training.rollout.hf_engine import HFRolloutEngine

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--shape", default="tiny", choices=sorted(SHAPES))
    ap.add_argument("--dtype", default=None, help="default: bfloat16 on cuda, float32 on cpu")
    ap.add_argument("--batch", default="1,8", help="comma-separated batch sizes")
    ap.add_argument("--prompt", type=int, default=128)
    ap.add_argument("--new", type=int, default=64)
    ap.add_argument("--out", default="rollout_throughput.json")
    args = ap.parse_args()
    dtype = args.dtype or ("bfloat16" if args.device.startswith("cuda") else "float32")

    torch.manual_seed(0)
    config = Qwen2Config(**SHAPES[args.shape], max_position_embeddings=args.prompt + args.new + 8,
                         tie_word_embeddings=False)
    model = Qwen2ForCausalLM(config).to(getattr(torch, dtype))
    model.generation_config.eos_token_id = None  # random weights: run every row to --new tokens
    engine = HFRolloutEngine(model, None, device=args.device, dtype=dtype, batch_size=max(map(int, args.batch.split(","))))
    rows = []
    for b in map(int, args.batch.split(",")):
        prompts = torch.randint(0, config.vocab_size, (b, args.prompt)).tolist()
        params = SamplingParams(max_new_tokens=args.new, seed=0)
        engine.generate([p[:8] for p in prompts], params.model_copy(update={"max_new_tokens": 4}))  # warm-up
        _sync(args.device)
        t0 = time.perf_counter()
        gens = engine.generate(prompts, params)
        _sync(args.device)
        t_engine = time.perf_counter() - t0
        new_tokens = sum(len(g.output_ids) for g in gens)

        ids = torch.tensor(prompts, device=args.device)
        with torch.no_grad():
            t0 = time.perf_counter()
            model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=args.new, min_new_tokens=args.new,
                           do_sample=True, pad_token_id=0)
            _sync(args.device)
            t_hf = time.perf_counter() - t0
            full = torch.tensor([p + g.output_ids for p, g in zip(prompts, gens)], device=args.device)
            t0 = time.perf_counter()
            token_logprobs(engine.model, full)
            _sync(args.device)
            t_lp = time.perf_counter() - t0
        row = {"batch": b, "new_tokens": new_tokens, "engine_s": t_engine, "engine_tok_s": new_tokens / t_engine,
               "hf_generate_s": t_hf, "hf_generate_tok_s": b * args.new / t_hf,
               "logprobs_s": t_lp, "logprobs_tok_s": full.numel() / t_lp}
        rows.append(row)
        print(f"batch {b:3d}: engine {row['engine_tok_s']:9.1f} tok/s | hf.generate {row['hf_generate_tok_s']:9.1f} tok/s"
              f" | token_logprobs {row['logprobs_tok_s']:11.1f} tok/s")
    device_name = torch.cuda.get_device_name() if args.device.startswith("cuda") else platform.processor() or "cpu"
    result = {"shape": args.shape, "dtype": dtype, "device": device_name, "prompt": args.prompt, "new": args.new,
              "torch": torch.__version__, "rows": rows}
    Path(args.out).write_text(json.dumps(result, indent=1))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
