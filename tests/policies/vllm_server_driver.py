"""Checks of the server transport: a real ``vllm serve`` (CPU) driven by VLLMRolloutEngine over HTTP.

    .venv-vllm/bin/python tests/policies/vllm_server_driver.py OUT.json

Started with ``VLLM_SERVER_DEV_MODE=1`` so weights can be reloaded through
``POST /collective_rpc``. Writes the measured facts to ``OUT.json``; the
assertions are in test_vllm_server.py. The server is stopped on exit.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_ready(proc: subprocess.Popen, url: str, deadline_s: float) -> float:
    t0 = time.monotonic()
    while time.monotonic() - t0 < deadline_s:
        try:
            with urllib.request.urlopen(url, timeout=2) as r:
                if r.status == 200:
                    return time.monotonic() - t0
        except OSError:
            pass
        try:  # doubles as the pause between polls, and notices a crashed server at once
            proc.wait(timeout=2)
            raise RuntimeError(f"vllm server exited with {proc.returncode} before becoming ready")
        except subprocess.TimeoutExpired:
            pass
    raise TimeoutError(f"vllm server not ready after {deadline_s:.0f} s")


def main(out_path: Path) -> None:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from cuda_agent.protocols import SamplingParams
    from cuda_agent.schemas.messages import Message
    from cuda_agent.testing.tiny_lm import build_tiny_lm
    from cuda_agent.training.logprobs import token_logprobs
    from cuda_agent.training.rollout.vllm_engine import VLLMRolloutEngine

    work = out_path.parent
    tiny, other = build_tiny_lm(work / "tiny"), build_tiny_lm(work / "tiny-seed1", seed=1)
    hf = {p: AutoModelForCausalLM.from_pretrained(p, dtype=torch.float32).eval() for p in (tiny, other)}

    def diff(path: Path, prompt: list[int], gen) -> float:
        with torch.no_grad():
            lp = token_logprobs(hf[path], torch.tensor([prompt + gen.output_ids]))[0, len(prompt) - 1:].tolist()
        return max(abs(a - b) for a, b in zip(lp, gen.logprobs))

    port = _free_port()
    log = open(work / "server.log", "w")
    proc = subprocess.Popen(
        [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", str(tiny), "--port", str(port),
         "--host", "127.0.0.1", "--served-model-name", "tiny", "--dtype", "float32", "--max-model-len", "1024",
         "--enforce-eager", "--gpu-memory-utilization", "0.2", "--logprobs-mode", "processed_logprobs"],
        stdout=log, stderr=subprocess.STDOUT, env={**os.environ, "VLLM_SERVER_DEV_MODE": "1"},
    )
    facts: dict = {}
    try:
        facts["server_start_s"] = _wait_ready(proc, f"http://127.0.0.1:{port}/health", 1200)
        engine = VLLMRolloutEngine(tiny, base_url=f"http://127.0.0.1:{port}/v1", served_model_name="tiny")
        tok = AutoTokenizer.from_pretrained(tiny)
        prompts = [tok(t, add_special_tokens=False)["input_ids"] for t in ("def forward(self, x):", "compile ok")]
        params = SamplingParams(max_new_tokens=8, seed=0)
        gens = engine.generate(prompts, params)
        facts["lengths"] = [[len(g.output_ids), len(g.logprobs)] for g in gens]
        facts["max_diff"] = max(diff(tiny, p, g) for p, g in zip(prompts, gens))
        facts["same_seed_same_tokens"] = engine.generate(prompts, params)[0].output_ids == gens[0].output_ids

        from cuda_agent.training.rollout.token_policy import EngineTokenPolicy

        policy = EngineTokenPolicy(engine, tok, params)
        msgs = [Message(role="system", content="s"), Message(role="user", content="relu")]
        outs, contexts = [], []
        for k in range(2):
            out = policy.query(list(msgs), [])
            outs.append(out)
            contexts.append(policy.context_ids)
            msgs += [Message(role="assistant", content=out.text), Message(role="user", content=f"obs {k}")]
        rebuilt = [i for o in outs for i in o.prompt_delta_ids + o.output_ids]
        facts["episode_layout_ok"] = rebuilt == contexts[-1] and contexts[1][: len(contexts[0])] == contexts[0]

        engine.update_weights(other)
        g = engine.generate(prompts[:1], params)[0]
        facts["after_reload_diff_new"] = diff(other, prompts[0], g)
        facts["after_reload_diff_old"] = diff(tiny, prompts[0], g)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
        out_path.write_text(json.dumps(facts, indent=1))


if __name__ == "__main__":
    main(Path(sys.argv[1]).resolve())
