"""Build everything a from-scratch policy needs for the family: tasks, expert episodes, tokenizer, model.

:func:`build_family_data` writes into one folder (a command rebuilds it; nothing large goes into git):

- ``tasks_train.jsonl`` / ``tasks_heldout.jsonl``: task manifests for the backend (no probe needed);
- ``system_prompt.j2``: the family's compact system prompt (``agent.system_prompt_template``);
- ``tokenizer/``: a byte-level BPE trained on the rendered expert episodes, with a ChatML template that
  renders each message independently (the tokenization contract's prefix property);
- ``expert_train.pt`` / ``expert_heldout.pt``: the expert episodes in token layout
  (:class:`~cuda_agent.training.buffers.Episode` dicts; held-out ones only for the SFT stopping loss);
- ``summary.json``: counts, decontamination and memorisation, style mix, token lengths.

:func:`build_model` saves a random-init Llama decoder sized by :class:`ModelSize` with that tokenizer
(HF format: the ``hf`` and ``vllm`` policies and the training engines load it like any model).
"""

from __future__ import annotations

import json
import random
import shutil
import tarfile
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from cuda_agent.training.kernel_family.tasks import FamilyTask, family_tasks
from cuda_agent.training.kernel_family.trajectories import (
    OBSERVATION_LIMIT,
    SYSTEM_TEMPLATE,
    TOOLS,
    QualityMix,
    draw_plan,
    episode_tokens,
    expert_turns,
)
from cuda_agent.training.kernel_family.writer import Backend

#: ChatML without tool rendering (the family's system prompt lists the tools): every message renders the same
#: whatever follows it.
FAMILY_CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + (message['content'] if message['content'] else '') + '<|im_end|>\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)


@dataclass(frozen=True)
class ModelSize:
    """Decoder shape (Llama). The defaults (~7M parameters with a 2K vocabulary) fit 16 MiB in bf16."""

    hidden: int = 256
    layers: int = 6
    heads: int = 4
    intermediate: int = 768
    max_positions: int = 4096

    def as_config(self, vocab: int, eos: int, pad: int) -> dict[str, Any]:
        """The ``model_type: llama`` config dict."""
        return {"model_type": "llama", "vocab_size": vocab, "hidden_size": self.hidden, "intermediate_size": self.intermediate,
                "num_hidden_layers": self.layers, "num_attention_heads": self.heads, "num_key_value_heads": self.heads,
                "head_dim": self.hidden // self.heads, "max_position_embeddings": self.max_positions,
                "tie_word_embeddings": False, "eos_token_id": eos, "pad_token_id": pad, "bos_token_id": None}


def family_run_settings(data_dir: Path | str, backend: Backend, max_turns: int = 10) -> dict[str, Any]:
    """The run fields (tools, agent block, backend) the family's episodes use, for a Run/Train/Eval config."""
    return {"backend": backend, "tools": list(TOOLS),
            "agent": {"mode": "agent", "max_turns": max_turns, "observation_limit": OBSERVATION_LIMIT,
                      "use_skill": False, "tool_protocol": "text",
                      "system_prompt_template": str(Path(data_dir) / "system_prompt.j2")}}


def tool_schemas() -> list[Any]:
    """The schemas of :data:`TOOLS` as the loop offers them."""
    from cuda_agent.plugin_manager import PluginManager
    from cuda_agent.protocols import tool_schema

    reg = PluginManager().registry
    return [tool_schema(reg.build("tool", name, None, where=f"tools[{i}]")) for i, name in enumerate(TOOLS)]


def prompts(task: FamilyTask, backend: Backend, template_path: Path, schemas: list[Any]) -> tuple[str, str]:
    """(system prompt, task prompt) exactly as the loop renders them for ``task``."""
    from cuda_agent.prompts import render_system_prompt, render_task_prompt

    variables = dict(skill="", tools=schemas, protocol="text", mode="agent", task=task.manifest(backend),
                     kernel_suffix=".cu" if backend == "cuda" else ".cpp")
    return render_system_prompt(str(template_path), **variables), render_task_prompt(**variables)


def _plain_render(system: str, user: str, turns: list[Any]) -> str:
    parts = [f"<|im_start|>system\n{system}<|im_end|>\n", f"<|im_start|>user\n{user}<|im_end|>\n"]
    for t in turns:
        parts.append(f"<|im_start|>assistant\n{t.text}<|im_end|>\n")
        parts += [f"<|im_start|>tool\n{o}<|im_end|>\n" for o in t.observations]
    return "".join(parts)


def _render_rows(rows: list[tuple[FamilyTask, Any]], backend: Backend, template: str, seed: int) -> list[tuple]:
    """(task, plan, system prompt, task prompt, turns) of each (task, plan)."""
    schemas = tool_schemas()
    cache: dict[str, tuple[str, str]] = {}
    out = []
    for t, plan in rows:
        if t.id not in cache:
            cache[t.id] = prompts(t, backend, Path(template), schemas)
        out.append((t, plan, *cache[t.id], expert_turns(plan, seed=seed)))
    return out


def _tokenize_rows(rows: list[tuple], tokenizer_dir: str) -> list[dict[str, Any]]:
    """Compact saved episodes (int tensors: they pickle fast) of rendered rows."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tokenizer_dir)
    schemas = tool_schemas()
    out = []
    for t, plan, system, user, turns in rows:
        te = episode_tokens(tok, system, user, turns, schemas)
        out.append({"token_ids": torch.tensor(te.token_ids, dtype=torch.int32),
                    "loss_mask": torch.tensor(te.loss_mask, dtype=torch.int8), "reward": 1.0, "success": True,
                    "turns": len(turns),
                    "meta": {"task_id": t.id, "chain": t.chain, "style": plan.label,
                             "bug": plan.bug.kind if plan.bug else None, "improve": plan.improve_to is not None}})
    return out


def _parallel(fn: Any, rows: list[Any], workers: int, args: tuple) -> list[Any]:
    """``fn(chunk, *args)`` over contiguous chunks of ``rows`` in forked worker processes, results in order."""
    if workers <= 1 or len(rows) < 64:
        return fn(rows, *args)
    import multiprocessing as mp
    from concurrent.futures import ProcessPoolExecutor

    size = -(-len(rows) // workers)
    chunks = [rows[i:i + size] for i in range(0, len(rows), size)]
    with ProcessPoolExecutor(max_workers=workers, mp_context=mp.get_context("fork")) as ex:
        return [r for part in ex.map(fn, chunks, *[[a] * len(chunks) for a in args]) for r in part]


def _same_tasks(a: str, b: str) -> bool:
    """Two task files hold the same tasks: equal manifests up to the torch version that described them (the
    ``meta.probe_torch`` of a file built on the GPU machine, 2.11+cu130, differs from this machine's)."""
    def rows(text: str) -> list[dict[str, Any]]:
        out = []
        for line in text.splitlines():
            if line.strip():
                row = json.loads(line)
                row.get("meta", {}).pop("probe_torch", None)
                out.append(row)
        return out
    return rows(a) == rows(b)


def build_family_data(out: Path | str, *, backend: Backend, n_train: int, n_heldout: int, seed: int = 0,
                      per_task: int = 1, vocab: int = 2048, mix: QualityMix | None = None,
                      heldout_experts: int | None = None, workers: int | None = None,
                      lengths: list[float] | None = None, carried: Path | str | None = None,
                      experts: bool = True) -> dict[str, Any]:
    """Write tasks, prompt template, tokenizer and tokenized expert episodes to ``out``; return the summary.

    ``workers``: processes rendering and tokenizing episodes (default: the usable cores, at most 16).
    ``lengths``: weights of chain lengths 1, 2, ... (default the family's).
    ``carried``: a folder holding an earlier build's ``tokenizer/`` and ``tasks_*.jsonl`` (another machine's,
    from :func:`write_data_core`): that tokenizer is used instead of training one, and those task files are
    kept, so a policy trained there meets the same token ids and held-out tasks here. The summary's
    ``carried.tasks_equal`` says whether this build drew the same tasks (it should: the draw is seeded).
    ``experts``: False skips the expert episodes (``expert_*.pt``): a later phase that only runs episodes on the
    tasks (RL, throughput) needs the tasks and the carried tokenizer, not the corpus (about 40 s of a device run).
    """
    from cuda_agent.testing.tiny_lm import build_tokenizer

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    if workers is None:
        import os

        workers = min(16, len(os.sched_getaffinity(0)))
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # thousands of tiny tensor ops: thread hand-offs cost more than they save
    try:
        train, heldout, report = family_tasks(n_train, n_heldout, seed=seed,
                                              **({"lengths": lengths} if lengths else {}))
        carried_equal: dict[str, bool] = {}
        for name, tasks in (("tasks_train.jsonl", train), ("tasks_heldout.jsonl", heldout)):
            text = "".join(t.manifest(backend).model_dump_json() + "\n" for t in tasks)
            if carried is not None and (Path(carried) / name).exists():
                kept = (Path(carried) / name).read_text()
                carried_equal[name] = _same_tasks(kept, text)
                text = kept
            (out / name).write_text(text)
        template = out / "system_prompt.j2"
        template.write_text(SYSTEM_TEMPLATE)
        rng = random.Random(f"experts:{seed}")
        plans = [(t, draw_plan(t, backend, rng, mix)) for t in train for _ in range(per_task)]
        n_held = len(heldout) if heldout_experts is None else heldout_experts
        held_plans = [(t, draw_plan(t, backend, rng, mix)) for t in heldout[:n_held]]
        has_tokenizer = carried is not None and (Path(carried) / "tokenizer" / "tokenizer.json").exists()
        if not experts and not has_tokenizer:
            raise ValueError("build_family_data(experts=False) needs a carried tokenizer: the tokenizer is trained on "
                             "the expert episodes")
        rendered = ([_parallel(_render_rows, rows, workers, (backend, str(template), seed)) for rows in (plans, held_plans)]
                    if experts else [[], []])
        if has_tokenizer:
            from transformers import AutoTokenizer

            if (out / "tokenizer").resolve() != (Path(carried) / "tokenizer").resolve():
                shutil.copytree(Path(carried) / "tokenizer", out / "tokenizer", dirs_exist_ok=True)
            tok = AutoTokenizer.from_pretrained(str(out / "tokenizer"))
        else:
            tok = build_tokenizer(out / "tokenizer", vocab=vocab, chat_template=FAMILY_CHAT_TEMPLATE,
                                  corpus=(_plain_render(s, u, tr) for _, _, s, u, tr in rendered[0]))
        summary: dict[str, Any] = {"backend": backend, "seed": seed, "tasks": report, "vocab": len(tok)}
        if carried is not None:
            summary["carried"] = {"from": str(carried), "tasks_equal": carried_equal}
        for fname, rows in (("expert_train.pt", rendered[0]), ("expert_heldout.pt", rendered[1])) if experts else ():
            episodes = _parallel(_tokenize_rows, rows, workers, (str(out / "tokenizer"),))
            torch.save(episodes, out / fname)
            lengths = sorted(int(e["token_ids"].numel()) for e in episodes)
            summary[fname] = {"episodes": len(episodes), "tokens_max": lengths[-1] if lengths else 0,
                              "tokens_median": lengths[len(lengths) // 2] if lengths else 0,
                              "policy_tokens": int(sum(int(e["loss_mask"].sum()) for e in episodes))}
        summary["styles"] = dict(Counter(p.style.label for _, p in plans))
        summary["bugs"] = dict(Counter(p.bug.kind if p.bug else "none" for _, p in plans))
        summary["improved"] = sum(p.improve_to is not None for _, p in plans)
        (out / "summary.json").write_text(json.dumps(summary, indent=1))
        return summary
    finally:
        torch.set_num_threads(threads)


#: What another machine needs to rebuild the same data: the tokenizer and the task files (``build_family_data``'s
#: ``carried``). The expert episodes are not in it: they are rebuilt from the tasks (tens of MB otherwise).
DATA_CORE_FILES = ("tasks_train.jsonl", "tasks_heldout.jsonl", "tokenizer")


def write_data_core(data: Path | str, dest: Path | str) -> Path:
    """Pack ``data``'s tokenizer and task files into the tarball ``dest`` (well under 16 MiB for 1,500 tasks)."""
    data, dest = Path(data), Path(dest)
    missing = [n for n in DATA_CORE_FILES if not (data / n).exists()]
    if missing:
        raise FileNotFoundError(f"{data} is not a built family data folder: it lacks {missing}")
    dest.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(dest, "w:gz") as tar:
        for name in DATA_CORE_FILES:
            tar.add(data / name, arcname=name)
    return dest


def read_data_core(src: Path | str, dest: Path | str) -> Path:
    """Unpack a :func:`write_data_core` tarball into the folder ``dest``; refuse members outside the core's names."""
    src, dest = Path(src), Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    with tarfile.open(src, "r:gz") as tar:
        members = tar.getmembers()
        bad = [m.name for m in members if m.name.split("/")[0] not in DATA_CORE_FILES or ".." in m.name.split("/")
               or not (m.isfile() or m.isdir())]
        if bad:
            raise ValueError(f"{src} holds entries outside {DATA_CORE_FILES}: {bad[:5]}")
        tar.extractall(dest, members=members, filter="data")
    return dest


def build_model(out: Path | str, tokenizer_dir: Path | str, size: ModelSize = ModelSize(), seed: int = 0) -> Path:
    """Save a random-init decoder of ``size`` with the tokenizer of ``tokenizer_dir`` to ``out`` (HF format)."""
    from transformers import AutoTokenizer

    from cuda_agent.training.engines.models import load_causal_lm

    out = Path(out)
    tok = AutoTokenizer.from_pretrained(str(tokenizer_dir))
    model = load_causal_lm(size.as_config(len(tok), tok.eos_token_id, tok.pad_token_id), seed=seed)
    model.generation_config.eos_token_id = tok.eos_token_id
    model.generation_config.pad_token_id = tok.pad_token_id
    model.generation_config.bos_token_id = None
    model.save_pretrained(str(out))
    tok.save_pretrained(str(out))
    return out


def episode_from_saved(d: dict[str, Any]) -> Any:
    """An :class:`~cuda_agent.training.buffers.Episode` from a saved dict (compact tensors or plain lists)."""
    from cuda_agent.training.buffers import Episode

    d = dict(d)
    for k in ("token_ids", "loss_mask", "logprobs"):
        if isinstance(d.get(k), torch.Tensor):
            d[k] = d[k].tolist()
    d.setdefault("logprobs", [0.0] * len(d["token_ids"]))
    return Episode(**d)


def load_expert_episodes(path: Path | str) -> list[Any]:
    """Episodes saved by :func:`build_family_data` (``expert_*.pt``)."""
    return [episode_from_saved(d) for d in torch.load(path, weights_only=False)]
