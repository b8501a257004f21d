"""The data synthesis pipeline: mine -> compose -> filter -> dedup, resumable.

Files in ``out_dir``:

- ``operators.jsonl`` (+ ``mine_skipped.json``): the seed operator catalog;
- ``composed.jsonl``: one line per candidate index (task or compose error);
- ``filtered.jsonl``: one line per probed candidate (verdict of every filter,
  timings, keep/reason);
- ``tasks.jsonl`` / ``dropped.jsonl`` / ``summary.json``: rewritten after each
  round from the logs, sorted by id, so an interrupted and resumed build ends
  with the same files as an uninterrupted one.

Composition and filtering proceed in rounds of ``round_size`` candidates
until ``target_tasks`` survive dedup or ``max_candidates`` were composed.
Filtering runs ``workers`` probe worker processes in parallel (threads only
drive them); with ``probe.device == 'cuda'`` workers are spread over the GPUs
and a per-GPU lock file serialises timed calls. A task every earlier filter
kept is run once more at its ``CPU_SIZES`` by one of ``cpu_check_workers`` CPU
probe workers, for the ``cpu_sizes`` filter. The inductor cache is
``probe.compile_cache_dir`` made absolute (default ``out_dir/.compile_cache``),
shared by the workers and writable wherever ``out_dir`` is.
"""

from __future__ import annotations

import json
import queue
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import structlog

from cuda_agent import __version__
from cuda_agent.schemas.task import TaskManifest
from cuda_agent.training.synthesis.compose_rules import ChainError, RuleComposer
from cuda_agent.training.synthesis.config import DataConfig
from cuda_agent.training.synthesis.dedup import ReferenceIndex, near_duplicates
from cuda_agent.training.synthesis.execution_probe import ProbeReport, ProbeSettings, ProbeWorker
from cuda_agent.training.synthesis.jsonl_log import JsonlLog, write_jsonl_atomic
from cuda_agent.training.synthesis.operators import OperatorSpec, read_catalog, write_catalog
from cuda_agent.training.synthesis.task_filters import cpu_check_settings, cpu_variant_code

log = structlog.get_logger(__name__)


def _progress(enabled: bool):  # type: ignore[no-untyped-def]
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    return Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                    disable=not enabled, transient=False)


def _versions() -> dict[str, str]:
    out = {"cuda_agent": __version__}
    from importlib.metadata import PackageNotFoundError, version

    for dist in ("torch", "transformers"):
        try:
            out[dist] = version(dist)
        except PackageNotFoundError:
            pass
    return out


def verdict_counts(counts: Counter[str]) -> str:
    """``kept 12 | runtime_window 30, informative 2``: a round's verdicts so far, drop reasons most frequent first."""
    drops = ", ".join(f"{reason} {n}" for reason, n in counts.most_common() if reason != "kept")
    return f"kept {counts.get('kept', 0)}" + (f" | {drops}" if drops else "")


def _probed_shapes(filtered: dict[str, Any]) -> dict[str, list[int]]:
    """Input/output shapes of a task the composer gave none for (LLM-written), from its probe reports."""
    shapes: dict[str, list[int]] = {}
    for prefix, key in (("", "probe"), ("cpu_", "cpu_probe")):
        report = filtered.get(key) or {}
        if report.get("output_shapes"):
            shapes[f"{prefix}input"] = (report.get("input_shapes") or [[]])[0]
            shapes[f"{prefix}output"] = report["output_shapes"][0]
    return shapes


class DataPipeline:
    """Runs the stages of one build described by a :class:`DataConfig`."""

    def __init__(self, config: DataConfig, plugin_manager: Any = None) -> None:
        self.config = config
        self.out = Path(config.out_dir)
        self.out.mkdir(parents=True, exist_ok=True)
        self._pm = plugin_manager
        self._versions: dict[str, str] | None = None
        self._reference: ReferenceIndex | None = None
        self._workers: queue.Queue[ProbeWorker] | None = None
        self._cpu_workers: queue.Queue[ProbeWorker] | None = None

    # -- helpers ---------------------------------------------------------------
    @property
    def pm(self) -> Any:
        """The plugin manager (built on first use)."""
        if self._pm is None:
            from cuda_agent.plugin_manager import PluginManager

            self._pm = PluginManager()
        return self._pm

    def versions(self) -> dict[str, str]:
        """Library versions recorded in provenance."""
        if self._versions is None:
            self._versions = _versions()
        return self._versions

    # -- mine ------------------------------------------------------------------
    def mine(self) -> list[OperatorSpec]:
        """The operator catalog (mined once; ``operators.jsonl`` marks it done)."""
        path = self.out / "operators.jsonl"
        if self.config.mine.catalog is not None:
            return read_catalog(self.config.mine.catalog)
        if path.exists():
            return read_catalog(path)
        import warnings

        specs: list[OperatorSpec] = []
        skipped: dict[str, str] = {}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            if self.config.mine.include_torch:
                from cuda_agent.training.synthesis.mine_torch import mine_torch

                report = mine_torch()
                specs += report.specs
                skipped.update(report.skipped)
            if self.config.mine.include_transformers:
                from cuda_agent.training.synthesis.mine_transformers import mine_transformers

                report = mine_transformers()
                specs += report.specs
                skipped.update(report.skipped)
        (self.out / "mine_skipped.json").write_text(json.dumps(skipped, indent=1, sort_keys=True))
        write_catalog(specs, path)
        log.info("mined operators", accepted=len(specs), skipped=len(skipped))
        return read_catalog(path)

    # -- compose ---------------------------------------------------------------
    def composer(self, catalog: list[OperatorSpec]) -> Any:
        """The configured composer over ``catalog``."""
        c = self.config
        if c.composer == "rules":
            return RuleComposer(catalog, c.compose, seed=c.seed)
        from cuda_agent.specs import parse_spec
        from cuda_agent.training.synthesis.compose_llm import LLMComposer

        if not c.policy:
            raise ValueError("composer 'llm' needs 'policy' (a policy spec such as openai:gpt-4o) in the data config")
        spec = parse_spec(c.policy, kind="policy")
        entry = self.pm.registry.get("policy", spec.name, where="policy")
        target = getattr(entry.config_model, "spec_target", "target") if entry.config_model else "target"
        block = {**c.plugins.get(spec.name, {}), **spec.config(target)}
        policy = entry.build(block) if (entry.config_model or block) else entry.build()
        window = c.plugins.get("runtime_window", {})
        template = c.compose_template.read_text() if c.compose_template else None
        return LLMComposer(catalog, policy, c.compose, seed=c.seed, template=template, policy_name=c.policy,
                           prompt_values={"min_ms": window.get("min_ms", 1), "max_ms": window.get("max_ms", 100),
                                          "device": c.probe.device})

    def compose(self, indices: range, catalog: list[OperatorSpec]) -> JsonlLog:
        """Compose the candidates of ``indices`` not yet in ``composed.jsonl``."""
        logf = JsonlLog(self.out / "composed.jsonl")
        todo = [i for i in indices if f"synth/s{self.config.seed}-{i:05d}" not in logf]
        if not todo:
            return logf
        composer = self.composer(catalog)
        with _progress(self.config.progress) as bar:
            job = bar.add_task("compose", total=len(todo))
            for i in todo:
                task_id = f"synth/s{self.config.seed}-{i:05d}"
                try:
                    task = composer.compose(i)
                    rec = {**task.model_dump(mode="json"), "index": i, "error": None}
                    rec["provenance"] = {**rec["provenance"], "versions": self.versions()}
                except (ChainError, ValueError) as exc:
                    rec = {"id": task_id, "index": i, "error": f"{type(exc).__name__}: {exc}"}
                logf.append(rec)
                bar.advance(job)
        return logf

    # -- filter ----------------------------------------------------------------
    def _filters(self) -> list[tuple[str, Any]]:
        reg = self.pm.registry
        return [(name, reg.build("task_filter", name, self.config.plugins.get(name), where="filters"))
                for name in self.config.filters]

    def _devices(self) -> list[int | None]:
        if self.config.probe.device != "cuda":
            return [None]
        if self.config.devices:
            return list(self.config.devices)
        import torch

        n = torch.cuda.device_count()
        if n == 0:
            raise RuntimeError("probe.device is 'cuda' but no CUDA device is visible")
        return list(range(n))

    def filter(self, composed: JsonlLog, ids: list[str]) -> JsonlLog:
        """Probe and judge the composed candidates among ``ids`` not yet in ``filtered.jsonl``."""
        logf = JsonlLog(self.out / "filtered.jsonl")
        todo = [composed.records[i] for i in ids if i in composed.records and composed.records[i].get("error") is None
                and i not in logf]
        if not todo:
            return logf
        filters = self._filters()
        pool_of_workers = self._worker_pool()

        def run(rec: dict[str, Any]) -> dict[str, Any]:
            report = self._probe(pool_of_workers, rec["id"], rec["code"])
            task = TaskManifest.from_code(rec["id"], rec["code"], source="synth", stochastic=bool(rec.get("stochastic")),
                                          meta={"probe": report.model_dump(), "ops": rec.get("ops", [])})
            verdicts: dict[str, Any] = {}
            reason = None
            for name, flt in filters:
                if getattr(flt, "needs_cpu_probe", False):
                    self._attach_cpu_probe(task, dropped_by=reason)
                v = flt.check(task, None)
                verdicts[name] = {"keep": v.keep, "reason": v.reason, "message": v.message}
                if not v.keep and reason is None:
                    reason = name
            cpu = task.meta.get("cpu_probe") or {}
            result = {"id": rec["id"], "keep": reason is None, "reason": reason, "verdicts": verdicts,
                      "timings": {"eager_ms": report.eager_ms, "compile_ms": report.compile_ms,
                                  "cpu_eager_ms": cpu.get("eager_ms")},
                      "probe": report.model_dump(exclude_none=True)}
            if cpu:
                result["cpu_probe"] = {k: v for k, v in cpu.items() if v is not None}
            return result

        title = f"filter ({self.config.probe.device}, {self.config.workers} workers)"
        verdicts: Counter[str] = Counter()
        with _progress(self.config.progress) as bar, ThreadPoolExecutor(self.config.workers) as pool:
            job = bar.add_task(title, total=len(todo))
            for result in pool.map(run, todo):
                logf.append(result)
                verdicts[result["reason"] or "kept"] += 1
                bar.update(job, advance=1, description=f"{title} {verdict_counts(verdicts)}")
        return logf

    @staticmethod
    def _probe(workers: queue.Queue[ProbeWorker], task_id: str, code: str) -> ProbeReport:
        worker = workers.get()
        try:
            return worker.probe(task_id, code)
        finally:
            workers.put(worker)

    def _attach_cpu_probe(self, task: TaskManifest, dropped_by: str | None) -> None:
        """Run the task's CPU_SIZES variant on a CPU worker into ``task.meta['cpu_probe']`` (kept tasks only)."""
        from cuda_agent.harness.tasks import TaskProbeError, has_cpu_sizes

        if dropped_by is not None:
            task.meta["cpu_probe_skipped"] = f"the task was dropped by {dropped_by!r}"
            return
        if not has_cpu_sizes(task.code):
            return  # the filter judges the missing CPU_SIZES
        try:
            code = cpu_variant_code(task)
        except TaskProbeError:
            return  # the filter reports why CPU_SIZES cannot be applied
        task.meta["cpu_probe"] = self._probe(self._cpu_worker_pool(), task.id, code).model_dump()

    def probe_settings(self) -> ProbeSettings:
        """``probe`` with ``compile_cache_dir`` absolute (default ``out_dir/.compile_cache``)."""
        cache = self.config.probe.compile_cache_dir or self.out / ".compile_cache"
        cache = Path(cache).resolve()
        cache.mkdir(parents=True, exist_ok=True)
        return self.config.probe.model_copy(update={"compile_cache_dir": cache})

    def _lock_dir(self) -> Path:
        lock_dir = self.out / ".locks"
        lock_dir.mkdir(exist_ok=True)
        return lock_dir

    def _worker_pool(self) -> queue.Queue[ProbeWorker]:
        """``workers`` probe workers (started lazily by their first task), kept across rounds."""
        if self._workers is None:
            devices = self._devices()
            settings = self.probe_settings()
            self._workers = queue.Queue()
            for k in range(self.config.workers):
                dev = devices[k % len(devices)]
                lock = self._lock_dir() / f"device{dev if dev is not None else 'cpu'}.lock"
                self._workers.put(ProbeWorker(settings, device_index=dev, timing_lock=lock))
        return self._workers

    def _cpu_worker_pool(self) -> queue.Queue[ProbeWorker]:
        """``cpu_check_workers`` CPU probe workers for the CPU_SIZES variants (started lazily, kept across rounds).

        They share the CPU timing lock with the main workers when those run on the CPU too.
        """
        if self._cpu_workers is None:
            lock = self._lock_dir() / "devicecpu.lock" if self.config.probe.device == "cpu" else None
            settings = cpu_check_settings(self.probe_settings())
            self._cpu_workers = queue.Queue()
            for _ in range(self.config.cpu_check_workers):
                self._cpu_workers.put(ProbeWorker(settings, timing_lock=lock))
        return self._cpu_workers

    def close(self) -> None:
        """Stop the probe workers."""
        for pool in (self._workers, self._cpu_workers):
            while pool is not None and not pool.empty():
                pool.get().close()
        self._workers = self._cpu_workers = None

    # -- dedup + outputs ---------------------------------------------------------
    def reference(self) -> ReferenceIndex | None:
        """The decontamination reference index (None when no reference is configured)."""
        if self._reference is None and self.config.dedup.reference is not None:
            self._reference = ReferenceIndex.from_folder(self.config.dedup.reference, self.config.dedup)
        return self._reference

    def dedup(self, composed: JsonlLog, filtered: JsonlLog) -> dict[str, Any]:
        """Decontaminate, remove near-duplicates, and rewrite tasks.jsonl / dropped.jsonl / summary.json."""
        dropped: list[dict[str, Any]] = []
        survivors: dict[str, dict[str, Any]] = {}
        for cid, rec in sorted(composed.records.items()):
            if rec.get("error"):
                dropped.append({"id": cid, "stage": "compose", "reason": "compose_error", "message": rec["error"]})
                continue
            f = filtered.records.get(cid)
            if f is None:
                continue  # not filtered yet
            if not f["keep"]:
                dropped.append({"id": cid, "stage": "filter", "reason": f["reason"],
                                "message": f["verdicts"][f["reason"]]["message"], "verdicts": f["verdicts"]})
                continue
            survivors[cid] = rec
        ref = self.reference()
        clean: dict[str, dict[str, Any]] = {}
        for cid, rec in survivors.items():
            match = ref.best_match(rec["code"]) if ref is not None else None
            if match is not None:
                dropped.append({"id": cid, "stage": "dedup", "reason": "contaminated",
                                "message": f"AST similarity {match.score:.3f} to reference {match.other}"})
            else:
                clean[cid] = rec
        dups = near_duplicates(((cid, r["code"]) for cid, r in clean.items()), self.config.dedup)
        tasks = []
        for cid, rec in sorted(clean.items()):
            if cid in dups:
                dropped.append({"id": cid, "stage": "dedup", "reason": "near_duplicate",
                                "message": f"AST similarity {dups[cid].score:.3f} to {dups[cid].other}"})
                continue
            f = filtered.records[cid]
            tasks.append({
                "id": cid, "name": cid.rsplit("/", 1)[-1], "code": rec["code"], "ops": rec["ops"], "shapes": rec["shapes"] or _probed_shapes(f),
                "dtypes": rec["dtypes"] or f["probe"].get("input_dtypes", []), "timings": f["timings"],
                "verdicts": {k: ("keep" if v["keep"] else v["reason"]) for k, v in f["verdicts"].items()},
                "provenance": rec["provenance"], "requires": rec.get("requires", []), "level": None, "source": "synth",
            })
        dropped.sort(key=lambda d: d["id"])
        write_jsonl_atomic(self.out / "tasks.jsonl", tasks)
        write_jsonl_atomic(self.out / "dropped.jsonl", dropped)
        summary = {
            "composed": len(composed.records),
            "compose_errors": sum(1 for r in composed.records.values() if r.get("error")),
            "filtered": len(filtered.records),
            "kept_after_filter": len(survivors),
            "kept": len(tasks),
            "dropped_by_reason": dict(sorted(Counter(d["reason"] for d in dropped).items())),
            "distinct_op_sets": len({tuple(sorted(set(t["ops"]))) for t in tasks}),
            "with_3plus_ops": sum(1 for t in tasks if len(t["ops"]) >= 3),
        }
        (self.out / "summary.json").write_text(json.dumps(summary, indent=1, sort_keys=True))
        return summary

    # -- all stages ----------------------------------------------------------------
    def build(self) -> dict[str, Any]:
        """Mine, then compose/filter/dedup rounds until the target is met; returns the summary."""
        try:
            return self._build()
        finally:
            self.close()

    def _build(self) -> dict[str, Any]:
        t0 = time.monotonic()
        c = self.config
        catalog = self.mine()
        summary: dict[str, Any] = {}
        start = 0
        # Rounds are always walked from 0 (done items are skipped), so where a build
        # stops depends only on the verdicts, never on where an earlier run was killed.
        while start < c.max_candidates:
            indices = range(start, min(start + c.round_size, c.max_candidates))
            composed = self.compose(indices, catalog)
            ids = [f"synth/s{c.seed}-{i:05d}" for i in indices]
            filtered = self.filter(composed, ids)
            summary = self.dedup(composed, filtered)
            log.info("round done", candidates=indices.stop, kept=summary["kept"], target=c.target_tasks,
                     dropped=summary["dropped_by_reason"], elapsed_s=round(time.monotonic() - t0, 1))
            start = indices.stop
            if summary["kept"] >= c.target_tasks:
                break
        summary["wall_s"] = round(time.monotonic() - t0, 1)
        summary["operators"] = len(catalog)
        (self.out / "summary.json").write_text(json.dumps(summary, indent=1, sort_keys=True))
        return summary
