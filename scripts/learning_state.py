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

``subset --xz`` stores each file xz-compressed (one seed's step call: 28 instead of 40 MB; bf16 weights compress to
~70%, Adam's int8 moments to ~90%, the records to ~5%), and ``scripts/gpu_session.sh``'s ``learning`` part runs
``unxz`` on the ``--state`` folder before anything reads it. Session 41's tracked tree (20 MB) and wheels (8.8 MB)
left no room for a plain subset (40.4 MB) in the 64 MiB a call carries.

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

**What a save costs a submission.** A session's submission is refused whole when the diffs of its commits, added up
as text, pass 256 MiB, and a file added in one commit and removed in the next counts twice (session 39 lost all of its
work that way: three seeds' PPO steps, ~80 MB of blobs each way). So ``save`` stores each file compressed, and a file
that has an earlier version of the same name (the next step's actor, critic) as the xz-compressed XOR of the two when
that is smaller: an actor step then costs ~3.4 MB instead of 12.3, a critic ~4.6 instead of 11.3 (Adam's moments do
not compress: ~11.5 of 12.6). ``restore`` rebuilds a chain of such deltas from its base, checking every link's
SHA-256; a chain is cut (a full copy stored) past ``MAX_CHAIN`` links. Entries saved before this scheme are raw
blobs and restore as before. Before it commits, ``save`` adds up what this session's commits already cost (the diffs
since the commit the checkout started from: the oldest entry of the branch's reflog, or ``--base``) and what the save
would add (twice the stored bytes, base85 included), and refuses past ``--budget-mib`` (default 200 of 256 MiB),
naming each file's cost. ``budget`` prints the session's totals (diff text and packed size) without saving:

    python scripts/learning_state.py budget                    # this session's diffs and pack so far
"""

from __future__ import annotations

import argparse
import fnmatch
import hashlib
import json
import lzma
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
#: How a stored blob becomes the file: ``raw`` (entries saved before compression; the default when absent), ``xz``
#: (lzma of the file), ``xor-xz`` (lzma of the file XOR its ``base`` entry's file, same length).
ENCODINGS = ("raw", "xz", "xor-xz")
SUFFIX = {"xz": ".xz", "xor-xz": ".xor.xz"}
#: Deltas in a row before a full copy is stored again (each restore rebuilds the whole chain).
MAX_CHAIN = 8
#: The submission's limit on its commits' diffs added up as text, and the share a save may bring it to by default.
DIFF_LIMIT_MIB = 256
DEFAULT_BUDGET_MIB = 200
#: A binary diff in git's base85 patch form is ~1.25x the (already compressed) blob, plus headers.
PATCH_FACTOR = 1.25


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


def xor(a: bytes, b: bytes) -> bytes:
    import numpy as np  # noqa: PLC0415 (only save and restore of deltas need it)

    return (np.frombuffer(a, np.uint8) ^ np.frombuffer(b, np.uint8)).tobytes()


def chain_length(entry: dict) -> int:
    n = 0
    while entry.get("encoding") == "xor-xz":
        n, entry = n + 1, entry["base"]
    return n


def materialize(entry: dict, name: str) -> bytes:
    """The file an entry stands for, rebuilt from its blob (and its base chain), SHA-256 checked at every link."""
    blob = git("show", f"{entry['commit']}:{entry['path']}")
    encoding = entry.get("encoding", "raw")
    if encoding == "raw":
        data = blob
    elif encoding == "xz":
        data = lzma.decompress(blob)
    elif encoding == "xor-xz":
        data = xor(materialize(entry["base"], name), lzma.decompress(blob))
    else:
        raise SystemExit(f"{name}: unknown encoding {encoding!r} in {entry['commit'][:10]} (known: {', '.join(ENCODINGS)})")
    if hashlib.sha256(data).hexdigest() != entry["sha256"]:
        raise SystemExit(f"{name}: the blob in {entry['commit'][:10]} does not match the manifest's SHA-256")
    return data


def encode(p: Path, previous: dict | None) -> tuple[bytes, str]:
    """The smaller of the file's xz and, where an earlier version of the same length exists, its XOR delta's."""
    data = p.read_bytes()
    best = (lzma.compress(data, preset=6), "xz")
    if previous is not None and previous.get("bytes") == len(data) and chain_length(previous) < MAX_CHAIN:
        delta = lzma.compress(xor(materialize(previous, p.name), data), preset=6)
        if len(delta) < len(best[0]):
            best = (delta, "xor-xz")
    return best


def session_base(base: str | None) -> str:
    """The commit this session started from: ``base`` if given, else the oldest entry of the branch's reflog."""
    if base:
        return git("rev-parse", "--verify", f"{base}^{{commit}}").decode().strip()
    branch = git("rev-parse", "--abbrev-ref", "HEAD").decode().strip()
    lines = git("reflog", "show", "--format=%H", branch).decode().split()
    if not lines:
        raise SystemExit(f"no reflog for {branch}: give --base COMMIT (the last commit that landed)")
    return lines[-1]


def spent(base: str) -> tuple[int, int, int]:
    """Commits since ``base``, their diffs as binary patches (bytes), and their objects packed (bytes)."""
    commits = len(git("rev-list", f"{base}..HEAD").split())
    diffs = len(git("log", "-p", "--binary", "--format=", f"{base}..HEAD"))
    packed = len(git("pack-objects", "--revs", "--stdout", "-q", data=f"HEAD\n^{base}\n".encode()))
    return commits, diffs, packed


def budget(base: str | None) -> None:
    b = session_base(base)
    commits, diffs, packed = spent(b)
    print(f"since {b[:10]}: {commits} commits, diffs {diffs / 2**20:.1f} MiB of {DIFF_LIMIT_MIB}, "
          f"packed {packed / 2**20:.1f} MiB of 512")


def save(src: Path, message: str, budget_mib: float = DEFAULT_BUDGET_MIB, base: str | None = None) -> None:
    if git("diff", "--cached", "--name-only").strip():
        raise SystemExit("the index has staged changes: commit or unstage them first (save makes its own commits)")
    files = state_files(src)
    manifest = load_manifest()
    changed = [p for p in files if manifest["files"].get(p.name, {}).get("sha256") != sha256(p)]
    if not changed:
        print("nothing new: every file matches the manifest")
        return
    stored = {p.name: encode(p, manifest["files"].get(p.name)) for p in changed}
    cost = {n: int(2 * PATCH_FACTOR * len(blob)) + 2048 for n, (blob, _) in stored.items()}  # added, then removed
    b = session_base(base)
    _, diffs, _ = spent(b)
    if diffs + sum(cost.values()) > budget_mib * 2**20:
        listing = ", ".join(f"{n} {c / 2**20:.1f}" for n, c in sorted(cost.items()))
        raise SystemExit(f"this save would bring the session's diffs to {(diffs + sum(cost.values())) / 2**20:.1f} MiB "
                         f"(spent since {b[:10]}: {diffs / 2**20:.1f}; this save, MiB per file: {listing}), past the "
                         f"budget of {budget_mib:g} MiB (the submission limit is {DIFF_LIMIT_MIB} MiB and a refused "
                         f"submission loses the whole session): save fewer files now, or pass --budget-mib knowingly")
    stage = ROOT / STAGE
    stage.mkdir(parents=True, exist_ok=True)
    paths = []
    for p in changed:
        blob, encoding = stored[p.name]
        path = f"{STAGE}/{p.name}{SUFFIX[encoding]}"
        (ROOT / path).write_bytes(blob)
        paths.append(path)
    git("add", "-f", *paths)
    git("commit", "-q", "-m", f"learning state: {message} ({len(changed)} files, kept in history)", "--", *paths)
    commit = git("rev-parse", "HEAD").decode().strip()
    for p, path in zip(changed, paths):
        blob, encoding = stored[p.name]
        entry = {"commit": commit, "path": path, "sha256": sha256(p), "bytes": p.stat().st_size,
                 "stored_bytes": len(blob), "encoding": encoding, "note": message}
        if encoding == "xor-xz":
            entry["base"] = manifest["files"][p.name]
        manifest["files"][p.name] = entry
    git("rm", "-q", "--cached", *paths)
    for path in paths:
        (ROOT / path).unlink()
    if not any(stage.iterdir()):
        stage.rmdir()
    MANIFEST.write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    git("add", str(MANIFEST.relative_to(ROOT)))
    git("commit", "-q", "-m", f"learning state: manifest for {commit[:10]} (files out of the tree again)", "--",
        *paths, str(MANIFEST.relative_to(ROOT)))
    kinds = ", ".join(f"{p.name} ({stored[p.name][1]}, {len(stored[p.name][0]) / 2**20:.1f} MiB)" for p in changed)
    print(f"saved {len(changed)} files in {commit[:10]}: {kinds}; the session's diffs now about "
          f"{(diffs + sum(cost.values())) / 2**20:.1f} MiB of {DIFF_LIMIT_MIB}")


def restore(dest: Path) -> None:
    manifest = load_manifest()
    if not manifest["files"]:
        raise SystemExit(f"{MANIFEST} names no files: nothing was saved yet")
    dest.mkdir(parents=True, exist_ok=True)
    for name, entry in sorted(manifest["files"].items()):
        data = materialize(entry, name)
        (dest / name).write_bytes(data)
        how = entry.get("encoding", "raw") + (f", {chain_length(entry)} deltas" if chain_length(entry) else "")
        print(f"{name}: {len(data)} bytes from {entry['commit'][:10]} ({how})")


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


def subset(src: Path, dest: Path, seeds: list[int], without: list[str] | None = None, xz: bool = False) -> None:
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
        data = p.read_bytes()
        if xz and not p.name.endswith(".gz"):  # the data core is gzip already
            (dest / (p.name + ".xz")).write_bytes(lzma.compress(data, preset=6))
        else:
            (dest / p.name).write_bytes(data)
    size = sum(p.stat().st_size for p in keep)
    sent = sum(p.stat().st_size for p in dest.iterdir())
    packed = f", {sent / 2**20:.1f} MiB as sent (xz; the device runs `unxz` first)" if xz else ""
    print(f"{dest}: {len(keep)} files, {size / 2**20:.1f} MiB{packed} ({', '.join(p.name for p in keep)})")


def unxz(folder: Path) -> None:
    """Decompress every ``*.xz`` of ``folder`` in place (the device's side of ``subset --xz``; standard library only)."""
    for p in sorted(folder.glob("*.xz")):
        target = p.with_suffix("")
        target.write_bytes(lzma.decompress(p.read_bytes()))
        p.unlink()
        print(f"{target}: {target.stat().st_size} bytes")


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
    s.add_argument("--budget-mib", type=float, default=DEFAULT_BUDGET_MIB,
                   help=f"refuse a save that would bring this session's diffs past this (default {DEFAULT_BUDGET_MIB}; "
                        f"the submission limit is {DIFF_LIMIT_MIB})")
    s.add_argument("--base", help="the commit this session started from (default: the oldest entry of the reflog)")
    u = sub.add_parser("budget", help="what this session's commits cost a submission so far (diffs, packed)")
    u.add_argument("--base", help="the commit this session started from (default: the oldest entry of the reflog)")
    r = sub.add_parser("restore", help="write the manifest's files into a folder")
    r.add_argument("dest", type=Path)
    sub.add_parser("list", help="print the manifest")
    c = sub.add_parser("subset", help="copy the data core, records and the given seeds' files into another folder")
    c.add_argument("src", type=Path)
    c.add_argument("dest", type=Path)
    c.add_argument("--seeds", type=seed_list, nargs="+", required=True, help="seeds, e.g. '0 1' or '0,1'")
    c.add_argument("--without", action="extend", nargs="+", default=[], metavar="GLOB",
                   help="leave out files matching GLOB (e.g. 'state_seed*': past RL step 1 no SFT actor is read)")
    c.add_argument("--xz", action="store_true",
                   help="store each file xz-compressed (28 of 40 MB for one seed's step: room for the tree and wheels "
                        "in the 64 MiB a call carries); the device decompresses with `unxz` before the run")
    x = sub.add_parser("unxz", help="decompress a subset's *.xz files in place (run on the device)")
    x.add_argument("folder", type=Path)
    k = sub.add_parser("take", help="bring a call's returned files in for the seeds it ran, keeping the others'")
    k.add_argument("dest", type=Path)
    k.add_argument("returned", type=Path)
    k.add_argument("--seeds", type=seed_list, nargs="+", required=True, help="seeds, e.g. '0 1' or '0,1'")
    t = sub.add_parser("retire", help="drop files from what restore writes (they stay in history, listed as retired)")
    t.add_argument("names", nargs="+")
    t.add_argument("-m", "--message", required=True, help="why the files are stale")
    args = ap.parse_args()
    if args.cmd == "save":
        save(args.src, args.message, args.budget_mib, args.base)
    elif args.cmd == "budget":
        budget(args.base)
    elif args.cmd == "restore":
        restore(args.dest)
    elif args.cmd == "subset":
        subset(args.src, args.dest, [x for part in args.seeds for x in part], args.without, args.xz)
    elif args.cmd == "unxz":
        unxz(args.folder)
    elif args.cmd == "take":
        take(args.dest, args.returned, [x for part in args.seeds for x in part])
    elif args.cmd == "retire":
        retire(args.names, args.message)
    else:
        json.dump(load_manifest(), sys.stdout, indent=1, sort_keys=True)
        print()


if __name__ == "__main__":
    main()
