"""The shared bubblewrap builder (``harness._bwrap``), exercised with the real bwrap binary.

Every property the sandboxes promise (read-only root, writable binds only,
private /tmp with our code bound back, hidden folders, no network, own pid
namespace, uid 65534, host /dev only when asked) is checked by running a
small Python program inside the sandbox and reading what it reports.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from cuda_agent.harness import _masked_code_paths
from cuda_agent.harness._bwrap import (
    UNPRIVILEGED_UID,
    BwrapSpec,
    IsolationUnavailable,
    resolve_isolation,
)

ISO = resolve_isolation("auto")
needs_bwrap = pytest.mark.skipif(ISO.level != "bwrap", reason=f"bubblewrap unusable here: {ISO.reason}")


def run_inside(spec: BwrapSpec, code: str, env: dict[str, str] | None = None) -> dict:
    """Run ``code`` (which prints one JSON object last) in the sandbox; return that object."""
    argv = ISO.prefix(spec) + [sys.executable, "-c", textwrap.dedent(code)]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=120, env={**os.environ, **(env or {})})
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


PROBE = """
import json, os, socket
facts = {"uid": os.getuid(), "gid": os.getgid()}
def attempt(path):
    try:
        with open(path, "w") as f:
            f.write("x")
        return "ok"
    except OSError as exc:
        return type(exc).__name__ + ":" + str(exc.errno)
facts["write_writable"] = attempt(os.environ["W"] + "/out.txt")
facts["write_readonly"] = attempt(os.environ["R"] + "/out.txt")
facts["write_tmp"] = attempt("/tmp/private.txt")
facts["sees_host_tmp_file"] = os.path.exists(os.environ["HOST_TMP_FILE"])
facts["hidden_listing"] = os.listdir(os.environ["H"])
try:
    socket.create_connection(("1.1.1.1", 53), timeout=3).close()
    facts["network"] = "connected"
except OSError as exc:
    facts["network"] = type(exc).__name__
facts["pids"] = sorted(int(p) for p in os.listdir("/proc") if p.isdigit())
print(json.dumps(facts))
"""


@needs_bwrap
def test_sandbox_promises_hold_with_real_bwrap(tmp_path: Path) -> None:
    writable, readonly, hidden = tmp_path / "w", tmp_path / "r", tmp_path / "h"
    for d in (writable, readonly, hidden):
        d.mkdir()
    (hidden / "expected.txt").write_text("secret")
    host_tmp_file = Path("/tmp") / f"cuda-agent-bwrap-test-{os.getpid()}"
    host_tmp_file.write_text("host")
    try:
        facts = run_inside(
            BwrapSpec(readonly=[readonly], writable=[writable], hidden=[hidden]),
            PROBE,
            env={"W": str(writable), "R": str(readonly), "H": str(hidden), "HOST_TMP_FILE": str(host_tmp_file)},
        )
    finally:
        host_tmp_file.unlink()
    assert facts["uid"] == UNPRIVILEGED_UID == ISO.uid and facts["gid"] == UNPRIVILEGED_UID
    assert facts["write_writable"] == "ok" and (writable / "out.txt").read_text() == "x"
    assert facts["write_readonly"].startswith("OSError") and not (readonly / "out.txt").exists()
    assert facts["write_tmp"] == "ok" and not Path("/tmp/private.txt").exists()
    assert facts["sees_host_tmp_file"] is False
    assert facts["hidden_listing"] == []
    assert facts["network"] == "OSError"
    assert len(facts["pids"]) <= 3, facts["pids"]  # bwrap's init, the program (and maybe a helper)


@needs_bwrap
def test_root_is_read_only_and_writable_inside_readonly_stays_writable(tmp_path: Path) -> None:
    outer = tmp_path / "ws"
    inner = outer / "build"
    inner.mkdir(parents=True)
    code = """
    import json, os
    def attempt(path):
        try:
            open(path, "w").close()
            return "ok"
        except OSError as exc:
            return str(exc.errno)
    print(json.dumps({"inner": attempt(os.environ["I"] + "/a"), "outer": attempt(os.environ["O"] + "/a"),
                      "etc": attempt("/etc/cuda-agent-test"), "cwd": os.getcwd()}))
    """
    facts = run_inside(BwrapSpec(readonly=[outer], writable=[inner], chdir=inner), code, env={"I": str(inner), "O": str(outer)})
    assert facts["inner"] == "ok" and facts["outer"] != "ok" and facts["etc"] != "ok"
    assert facts["cwd"] == str(inner)


@needs_bwrap
def test_code_under_tmp_is_bound_back_after_masking(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    site = tmp_path / "site"  # tmp_path lives under /tmp, which the sandbox masks
    if not site.is_relative_to("/tmp"):
        pytest.skip("basetemp is not under /tmp")
    (site / "probe_pkg").mkdir(parents=True)
    (site / "probe_pkg" / "__init__.py").write_text("VALUE = 7\n")
    monkeypatch.syspath_prepend(str(site))
    _masked_code_paths.masked_code_paths.cache_clear()
    try:
        code = "import json, probe_pkg; print(json.dumps({'value': probe_pkg.VALUE}))"
        assert run_inside(BwrapSpec(), code, env={"PYTHONPATH": str(site)}) == {"value": 7}
    finally:
        _masked_code_paths.masked_code_paths.cache_clear()


@needs_bwrap
def test_a_virtual_environment_under_tmp_starts_inside_the_sandbox(tmp_path: Path) -> None:
    # CI in a venv made in /tmp: every sandboxed command died with "bwrap: execvp .../bin/python: No such file".
    venv = tmp_path / "venv"
    if not venv.is_relative_to("/tmp"):
        pytest.skip("basetemp is not under /tmp")
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", "--without-pip", str(venv)], check=True)
    # --system-site-packages reaches the *base* interpreter's packages: when these tests themselves run in a venv
    # (a careful user's install), the project lives in that venv, not in the base. Give the new venv every site
    # folder this interpreter has (addsitedir also runs their .pth files: an editable install's finder).
    import site
    import sysconfig

    purelib = Path(subprocess.run([str(venv / "bin" / "python"), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                  capture_output=True, text=True, check=True).stdout.strip())
    ours = [p for p in [*site.getsitepackages(), sysconfig.get_paths()["purelib"]] if Path(p).is_dir()]
    (purelib / "_parent_site.pth").write_text("import site; " + "; ".join(f"site.addsitedir({p!r})" for p in ours) + "\n")
    code = textwrap.dedent("""
        import subprocess, sys
        from cuda_agent.harness._bwrap import BwrapSpec, bwrap_prefix, find_bwrap
        inner = "import sys, cuda_agent.harness; print(sys.prefix)"
        cmd = bwrap_prefix(find_bwrap(), BwrapSpec()) + [sys.executable, "-c", inner]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        print(done.stdout.strip() or done.stderr.strip())
    """)
    done = subprocess.run([str(venv / "bin" / "python"), "-c", code], capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == str(venv)  # started inside, as the venv's interpreter, with the harness importable


@needs_bwrap
def test_host_dev_only_when_asked() -> None:
    minimal = {"null", "zero", "full", "random", "urandom", "tty", "console", "pts", "ptmx", "shm", "fd", "stdin",
               "stdout", "stderr", "core", "mqueue"}
    extra = sorted(set(os.listdir("/dev")) - minimal)
    if not extra:
        pytest.skip("the host /dev has nothing beyond bubblewrap's minimal set")
    code = "import json, os; print(json.dumps(sorted(os.listdir('/dev'))))"
    assert not set(run_inside(BwrapSpec(), code)) & set(extra)
    assert set(extra) <= set(run_inside(BwrapSpec(dev_bind=True), code))


def test_ipc_namespace_kept_only_for_cuda_ipc() -> None:
    # CUDA IPC handles only open in the host's IPC namespace; everything else gets its own.
    from cuda_agent.harness._bwrap import bwrap_prefix

    assert "--unshare-ipc" in bwrap_prefix("bwrap", BwrapSpec())
    assert "--unshare-ipc" not in bwrap_prefix("bwrap", BwrapSpec(share_ipc=True))
    assert "--unshare-pid" not in bwrap_prefix("bwrap", BwrapSpec(unshare_pid=False))


def test_isolation_modes_resolve_with_reasons(tmp_path: Path) -> None:
    missing = str(tmp_path / "no-such-bwrap")
    assert resolve_isolation("process").level == "process"
    assert resolve_isolation("process").prefix(BwrapSpec()) == []
    fallback = resolve_isolation("auto", bwrap_path=missing)
    assert fallback.level == "process" and missing in fallback.reason
    with pytest.raises(IsolationUnavailable, match="set isolation to 'auto' or 'process'"):
        resolve_isolation("bwrap", bwrap_path=missing)
    with pytest.raises(ValueError, match="'auto', 'bwrap' or 'process'"):
        resolve_isolation("docker")  # type: ignore[arg-type]


@needs_bwrap
def test_die_with_parent_ends_the_sandbox(tmp_path: Path) -> None:
    # The sandboxed sleep must end when the process that started bubblewrap is killed.
    marker = tmp_path / "pid"
    starter = textwrap.dedent(
        f"""
        import subprocess, sys
        p = subprocess.Popen({ISO.prefix(BwrapSpec())!r} + ["sleep", "600"])
        open({str(marker)!r}, "w").write(str(p.pid))
        p.wait()
        """
    )
    parent = subprocess.Popen([sys.executable, "-c", starter])
    while not marker.exists() or not marker.read_text():
        if parent.poll() is not None:
            pytest.fail("starter exited early")
        os.sched_yield()
    import psutil

    bwrap = psutil.Process(int(marker.read_text()))
    # Only once the command runs has bubblewrap armed its parent-death signal.
    while not any(p.name() == "sleep" for p in bwrap.children(recursive=True)):
        os.sched_yield()
    sandboxed = bwrap.children(recursive=True)
    parent.kill()
    parent.wait()
    gone, alive = psutil.wait_procs([bwrap, *sandboxed], timeout=60)
    assert not alive, f"still running after their starter was killed: {alive}"


@needs_bwrap
def test_a_runner_started_by_a_thread_that_ends_outlives_that_thread(tmp_path: Path):
    """``--die-with-parent`` is PR_SET_PDEATHSIG, which fires when the forking *thread* exits. Runners started by
    a short-lived thread (the scheduler's warm-up thread made the evaluator and its spare runners) were SIGKILLed
    as it ended; the spawner thread forks them now, so they serve calls after the thread is gone."""
    import threading

    from cuda_agent.harness import messages as m
    from cuda_agent.harness.candidate_pool import CandidatePool
    from cuda_agent.harness.sandbox import RunnerOptions

    options = RunnerOptions(device="cpu", isolation="bwrap", scratch_dir=tmp_path)
    made: list[tuple[CandidatePool, object]] = []

    def start_pool() -> None:
        pool = CandidatePool(options, 1)  # fill() starts the spare
        spare = pool._spare[0]
        spare.wait_ready()  # the sandbox is up (its death signal armed) before this thread ends
        made.append((pool, spare))

    t = threading.Thread(target=start_pool)
    t.start()
    t.join()
    (pool, spare), = made
    try:
        proc = pool.acquire()
        try:
            assert proc is spare and proc.isolation == "bwrap"  # the very runner that thread started
            proc.request(60, m.Guard())  # answers after its starting thread is gone
            assert proc.alive
        finally:
            pool.release(proc)
    finally:
        pool.close()
