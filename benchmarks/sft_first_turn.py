"""How far SFT got, without a GPU: a carried actor's first turn on the held-out prompts, checked offline.

    python benchmarks/sft_first_turn.py --state .learning_state --seed 0 --out sft_first_turn.json

The learning curve's device runs bring back the SFT actors (``state_seed<k>.safetensors``) and the data core; this
rebuilds the family data from them (the h200 preset's sizes, the carried tokenizer and task files), then samples
each held-out expert episode's first reply from the actor (its prompt is the expert's, up to the first policy token)
and reports the shares that

- end with the end-of-turn token (``eos``),
- parse into tool calls (``parsed``),
- write ``kernels/chain.cu`` that compiles with ``nvcc -c`` (``compiles``; skipped where nvcc is missing),
- write the task's operator lines (``ops_equal``: the ``v = ...`` lines in order, the part of the kernel that
  depends on the task, against the family writer's clean solution; the expert's own may carry a planted bug).

``first_turn_ok`` is both (compiles and the task's operators): on the H200 the pass rate follows it, since nearly
every passing episode passes with its first kernel (session 28: 3 of 146 failing SFT episodes ever passed
``verify``; every passing rollout of PPO step 2 had no first-reply token below p = 0.1).

    # any carried actor (e.g. an RL step's), several samples per prompt
    python benchmarks/sft_first_turn.py --state .learning_state --seed 0 \
        --actor-file .learning_state/rl_actor_seed0.safetensors --repeats 2 --out rl_first_turn.json

A proxy, not a grade: nothing runs. It tells whether the policy has the format and whether it reads the task, the
two things that decide whether device time on an evaluation is worth spending (session 18: 285 s of SFT gave 95%
parsed, 72% compiling, 9% with the task's operators).
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))


def op_lines(text: str) -> list[str]:
    """The ``v = ...`` lines of a kernel in order (the task-dependent part of the family's kernels; every style the
    writer has lists them in the chain's order). In order, not as a set: ``erf -> cos -> cos`` written as ``erf,
    erf, cos`` holds the same set of lines and is wrong."""
    return [line.strip() for line in text.splitlines() if line.strip().startswith("v = ")]


def compiles(source: str) -> bool | None:
    """Whether ``source`` compiles as a .cu file (None: no nvcc here)."""
    if shutil.which("nvcc") is None:
        return None
    with tempfile.TemporaryDirectory() as d:
        Path(d, "chain.cu").write_text(source)
        proc = subprocess.run(["nvcc", "-c", "-arch=sm_90", "chain.cu", "-o", "chain.o"], cwd=d, capture_output=True)
        return proc.returncode == 0


def read_reply(text: str, chain: list[str], eos: bool, tokens: int) -> tuple[dict[str, Any], str | None]:
    """A sampled first reply's checks that need no compiler (``eos``, ``tokens``, ``parsed``, ``ops_equal``
    against the family writer's clean solution of ``chain``), and the ``kernels/chain.cu`` it writes, if any."""
    from cuda_agent.toolcalls import parse_tool_calls
    from cuda_agent.training.kernel_family.writer import Style, write_solution

    calls, errors = parse_tool_calls(text, 1)
    files = {c.arguments.get("path"): c.arguments.get("content", "") for c in calls if c.name == "write_file"}
    clean = write_solution(chain, "cuda", Style()).files["kernels/chain.cu"]
    cu = files.get("kernels/chain.cu")
    return {"eos": eos, "tokens": tokens, "parsed": bool(calls) and not errors,
            "ops_equal": cu is not None and op_lines(cu) == op_lines(clean)}, cu


def check_reply(text: str, chain: list[str], eos: bool, tokens: int) -> dict[str, Any]:
    """One sampled first reply checked offline: :func:`read_reply`, ``compiles`` and ``first_turn_ok``."""
    row, cu = read_reply(text, chain, eos, tokens)
    row["compiles"] = compiles(cu) if cu is not None else False
    row["first_turn_ok"] = bool(row["compiles"]) and row["ops_equal"]
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--state", type=Path, required=True, help="folder with data_core.tar.gz and state_seed<k>.safetensors")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--n", type=int, default=64, help="held-out prompts to sample (at most the held-out experts)")
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--actor-file", type=Path, default=None,
                    help="an actor state file to sample (default: --state's state_seed<seed>.safetensors, the SFT actor)")
    ap.add_argument("--repeats", type=int, default=1, help="samples per held-out prompt")
    ap.add_argument("--work", type=Path, default=Path("/tmp/sft_first_turn"))
    ap.add_argument("--out", type=Path, default=Path("sft_first_turn.json"))
    args = ap.parse_args()

    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    import learning_curve as lc
    from cuda_agent.training.kernel_family.corpus import ModelSize, build_family_data, build_model, read_data_core

    p = lc.PRESETS["h200"]
    data = args.work / "data"
    if not (data / "summary.json").exists():
        carried = read_data_core(args.state / "data_core.tar.gz", args.work / "carried_data")
        build_family_data(data, backend="cuda", n_train=p["train_tasks"], n_heldout=p["heldout"], seed=0,
                          per_task=p["per_task"], vocab=p["vocab"], lengths=p["lengths"], carried=carried)
    tok_hash = lc.tokenizer_hash(data)
    model_dir = args.work / f"model_seed{args.seed}"
    if not (model_dir / "config.json").exists():
        build_model(model_dir, data / "tokenizer", ModelSize(**p["model"]), seed=args.seed)
    src = args.actor_file or args.state / f"state_seed{args.seed}.safetensors"
    if not src.exists():
        raise SystemExit(f"{src} does not exist: give --actor-file, or a --state holding state_seed{args.seed}.safetensors")
    actor = lc.load_state(src, model_dir, args.work / f"actor_{src.stem}", tok_hash)
    tok = AutoTokenizer.from_pretrained(actor)
    model = AutoModelForCausalLM.from_pretrained(actor, dtype=torch.float32).eval()
    # expert_heldout.pt holds one episode per held-out task, in the task file's order
    chains = [json.loads(x)["meta"]["chain"] for x in (data / "tasks_heldout.jsonl").read_text().splitlines() if x.strip()]
    episodes = torch.load(data / "expert_heldout.pt", weights_only=False)[: args.n]
    n_prompts = len(episodes)
    episodes, chains = episodes * args.repeats, chains[:n_prompts] * args.repeats
    pad = tok.pad_token_id if tok.pad_token_id is not None else 0
    torch.manual_seed(args.seed)
    rows: list[dict[str, Any]] = []
    t0 = time.time()
    for start in range(0, len(episodes), args.batch):
        batch = episodes[start:start + args.batch]
        prompts = []
        for e in batch:
            mask = e["loss_mask"]
            first = int(mask.nonzero()[0])
            prompts.append(e["token_ids"][:first])
        width = max(len(x) for x in prompts)
        ids = torch.full((len(prompts), width), pad)
        attention = torch.zeros_like(ids)
        for i, x in enumerate(prompts):  # left padding
            ids[i, width - len(x):] = x
            attention[i, width - len(x):] = 1
        with torch.no_grad():
            out = model.generate(ids, attention_mask=attention, max_new_tokens=p["max_new_tokens"], do_sample=True,
                                 temperature=1.0, top_p=1.0, pad_token_id=pad)
        for i in range(len(batch)):
            gen = out[i, width:].tolist()
            eos = tok.eos_token_id in gen
            if eos:
                gen = gen[: gen.index(tok.eos_token_id)]
            rows.append({"task": (start + i) % n_prompts,
                         **check_reply(tok.decode(gen), chains[start + i], eos, len(gen))})
        print(f"{len(rows)}/{len(episodes)} in {time.time() - t0:.0f} s", flush=True)
    n = max(1, len(rows))
    summary = {k: sum(1 for r in rows if r[k]) / n for k in ("eos", "parsed", "compiles", "ops_equal", "first_turn_ok")}
    summary.update(tokens_mean=sum(r["tokens"] for r in rows) / n, prompts=len(rows), seed=args.seed,
                   actor=str(src), repeats=args.repeats, nvcc=shutil.which("nvcc") is not None)
    args.out.write_text(json.dumps({"summary": summary, "rows": rows}, indent=1))
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
