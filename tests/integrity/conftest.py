"""Fixtures of the integrity tests: the adversarial corpus and real compiled shared objects.

Compiled objects are cached in pytest's cache folder, keyed by source, flags
and compiler, so a second run compiles nothing.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

HERE = Path(__file__).parent
CHEATS = HERE / "cheats"
HONEST = HERE / "honest"


def expected_rule(path: Path) -> str:
    """The rule id a corpus file declares on its first line (``# expect: RULE`` / ``// expect: RULE``)."""
    first = path.read_text().splitlines()[0]
    if "expect:" not in first:
        raise ValueError(f"{path}: first line must declare '# expect: <rule id>' (or '// expect: ...')")
    return first.split("expect:", 1)[1].strip()


def corpus(folder: Path, *suffixes: str) -> list[Path]:
    """Files of one corpus folder, sorted, with the given suffixes."""
    return sorted(p for p in folder.iterdir() if p.suffix in suffixes)


class Compiler:
    """Compiles small C++/CUDA sources into shared objects or object files, cached by content."""

    def __init__(self, cache: Path) -> None:
        self.cache = cache
        cache.mkdir(parents=True, exist_ok=True)

    def _key(self, tool: str, src: Path, flags: list[str]) -> str:
        version = subprocess.run([tool, "--version"], capture_output=True, text=True, check=False).stdout[:200]
        h = hashlib.sha256("\0".join([version, src.read_text(), *flags]).encode()).hexdigest()[:16]
        return f"{src.stem}-{h}"

    def build(self, src: Path, *, shared: bool = True, flags: tuple[str, ...] = (), includes: tuple[Path, ...] = ()) -> Path:
        """``src`` compiled with g++ (``.cpp``) or nvcc (``.cu``); a ``.so`` when ``shared`` else a ``.o``."""
        tool = "nvcc" if src.suffix == ".cu" else "g++"
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} is not on PATH")
        all_flags = [*flags, *(f"-I{p}" for p in includes)]
        out = self.cache / (self._key(tool, src, all_flags) + (".so" if shared else ".o"))
        if out.is_file():
            return out
        tmp = out.with_suffix(out.suffix + ".tmp")
        if tool == "g++":
            cmd = ["g++", "-O1", "-fPIC", "-fopenmp", "-std=c++17", *all_flags]
            cmd += ["-shared", str(src), "-o", str(tmp)] if shared else ["-c", str(src), "-o", str(tmp)]
        else:
            cmd = ["nvcc", "-O1", "-arch=sm_90", "-Xcompiler", "-fPIC", *all_flags, "-c", str(src), "-o", str(tmp)]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900, check=False)
        if proc.returncode != 0:
            raise RuntimeError(f"compiling {src.name} failed:\n{proc.stderr[-3000:]}")
        tmp.rename(out)
        return out

    def build_many(self, sources: list[Path], **kwargs: object) -> dict[Path, Path]:
        """Compile several sources two at a time (this machine has 2 cores)."""
        with ThreadPoolExecutor(max_workers=2) as pool:
            outs = list(pool.map(lambda s: self.build(s, **kwargs), sources))  # type: ignore[arg-type]
        return dict(zip(sources, outs, strict=True))


@pytest.fixture(scope="session")
def compiler(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Compiler:
    """A content-cached compiler for the integrity corpus (pytest's cache folder, else a session temp dir)."""
    cache = getattr(request.config, "cache", None)
    folder = cache.mkdir("integrity-objects") if cache is not None else tmp_path_factory.mktemp("integrity-objects")
    return Compiler(Path(folder))


@pytest.fixture(scope="session")
def plain_shared_objects(compiler: Compiler) -> dict[Path, Path]:
    """Every plain-C++ binary corpus file (cheats and honest), compiled to a ``.so``."""
    sources = corpus(CHEATS / "binary", ".cpp") + corpus(HONEST / "binary", ".cpp")
    return compiler.build_many(sources)


@pytest.fixture(scope="session")
def expectations() -> Callable[[Path], str]:
    """The corpus file -> expected rule reader."""
    return expected_rule


_CORPORA: dict[str, tuple[Path, tuple[str, ...]]] = {
    "python_cheat": (CHEATS / "python", (".py",)),
    "python_honest": (HONEST / "python", (".py",)),
    "cpp_cheat": (CHEATS / "cpp", (".cpp", ".cu", ".cuh", ".h")),
    "cpp_honest": (HONEST / "cpp", (".cpp", ".cu", ".cuh", ".h")),
    "binary_cheat": (CHEATS / "binary", (".cpp",)),
}


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Parametrize ``python_cheat``, ``cpp_honest``, ... over the corpus files, one test id per file."""
    for name, (folder, suffixes) in _CORPORA.items():
        if name in metafunc.fixturenames:
            files = corpus(folder, *suffixes)
            metafunc.parametrize(name, files, ids=[f.name for f in files])


def score_one(tmp_path: Path, task: str, files: dict[str, str], tasks: str | None = None) -> dict:
    """``cuda-agent score`` (CPU backend) of one workspace for ``task``, written from ``{relative path: text}`` (or, for
    a KernelBench single file, ``{file name: text}`` as the whole folder); its report row."""
    import json

    from cuda_agent.cli import main

    solutions = tmp_path / "solutions"
    ws = solutions / task if not any(name.endswith("_kernel.py") for name in files) else solutions
    for name, text in files.items():
        (ws / name).parent.mkdir(parents=True, exist_ok=True)
        (ws / name).write_text(text)
    out = tmp_path / "out"
    only = [] if ws == solutions else ["--only", task]
    main(["score", str(solutions), "--tasks", tasks or str(HERE.parents[1] / "examples" / "tasks"), "--backend", "cpu",
          "--out", str(out), *only])
    (row,) = json.loads((out / "report.json").read_text())["tasks"]
    return row
