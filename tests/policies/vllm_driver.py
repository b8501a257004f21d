"""Checks needing a real vLLM engine; run by test_vllm.py inside the vllm venv (scripts/make_vllm_venv.sh).

    .venv-vllm/bin/python tests/policies/vllm_driver.py OUT.json

Starts one in-process ``vllm.LLM`` (CPU) over the tiny test LM through the
``vllm`` policy plugin and writes the measured facts to ``OUT.json``; the
test in the main environment asserts on them. (The engine spawns workers:
hence the ``__main__`` guard.)
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path


def _max_diff(a: list[float], b: list[float]) -> float:
    assert len(a) == len(b), (len(a), len(b))
    return max((abs(x - y) for x, y in zip(a, b)), default=0.0)


def main(out_path: Path) -> None:
    import cuda_agent.plugins.policies.vllm as plugin

    facts: dict = {"plugin_import_loads_vllm": "vllm" in sys.modules}
    import torch
    from transformers import AutoModelForCausalLM

    from cuda_agent.protocols import SamplingParams
    from cuda_agent.schemas.messages import Message, ToolSchema
    from cuda_agent.testing.tiny_lm import build_tiny_lm
    from cuda_agent.training.logprobs import token_logprobs

    work = out_path.parent
    tiny, other = build_tiny_lm(work / "tiny"), build_tiny_lm(work / "tiny-seed1", seed=1)
    hf = {p: AutoModelForCausalLM.from_pretrained(p, dtype=torch.float32).eval() for p in (tiny, other)}

    def recompute(path: Path, prompt: list[int], output: list[int]) -> list[float]:
        with torch.no_grad():
            lp = token_logprobs(hf[path], torch.tensor([prompt + output]))[0]
        return lp[len(prompt) - 1:].tolist()

    t0 = time.monotonic()
    policy = plugin.build_vllm_policy(plugin.VLLMPolicyConfig(
        model=str(tiny), dtype="float32", max_model_len=1024, enforce_eager=True, gpu_memory_utilization=0.2,
        max_new_tokens=8, seed=0))
    facts["engine_start_s"] = time.monotonic() - t0
    engine, tok = policy.engine, policy.tokenizer

    # 1. batched token-in/token-out generation with log-probs
    texts = ["def forward(self, x):", "__global__ void relu_kernel(", "compile ok"]
    prompts = [tok(t, add_special_tokens=False)["input_ids"] for t in texts]
    params = SamplingParams(max_new_tokens=8, temperature=1.0, seed=0)
    t0 = time.monotonic()
    gens = engine.generate(prompts, params)
    facts["generate_s"] = time.monotonic() - t0
    facts["batch"] = [{"prompt": p, "output": g.output_ids, "n_logprobs": len(g.logprobs), "finish": g.finish_reason,
                       "max_diff": _max_diff(g.logprobs, recompute(tiny, p, g.output_ids))}
                      for p, g in zip(prompts, gens)]
    facts["same_seed_same_tokens"] = engine.generate(prompts, params)[0].output_ids == gens[0].output_ids
    # tokens in/out agree with the tokenizer: vLLM's own view of the prompt and its detokenized text
    import vllm
    from vllm.inputs import TokensPrompt

    raw = engine.llm.generate([TokensPrompt(prompt_token_ids=prompts[0])],
                              vllm.SamplingParams(max_tokens=8, seed=0, logprobs=0, skip_special_tokens=False),
                              use_tqdm=False)[0]
    facts["prompt_ids_roundtrip"] = list(raw.prompt_token_ids) == prompts[0]
    # random weights emit stray UTF-8 fragments; vLLM's incremental detokenizer may hold back or
    # replace them differently, so compare the text with replacement characters removed
    vtext = raw.outputs[0].text
    dtext = tok.decode(list(raw.outputs[0].token_ids), skip_special_tokens=False)
    facts["texts"] = [vtext, dtext]
    facts["text_matches_tokenizer"] = vtext.replace("\ufffd", "") == dtext.replace("\ufffd", "")

    # 2. a multi-turn token-level episode through the policy
    tools = [ToolSchema(name="compile", description="Build.", parameters={"type": "object", "properties": {}})]
    messages = [Message(role="system", content="You write kernels."), Message(role="user", content="Speed up relu.")]
    policy.reset()
    contexts, outs = [], []
    for k in range(3):
        out = policy.query(list(messages), tools)
        outs.append(out)
        contexts.append(policy.context_ids)
        messages += [Message(role="assistant", content=out.text),
                     Message(role="tool", content=f"compile ok ({k})", tool_call_id=f"c{k}", name="compile")]
    full = contexts[-1]
    facts["episode_prefix_ok"] = all(b[: len(a)] == a for a, b in zip(contexts, contexts[1:]))
    rebuilt = []
    for o in outs:
        rebuilt += o.prompt_delta_ids + o.output_ids
    facts["episode_layout_ok"] = rebuilt == full
    with torch.no_grad():
        lp_full = token_logprobs(hf[tiny], torch.tensor([full]))[0].tolist()
    pos, diffs = 0, []
    for o in outs:
        pos += len(o.prompt_delta_ids)
        diffs += [abs(lp_full[pos + j - 1] - lp) for j, lp in enumerate(o.output_logprobs)]
        pos += len(o.output_ids)
    facts["episode_max_diff"] = max(diffs)
    facts["episode_tokens"] = len(full)

    # 3. weight sync: an HF folder, then a state dict written as a checkpoint
    t0 = time.monotonic()
    engine.update_weights(other)
    facts["reload_s"] = time.monotonic() - t0
    g = engine.generate(prompts[:1], params)[0]
    facts["after_folder_reload_diff_new"] = _max_diff(g.logprobs, recompute(other, prompts[0], g.output_ids))
    facts["after_folder_reload_diff_old"] = _max_diff(g.logprobs, recompute(tiny, prompts[0], g.output_ids))
    engine.checkpoint_dir = work / "ckpt"
    engine.update_weights(hf[tiny].state_dict())
    g = engine.generate(prompts[:1], params)[0]
    facts["after_state_dict_reload_diff"] = _max_diff(g.logprobs, recompute(tiny, prompts[0], g.output_ids))
    facts["after_state_dict_same_tokens"] = g.output_ids == gens[0].output_ids
    out_path.write_text(json.dumps(facts, indent=1))
    engine.close()


if __name__ == "__main__":
    main(Path(sys.argv[1]).resolve())
