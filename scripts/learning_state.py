"""Keep the learning curve's carried state (actors, critics, data core, records) in git history, out of the work tree.

The GPU machine keeps nothing between runs, and a new development checkout holds only what has landed on main:
``.learning_state/`` is ignored (it is tens of MB and travels with each device call), so a new checkout lost it once
(session 23: the SFT actors had to be trained again). The working tree that travels to the device is capped at
64 MiB, so the state cannot simply be tracked either. Instead ``save`` lands the files in one commit and removes
them in the next: the blobs stay reachable from main's history, the tree stays small, and the manifest
``gpu-state/learning_state.json`` names the commit and each file's SHA-256.

    python scripts/learning_state.py save .learning_state      # two commits on the current branch
    python scripts/learning_state.py restore .learning_state   # a new checkout: the files back, hashes checked
    python scripts/learning_state.py list                      # what the manifest holds
    python scripts/learning_state.py retire rl_actor_seed0.safetensors -m "why"   # stale: not restored again

``subset`` copies what a call for some seeds needs (the data core, the records, those seeds' ``*_seed<k>`` files)
into another folder: the tree that travels to the device is capped at 64 MiB, and three seeds' actors and critics
(six to nine 11-12 MB files) do not fit beside the wheels. Carry that folder instead; the records that come back
hold every seed's entries (the call merges into the carried ones), so copy the returned files over the full folder.

    python scripts/learning_state.py subset .learning_state .learning_state_call --seeds 0
    python scripts/learning_state.py subset .learning_state .learning_state_call --seeds 1 --without 'state_seed*'

(past RL step 1 the SFT actors are not read). Two seeds' RL actors and critics still do not fit one call: with the
wheels (8 MiB) and the tracked tree (10 MiB in session 27) they come to about 64.4 MiB.

``take`` brings one call's returned files into the full folder for the seeds that call ran, and only those: their
``*_seed<k>`` files are copied, and in each returned ``records_*.json`` every per-seed entry of those seeds (steps
done, training metrics, points, partial counts) replaces the full folder's, while the other seeds' entries stay.
Copying the returned records over the folder is right only when the call carried records that already held every
earlier call's results; calls launched from one stale subset each (for example three seeds one after another,
before copying anything back) need ``take``, or a later copy erases an earlier seed's step.

    python scripts/learning_state.py take .learning_state /path/to/files_at/learning_state --seeds 1

The PPO steps' rollouts (``rollouts_seed<k>_step<n>.pt``, tokens and rewards, what ``benchmarks/ppo_trust_region.py
--keep-rewards`` replays on the CPU) are kept the same way: ``take`` also copies those of its seeds from the
``rollouts`` folder beside the returned one, and ``subset`` never carries them (the device does not read them).

``retire`` moves entries to the manifest's ``retired`` list (commit, path and hash kept, with the reason): a restore
no longer writes them, and the blobs stay in history for whoever wants the old state back.

``save`` needs a clean index (it commits only its own paths) and keeps, per file name, the newest copy: a later
save of ``records_sft.json`` replaces the earlier one in the manifest, files it does not name stay as they were.
"""

from __future__ import annotations

import argparse
import fnmatch
import hashlib
import json
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MANIFEST = ROOT / "gpu-state" / "learning_state.json"
STAGE = "gpu-state/learning_state"
#: What a learning-curve state folder holds (see benchmarks/learning_curve.py); anything else is refused.
PATTERNS = ("*.safetensors", "data_core.tar.gz", "records_*.json", "rollouts_seed*_step*.pt")
#: The kept PPO rollouts (tokens, rewards; ~2.6 MB a step): replayed on the CPU (benchmarks/ppo_trust_region.py),
#: never read on the device, so ``subset`` leaves them out of what travels.
ROLLOUTS = re.compile(r"^rollouts_seed(\d+)_step\d+\.pt$")


def git(*args: str, data: bytes | None = None) -> bytes:
    res = subprocess.run(["git", *args], cwd=ROOT, input=data, capture_output=True)
    if res.returncode:
        raise SystemExit(f"git {' '.join(args)} failed: {res.stderr.decode().strip()}")
    return res.stdout


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def load_manifest() -> dict:
    return json.loads(MANIFEST.read_text()) if MANIFEST.exists() else {"files": {}}


def state_files(src: Path) -> list[Path]:
    files = sorted({p for pat in PATTERNS for p in src.glob(pat) if p.is_file()})
    if not files:
        raise SystemExit(f"{src} holds no learning-curve state (expected {', '.join(PATTERNS)})")
    return files


def save(src: Path, message: str) -> None:
    if git("diff", "--cached", "--name-only").strip():
        raise SystemExit("the index has staged changes: commit or unstage them first (save makes its own commits)")
    files = state_files(src)
    manifest = load_manifest()
    changed = [p for p in files if manifest["files"].get(p.name, {}).get("sha256") != sha256(p)]
    if not changed:
        print("nothing new: every file matches the manifest")
        return
    stage = ROOT / STAGE
    stage.mkdir(parents=True, exist_ok=True)
    for p in changed:
        (stage / p.name).write_bytes(p.read_bytes())
    paths = [f"{STAGE}/{p.name}" for p in changed]
    git("add", "-f", *paths)
    git("commit", "-q", "-m", f"learning state: {message} ({len(changed)} files, kept in history)", "--", *paths)
    commit = git("rev-parse", "HEAD").decode().strip()
    for p in changed:
        manifest["files"][p.name] = {"commit": commit, "path": f"{STAGE}/{p.name}", "sha256": sha256(p),
                                     "bytes": p.stat().st_size, "note": message}
    git("rm", "-q", "--cached", *paths)
    for p in changed:
        (stage / p.name).unlink()
    if not any(stage.iterdir()):
        stage.rmdir()
    MANIFEST.write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    git("add", str(MANIFEST.relative_to(ROOT)))
    git("commit", "-q", "-m", f"learning state: manifest for {commit[:10]} (files out of the tree again)", "--",
        *paths, str(MANIFEST.relative_to(ROOT)))
    print(f"saved {len(changed)} files in {commit[:10]}: {', '.join(p.name for p in changed)}")


def restore(dest: Path) -> None:
    manifest = load_manifest()
    if not manifest["files"]:
        raise SystemExit(f"{MANIFEST} names no files: nothing was saved yet")
    dest.mkdir(parents=True, exist_ok=True)
    for name, entry in sorted(manifest["files"].items()):
        blob = git("show", f"{entry['commit']}:{entry['path']}")
        if hashlib.sha256(blob).hexdigest() != entry["sha256"]:
            raise SystemExit(f"{name}: the blob in {entry['commit'][:10]} does not match the manifest's SHA-256")
        (dest / name).write_bytes(blob)
        print(f"{name}: {len(blob)} bytes from {entry['commit'][:10]}")


def retire(names: list[str], reason: str) -> None:
    if git("diff", "--cached", "--name-only").strip():
        raise SystemExit("the index has staged changes: commit or unstage them first (retire makes its own commit)")
    manifest = load_manifest()
    unknown = [n for n in names if n not in manifest["files"]]
    if unknown:
        raise SystemExit(f"the manifest names no {unknown}; it holds: {', '.join(sorted(manifest['files'])) or 'nothing'}")
    retired = manifest.setdefault("retired", [])
    for n in names:
        retired.append({"name": n, **manifest["files"].pop(n), "retired_because": reason})
    MANIFEST.write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    git("add", str(MANIFEST.relative_to(ROOT)))
    git("commit", "-q", "-m", f"learning state: retire {len(names)} files ({reason})", "--", str(MANIFEST.relative_to(ROOT)))
    print(f"retired {len(names)} files: {', '.join(names)}")


def subset(src: Path, dest: Path, seeds: list[int], without: list[str] | None = None) -> None:
    files = state_files(src)
    keep = [p for p in files if not re.search(r"_seed\d+\.", p.name) or any(p.name.endswith(f"_seed{k}.safetensors")
                                                                           for k in seeds)]
    keep = [p for p in keep if not any(fnmatch.fnmatch(p.name, pattern) for pattern in without or [])
            and not ROLLOUTS.match(p.name)]
    if dest.exists():
        for old in dest.iterdir():
            old.unlink()
    dest.mkdir(parents=True, exist_ok=True)
    for p in keep:
        (dest / p.name).write_bytes(p.read_bytes())
    size = sum(p.stat().st_size for p in keep)
    print(f"{dest}: {len(keep)} files, {size / 2**20:.1f} MiB ({', '.join(p.name for p in keep)})")


def _seed_keyed(value: object) -> bool:
    """A records dict keyed by seed ("0", "1", ...), such as ``steps_done`` or ``points["rl_1"]``."""
    return isinstance(value, dict) and bool(value) and all(isinstance(k, str) and k.isdigit() for k in value)


def merge_seed_entries(full: dict, returned: dict, seeds: list[int]) -> dict:
    """``full`` with every per-seed entry of ``seeds`` taken from ``returned``: where ``returned`` holds a
    seed-keyed dict, the seed's value is its value there or, where it has none, absent (a seed whose evaluation
    finished is no longer in ``partial``). Other seeds' entries and keys that are not per seed stay as in
    ``full``; keys only ``returned`` holds are added."""
    wanted = {str(k) for k in seeds}

    def merge(a: object, b: object) -> object:
        if _seed_keyed(a) or _seed_keyed(b):
            out = {k: v for k, v in (a or {}).items() if k not in wanted}
            out.update({k: v for k, v in (b or {}).items() if k in wanted})
            return out
        if isinstance(a, dict) or isinstance(b, dict):
            a, b = (a if isinstance(a, dict) else {}), (b if isinstance(b, dict) else {})
            out = {}
            for k in {**a, **b}:
                v = merge(a.get(k), b.get(k))
                if v != {} or a.get(k) == {}:  # a per-seed dict left empty (a finished partial count) goes
                    out[k] = v
            return out
        return a if a is not None else b

    return merge(full, returned)


def take(dest: Path, returned: Path, seeds: list[int]) -> None:
    if not returned.is_dir():
        raise SystemExit(f"{returned} is not a folder (give the learning_state folder a device call returned)")
    files = state_files(returned)
    # a step call's rollouts come back beside it, in <files_at>/rollouts/
    beside = returned.parent / "rollouts"
    files += sorted(p for p in beside.glob("rollouts_seed*_step*.pt") if ROLLOUTS.match(p.name)) if beside.is_dir() else []
    seed_of = {p: int(m.group(1)) for p in files if (m := re.search(r"_seed(\d+)\.", p.name) or ROLLOUTS.match(p.name))}
    stray = sorted(p.name for p, k in seed_of.items() if k not in seeds)
    if stray:
        raise SystemExit(f"{returned} holds files of seeds not named in --seeds {seeds}: {', '.join(stray)}")
    if not any(k in seeds for k in seed_of.values()) and not any(p.name.startswith("records_") for p in files):
        raise SystemExit(f"{returned} holds nothing for seeds {seeds}")
    dest.mkdir(parents=True, exist_ok=True)
    for p in files:
        target = dest / p.name
        if target.exists():
            target.chmod(0o644)  # restore writes read-only copies
        if p.name.startswith("records_") and target.exists():
            merged = merge_seed_entries(json.loads(target.read_text()), json.loads(p.read_text()), seeds)
            target.write_text(json.dumps(merged, default=str))
            print(f"{p.name}: seeds {seeds} taken from {returned}, the others kept")
            continue
        target.write_bytes(p.read_bytes())
        print(f"{p.name}: copied")


def seed_list(text: str) -> list[int]:
    """``--seeds`` values: one seed or a comma list (``0``, ``0,1``), so ``--seeds 0 1`` and ``--seeds 0,1`` agree."""
    try:
        return [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: seeds are integers, e.g. '0 1' or '0,1'") from None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("save", help="land the folder's state files in history (two commits)")
    s.add_argument("src", type=Path)
    s.add_argument("-m", "--message", default="learning curve state")
    r = sub.add_parser("restore", help="write the manifest's files into a folder")
    r.add_argument("dest", type=Path)
    sub.add_parser("list", help="print the manifest")
    c = sub.add_parser("subset", help="copy the data core, records and the given seeds' files into another folder")
    c.add_argument("src", type=Path)
    c.add_argument("dest", type=Path)
    c.add_argument("--seeds", type=seed_list, nargs="+", required=True, help="seeds, e.g. '0 1' or '0,1'")
    c.add_argument("--without", action="extend", nargs="+", default=[], metavar="GLOB",
                   help="leave out files matching GLOB (e.g. 'state_seed*': past RL step 1 no SFT actor is read)")
    k = sub.add_parser("take", help="bring a call's returned files in for the seeds it ran, keeping the others'")
    k.add_argument("dest", type=Path)
    k.add_argument("returned", type=Path)
    k.add_argument("--seeds", type=seed_list, nargs="+", required=True, help="seeds, e.g. '0 1' or '0,1'")
    t = sub.add_parser("retire", help="drop files from what restore writes (they stay in history, listed as retired)")
    t.add_argument("names", nargs="+")
    t.add_argument("-m", "--message", required=True, help="why the files are stale")
    args = ap.parse_args()
    if args.cmd == "save":
        save(args.src, args.message)
    elif args.cmd == "restore":
        restore(args.dest)
    elif args.cmd == "subset":
        subset(args.src, args.dest, [x for part in args.seeds for x in part], args.without)
    elif args.cmd == "take":
        take(args.dest, args.returned, [x for part in args.seeds for x in part])
    elif args.cmd == "retire":
        retire(args.names, args.message)
    else:
        json.dump(load_manifest(), sys.stdout, indent=1, sort_keys=True)
        print()


if __name__ == "__main__":
    main()
