"""scripts/learning_state.py keeps the learning curve's state in git history: a new clone gets it back, exactly.

Real git, real subprocesses: a scratch repository holds a copy of the script, as a project checkout would.
"""

from __future__ import annotations

import hashlib
import json
import lzma
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "learning_state.py"
ENV = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@e", "GIT_COMMITTER_NAME": "t",
       "GIT_COMMITTER_EMAIL": "t@e"}


def sh(*cmd: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, cwd=cwd, env=ENV, capture_output=True, text=True)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    (root / "scripts").mkdir(parents=True)
    shutil.copy(SCRIPT, root / "scripts" / "learning_state.py")
    (root / ".gitignore").write_text(".learning_state/\n")
    for cmd in (["git", "init", "-q", "-b", "main"], ["git", "add", "."], ["git", "commit", "-qm", "init"]):
        assert sh(*cmd, cwd=root).returncode == 0
    state = root / ".learning_state"
    state.mkdir()
    (state / "state_seed0.safetensors").write_bytes(os.urandom(300_000))
    (state / "records_sft.json").write_text(json.dumps({"points": {"sft": {"0": [1, 2]}}}))
    (state / "data_core.tar.gz").write_bytes(os.urandom(5000))
    return root


def run(root: Path, *args: str) -> subprocess.CompletedProcess:
    return sh(sys.executable, "scripts/learning_state.py", *args, cwd=root)


def test_save_keeps_files_out_of_the_tree_and_a_fresh_clone_restores_them(repo: Path, tmp_path: Path) -> None:
    res = run(repo, "save", ".learning_state", "-m", "sft actors")
    assert res.returncode == 0, res.stderr
    tracked = sh("git", "ls-files", cwd=repo).stdout.split()
    assert "gpu-state/learning_state.json" in tracked
    assert not [t for t in tracked if t.startswith("gpu-state/learning_state/")]
    assert sh("git", "status", "--porcelain", cwd=repo).stdout == ""

    clone = tmp_path / "clone"
    assert sh("git", "clone", "-q", str(repo), str(clone), cwd=tmp_path).returncode == 0
    res = run(clone, "restore", "out")
    assert res.returncode == 0, res.stderr
    for name in ("state_seed0.safetensors", "records_sft.json", "data_core.tar.gz"):
        assert (clone / "out" / name).read_bytes() == (repo / ".learning_state" / name).read_bytes()


def test_a_second_save_stores_only_what_changed(repo: Path) -> None:
    assert run(repo, "save", ".learning_state").returncode == 0
    first = json.loads((repo / "gpu-state" / "learning_state.json").read_text())["files"]
    (repo / ".learning_state" / "records_sft.json").write_text(json.dumps({"points": {"sft": {"0": [1, 2, 3]}}}))
    (repo / ".learning_state" / "rl_actor_seed0.safetensors").write_bytes(os.urandom(1000))
    res = run(repo, "save", ".learning_state", "-m", "rl step 1")
    assert res.returncode == 0, res.stderr
    assert "2 files" in res.stdout
    second = json.loads((repo / "gpu-state" / "learning_state.json").read_text())["files"]
    assert second["state_seed0.safetensors"] == first["state_seed0.safetensors"]
    assert second["records_sft.json"]["commit"] != first["records_sft.json"]["commit"]
    assert "rl_actor_seed0.safetensors" in second
    assert "nothing new" in run(repo, "save", ".learning_state").stdout


def test_save_refuses_a_dirty_index_and_an_empty_folder(repo: Path) -> None:
    (repo / "other.txt").write_text("x")
    sh("git", "add", "other.txt", cwd=repo)
    res = run(repo, "save", ".learning_state")
    assert res.returncode != 0 and "staged changes" in res.stderr
    sh("git", "reset", "-q", cwd=repo)
    (repo / "empty").mkdir()
    res = run(repo, "save", "empty")
    assert res.returncode != 0 and "no learning-curve state" in res.stderr


def test_restore_refuses_a_blob_that_does_not_match(repo: Path) -> None:
    assert run(repo, "save", ".learning_state").returncode == 0
    manifest = repo / "gpu-state" / "learning_state.json"
    data = json.loads(manifest.read_text())
    data["files"]["records_sft.json"]["sha256"] = "0" * 64
    manifest.write_text(json.dumps(data))
    res = run(repo, "restore", "out")
    assert res.returncode != 0 and "does not match" in res.stderr


def test_retired_files_are_not_restored_and_stay_named_with_their_reason(repo: Path, tmp_path: Path) -> None:
    assert run(repo, "save", ".learning_state").returncode == 0
    res = run(repo, "retire", "state_seed0.safetensors", "-m", "trained with a bf16 RoPE table")
    assert res.returncode == 0, res.stderr
    assert sh("git", "status", "--porcelain", cwd=repo).stdout == ""
    manifest = json.loads((repo / "gpu-state" / "learning_state.json").read_text())
    assert "state_seed0.safetensors" not in manifest["files"]
    [old] = manifest["retired"]
    assert old["name"] == "state_seed0.safetensors" and old["retired_because"] == "trained with a bf16 RoPE table"
    res = run(repo, "restore", "out")
    assert res.returncode == 0, res.stderr
    assert sorted(p.name for p in (repo / "out").iterdir()) == ["data_core.tar.gz", "records_sft.json"]
    blob = subprocess.run(["git", "show", f"{old['commit']}:{old['path']}"], cwd=repo, capture_output=True).stdout
    assert old["encoding"] == "xz"
    assert lzma.decompress(blob) == (repo / ".learning_state" / "state_seed0.safetensors").read_bytes()  # still in history
    res = run(repo, "retire", "nope.json", "-m", "x")
    assert res.returncode != 0 and "names no ['nope.json']" in res.stderr


def test_subset_copies_the_shared_files_and_only_the_named_seeds(repo: Path) -> None:
    state = repo / ".learning_state"
    for name in ("state_seed1.safetensors", "rl_critic_seed0.safetensors", "rl_critic_seed1.safetensors",
                 "rl_actor_seed12.safetensors", "records_rl.json"):
        (state / name).write_bytes(os.urandom(100))
    (repo / ".learning_state_call").mkdir()
    (repo / ".learning_state_call" / "stale_seed1.safetensors").write_bytes(b"x")  # an earlier subset's leftover
    res = run(repo, "subset", ".learning_state", ".learning_state_call", "--seeds", "1")
    assert res.returncode == 0, res.stderr
    got = sorted(p.name for p in (repo / ".learning_state_call").iterdir())
    assert got == ["data_core.tar.gz", "records_rl.json", "records_sft.json", "rl_critic_seed1.safetensors",
                   "state_seed1.safetensors"]
    assert (repo / ".learning_state_call" / "state_seed1.safetensors").read_bytes() == (state / "state_seed1.safetensors").read_bytes()


def test_take_brings_in_only_the_named_seeds_entries(repo: Path, tmp_path: Path) -> None:
    """Three calls, each launched from the same stale subset, each return records holding only its own seed's step:
    taking them one after another keeps every seed's step (copying them over the folder kept only the last)."""
    full = repo / ".learning_state"
    base = {"phase": "rl", "steps_done": {"0": 0, "1": 0, "2": 0}, "critic_pretrained": {"0": True, "1": True, "2": True},
            "train_metrics": {s: [{"stage": "value_pretrain"}] for s in "012"}, "retired_runs": [{"reason": "old"}]}
    (full / "records_rl.json").write_text(json.dumps(base))
    for seed in (0, 1, 2):
        ret = tmp_path / f"returned{seed}"
        ret.mkdir()
        rec = json.loads(json.dumps(base))
        rec["steps_done"][str(seed)] = 1
        rec["train_metrics"][str(seed)].append({"stage": "ppo_agentic", "step": 1, "seed": seed})
        rec["points"] = {"rl_1": {str(seed): [{"episode": seed}]}}
        if seed != 2:  # seed 2's held-out evaluation finished: it has no partial count
            rec["partial"] = {"rl_1": {str(seed): 10 + seed}}
        (ret / "records_rl.json").write_text(json.dumps(rec))
        (ret / f"rl_actor_seed{seed}.safetensors").write_bytes(bytes([seed]) * 100)
        res = run(repo, "take", ".learning_state", str(ret), "--seeds", str(seed))
        assert res.returncode == 0, res.stderr

    merged = json.loads((full / "records_rl.json").read_text())
    assert merged["steps_done"] == {"0": 1, "1": 1, "2": 1}
    assert [len(merged["train_metrics"][s]) for s in "012"] == [2, 2, 2]
    assert merged["train_metrics"]["1"][-1]["seed"] == 1
    assert merged["points"]["rl_1"] == {"0": [{"episode": 0}], "1": [{"episode": 1}], "2": [{"episode": 2}]}
    assert merged["partial"] == {"rl_1": {"0": 10, "1": 11}}
    assert merged["retired_runs"] == [{"reason": "old"}] and merged["phase"] == "rl"
    assert (full / "rl_actor_seed2.safetensors").read_bytes() == bytes([2]) * 100
    assert (full / "state_seed0.safetensors").stat().st_size == 300_000  # untouched


def test_take_refuses_files_of_seeds_not_named(repo: Path, tmp_path: Path) -> None:
    ret = tmp_path / "returned"
    ret.mkdir()
    (ret / "rl_actor_seed1.safetensors").write_bytes(b"x")
    res = run(repo, "take", ".learning_state", str(ret), "--seeds", "0")
    assert res.returncode != 0
    assert "rl_actor_seed1.safetensors" in res.stderr and "--seeds [0]" in res.stderr
    assert not (repo / ".learning_state" / "rl_actor_seed1.safetensors").exists()


def test_subset_leaves_out_what_without_names(repo: Path) -> None:
    state = repo / ".learning_state"
    for name in ("state_seed2.safetensors", "rl_actor_seed1.safetensors", "rl_actor_seed2.safetensors",
                 "rl_critic_seed1.safetensors", "rl_critic_seed2.safetensors"):
        (state / name).write_bytes(os.urandom(100))
    res = run(repo, "subset", ".learning_state", ".learning_state_call", "--seeds", "1", "2", "--without", "state_seed*")
    assert res.returncode == 0, res.stderr
    got = sorted(p.name for p in (repo / ".learning_state_call").iterdir())
    assert got == ["data_core.tar.gz", "records_sft.json", "rl_actor_seed1.safetensors", "rl_actor_seed2.safetensors",
                   "rl_critic_seed1.safetensors", "rl_critic_seed2.safetensors"]
    # the learning curve's own spelling of seeds (a comma list) works too, and --without takes several globs
    res = run(repo, "subset", ".learning_state", ".learning_state_call", "--seeds", "1,2", "--without", "state_seed*",
              "rl_critic*")
    assert res.returncode == 0, res.stderr
    got = sorted(p.name for p in (repo / ".learning_state_call").iterdir())
    assert got == ["data_core.tar.gz", "records_sft.json", "rl_actor_seed1.safetensors", "rl_actor_seed2.safetensors"]
    res = run(repo, "subset", ".learning_state", ".learning_state_call", "--seeds", "one")
    assert res.returncode == 2 and "seeds are integers" in res.stderr


def test_rollouts_are_kept_by_take_and_never_carried_by_subset(repo: Path, tmp_path: Path) -> None:
    """A step call returns its rollouts beside the learning state (<files_at>/rollouts/): ``take`` keeps those of the
    named seeds with the state, ``subset`` never carries them to the device (nothing there reads them)."""
    files_at = tmp_path / "files_at"
    (files_at / "learning_state").mkdir(parents=True)
    (files_at / "rollouts").mkdir()
    (files_at / "learning_state" / "rl_actor_moments_seed1.safetensors").write_bytes(b"m" * 50)
    (files_at / "rollouts" / "rollouts_seed1_step3.pt").write_bytes(b"r" * 70)
    res = run(repo, "take", ".learning_state", str(files_at / "learning_state"), "--seeds", "1")
    assert res.returncode == 0, res.stderr
    state = repo / ".learning_state"
    assert (state / "rollouts_seed1_step3.pt").read_bytes() == b"r" * 70
    assert (state / "rl_actor_moments_seed1.safetensors").read_bytes() == b"m" * 50
    res = run(repo, "subset", ".learning_state", ".learning_state_call", "--seeds", "1")
    assert res.returncode == 0, res.stderr
    got = sorted(p.name for p in (repo / ".learning_state_call").iterdir())
    assert "rl_actor_moments_seed1.safetensors" in got and not any(n.startswith("rollouts_") for n in got)

    (files_at / "rollouts" / "rollouts_seed2_step1.pt").write_bytes(b"x")  # another seed's: refused like its files
    res = run(repo, "take", ".learning_state", str(files_at / "learning_state"), "--seeds", "1")
    assert res.returncode != 0 and "rollouts_seed2_step1.pt" in res.stderr


def manifest_files(root: Path) -> dict:
    return json.loads((root / "gpu-state" / "learning_state.json").read_text())["files"]


def nudged(data: bytes, every: int = 97) -> bytes:
    """``data`` with one byte in ``every`` changed: what a PPO step does to a bf16 actor's bytes, roughly."""
    out = bytearray(data)
    for i in range(8, len(out), every):
        out[i] ^= 1
    return bytes(out)


def test_a_next_version_is_stored_as_a_small_delta_and_a_fresh_clone_rebuilds_the_chain(repo: Path, tmp_path: Path) -> None:
    state = repo / ".learning_state" / "state_seed0.safetensors"
    versions = [state.read_bytes()]
    assert run(repo, "save", ".learning_state", "-m", "step 0").returncode == 0
    assert manifest_files(repo)["state_seed0.safetensors"]["encoding"] == "xz"
    for step in (1, 2, 3):
        versions.append(nudged(versions[-1], 97 + step))
        state.write_bytes(versions[-1])
        res = run(repo, "save", ".learning_state", "-m", f"step {step}")
        assert res.returncode == 0, res.stderr
        entry = manifest_files(repo)["state_seed0.safetensors"]
        assert entry["encoding"] == "xor-xz" and entry["base"]["sha256"] == hashlib.sha256(versions[-2]).hexdigest()
        assert entry["stored_bytes"] < len(versions[-1]) / 5  # random bytes: a full copy would not compress at all
    assert sh("git", "status", "--porcelain", cwd=repo).stdout == ""
    assert not [t for t in sh("git", "ls-files", cwd=repo).stdout.split() if t.startswith("gpu-state/learning_state/")]

    clone = tmp_path / "clone"
    assert sh("git", "clone", "-q", str(repo), str(clone), cwd=tmp_path).returncode == 0
    res = run(clone, "restore", "out")
    assert res.returncode == 0, res.stderr
    assert "3 deltas" in res.stdout
    assert (clone / "out" / "state_seed0.safetensors").read_bytes() == versions[-1]


def test_a_broken_link_of_a_chain_is_named(repo: Path) -> None:
    state = repo / ".learning_state" / "state_seed0.safetensors"
    assert run(repo, "save", ".learning_state").returncode == 0
    state.write_bytes(nudged(state.read_bytes()))
    assert run(repo, "save", ".learning_state").returncode == 0
    manifest = repo / "gpu-state" / "learning_state.json"
    data = json.loads(manifest.read_text())
    data["files"]["state_seed0.safetensors"]["base"]["sha256"] = "0" * 64  # the base no longer matches
    manifest.write_text(json.dumps(data))
    res = run(repo, "restore", "out")
    assert res.returncode != 0 and "state_seed0.safetensors" in res.stderr and "does not match" in res.stderr


def test_a_chain_is_cut_by_a_full_copy_past_its_limit(repo: Path) -> None:
    state = repo / ".learning_state" / "state_seed0.safetensors"
    state.write_bytes(os.urandom(20_000))
    encodings = []
    for step in range(11):
        state.write_bytes(nudged(state.read_bytes(), 50 + step))
        assert run(repo, "save", ".learning_state").returncode == 0
        encodings.append(manifest_files(repo)["state_seed0.safetensors"]["encoding"])
    assert encodings[0] == "xz" and encodings[1:9] == ["xor-xz"] * 8 and encodings[9] == "xz"
    assert encodings[10] == "xor-xz"
    res = run(repo, "restore", "out")
    assert res.returncode == 0, res.stderr
    assert (repo / "out" / "state_seed0.safetensors").read_bytes() == state.read_bytes()


def test_entries_saved_raw_before_compression_still_restore(repo: Path) -> None:
    """The manifest on main holds raw blobs (sessions 23-38): they restore as they are, and a next version is stored
    as a delta against them."""
    raw = os.urandom(40_000)
    stage = repo / "gpu-state" / "learning_state"
    stage.mkdir(parents=True)
    (stage / "rl_actor_seed0.safetensors").write_bytes(raw)
    sh("git", "add", "-f", "gpu-state/learning_state/rl_actor_seed0.safetensors", cwd=repo)
    sh("git", "commit", "-qm", "old style", cwd=repo)
    commit = sh("git", "rev-parse", "HEAD", cwd=repo).stdout.strip()
    sh("git", "rm", "-q", "gpu-state/learning_state/rl_actor_seed0.safetensors", cwd=repo)
    entry = {"commit": commit, "path": "gpu-state/learning_state/rl_actor_seed0.safetensors",
             "sha256": hashlib.sha256(raw).hexdigest(), "bytes": len(raw), "note": "old"}
    (repo / "gpu-state").mkdir(exist_ok=True)
    (repo / "gpu-state" / "learning_state.json").write_text(json.dumps({"files": {"rl_actor_seed0.safetensors": entry}}))
    sh("git", "add", "gpu-state/learning_state.json", cwd=repo)
    sh("git", "commit", "-qm", "old manifest", cwd=repo)
    res = run(repo, "restore", "out")
    assert res.returncode == 0, res.stderr
    assert (repo / "out" / "rl_actor_seed0.safetensors").read_bytes() == raw
    (repo / ".learning_state" / "rl_actor_seed0.safetensors").write_bytes(nudged(raw))
    assert run(repo, "save", ".learning_state").returncode == 0
    entry = manifest_files(repo)["rl_actor_seed0.safetensors"]
    assert entry["encoding"] == "xor-xz" and "encoding" not in entry["base"]
    assert run(repo, "restore", "out2").returncode == 0
    assert (repo / "out2" / "rl_actor_seed0.safetensors").read_bytes() == nudged(raw)


def test_save_refuses_what_would_pass_the_submission_budget_and_commits_nothing(repo: Path) -> None:
    head = sh("git", "rev-parse", "HEAD", cwd=repo).stdout
    res = run(repo, "save", ".learning_state", "--budget-mib", "0.5")  # 300 kB of random bytes, added then removed
    assert res.returncode != 0
    assert "state_seed0.safetensors" in res.stderr and "budget of 0.5 MiB" in res.stderr
    assert sh("git", "rev-parse", "HEAD", cwd=repo).stdout == head
    assert sh("git", "status", "--porcelain", cwd=repo).stdout == ""
    assert not (repo / "gpu-state" / "learning_state").exists()
    res = run(repo, "save", ".learning_state", "--budget-mib", "1")
    assert res.returncode == 0, res.stderr
    res = run(repo, "budget")
    assert res.returncode == 0, res.stderr
    # two commits since the repository's first; the 300 kB blob went in and out: about 0.7 MiB of patches
    assert "2 commits" in res.stdout
    diffs = float(res.stdout.split("diffs ")[1].split(" MiB")[0])
    assert 0.6 < diffs < 1.0


def test_an_xz_subset_is_smaller_and_unxz_gives_back_every_file_exactly(repo: Path) -> None:
    """``subset --xz`` (what a step call carries once the tree and wheels leave no room for plain files) and the
    device's ``unxz``, as scripts/gpu_session.sh's learning part runs it: the same bytes as a plain subset."""
    state = repo / ".learning_state"
    (state / "rl_actor_seed0.safetensors").write_bytes(bytes(200_000) + os.urandom(1000))  # compressible weights
    (state / "records_rl.json").write_text(json.dumps({"steps_done": {"0": 3}, "pad": "x" * 50_000}))
    assert run(repo, "subset", ".learning_state", "plain", "--seeds", "0").returncode == 0
    res = run(repo, "subset", ".learning_state", "packed", "--seeds", "0", "--xz")
    assert res.returncode == 0, res.stderr
    packed = {p.name for p in (repo / "packed").iterdir()}
    # the data core is gzip already and travels as it is; the rest as .xz
    assert packed == {"data_core.tar.gz", "records_sft.json.xz", "records_rl.json.xz", "state_seed0.safetensors.xz",
                      "rl_actor_seed0.safetensors.xz"}
    size = sum(p.stat().st_size for p in (repo / "packed").iterdir())
    assert size < sum(p.stat().st_size for p in (repo / "plain").iterdir())
    assert "as sent (xz" in res.stdout
    res = run(repo, "unxz", "packed")
    assert res.returncode == 0, res.stderr
    plain = {p.name: p.read_bytes() for p in (repo / "plain").iterdir()}
    assert {p.name: p.read_bytes() for p in (repo / "packed").iterdir()} == plain


def test_the_learning_part_of_the_gpu_session_unpacks_the_state_it_is_given(tmp_path: Path) -> None:
    """The line of scripts/gpu_session.sh that finds the ``--state`` folder in LEARNING_ARGS, run as bash runs it."""
    text = (SCRIPT.parents[0] / "gpu_session.sh").read_text()
    line = next(ln.strip() for ln in text.splitlines() if "local lst; lst=$(sed" in ln)
    expr = line.split("lst=", 1)[1]
    for args, want in (("--phase rl_eval,rl_step --seeds 0 --state .learning_state_call --set budget_s=400",
                        ".learning_state_call"), ("--state=/tmp/x --seeds 1", "/tmp/x"), ("--phase sft", "")):
        out = subprocess.run(["bash", "-c", f'LEARNING_ARGS="{args}"; echo {expr}'], capture_output=True, text=True)
        assert out.stdout.strip() == want, (args, out.stdout, out.stderr)
