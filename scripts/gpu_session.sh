#!/usr/bin/env bash
# One GPU-machine session: install carried wheels, then run the named parts.
#   bash scripts/gpu_session.sh [doctor] [gputests] [env_latency] [eval] [train] [data] ...
# Results go to ${OUT:-.gpu-out}/: summary.txt (tails of every part) and
# results.tar.gz (full logs and JSON). Every part has its own time cap so one
# hang cannot eat the lease.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-.gpu-out}
RES=$OUT/res
mkdir -p "$RES"
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
if [ -d .whl ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /opt/ca-site .whl/*.whl \
    || { echo "wheel install failed"; exit 3; }
  export PYTHONPATH=/opt/ca-site${PYTHONPATH:+:$PYTHONPATH} PATH=/opt/ca-site/bin:$PATH
fi
summary=$OUT/summary.txt
: > "$summary"
part() {  # part NAME SECONDS CMD...
  local name=$1 secs=$2; shift 2
  local t0=$(date +%s)
  echo "== $name ($(date -u +%T))" | tee -a "$summary"
  timeout -k 10 "$secs" "$@" > "$RES/$name.log" 2>&1
  local rc=$?
  tail -n 40 "$RES/$name.log" >> "$summary"
  echo "== $name rc=$rc in $(( $(date +%s) - t0 )) s" | tee -a "$summary"
}
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > "$RES/nvidia-smi.txt" 2>&1
for what in "$@"; do
  case $what in
    doctor)      part doctor 60 cuda-agent doctor ;;
    gputests)    part gputests 420 python3 -m pytest -m gpu -q -p no:cacheprovider --timeout 300 -x --junitxml "$RES/gpu-junit.xml" ;;
    envinfo)     part envinfo 60 bash -c 'ls -la /usr/local/cuda/lib64 | grep -i cudart; python3 -c "import torch,os;print(torch.__file__)"; find / -name "libcudart.so*" -not -path "*/proc/*" 2>/dev/null | head' ;;
    gpufiles)    # each GPU test file on its own clock, so one hang cannot hide the others' tracebacks
                 for f in ${GPU_FILES:-$(grep -rl "mark.gpu" tests | sort)}; do
                   part "gpu_$(basename "$f" .py)" "${GPU_FILE_TIMEOUT:-150}" python3 -m pytest -m gpu -q --tb=short -p no:cacheprovider --timeout 120 "$f"
                 done ;;
    gputests-v)  part gputests 400 python3 -m pytest -m gpu -v -p no:cacheprovider --timeout 120 -o addopts="--import-mode=importlib -ra --durations=15" ;;
    gputests-k)  part gputests 420 python3 -m pytest -m gpu -q -p no:cacheprovider --timeout 300 --junitxml "$RES/gpu-junit.xml" ;;
    env_latency) part env_latency 400 python3 benchmarks/env_latency.py --out "$RES/env_latency.json" ;;
    eval)        part eval_throughput 400 python3 benchmarks/eval_throughput.py --out "$RES/eval_throughput.json" ;;
    train)       part train_throughput 420 python3 benchmarks/train_throughput.py --out "$RES/train_throughput.json" ;;
    data)        part data_build 500 python3 benchmarks/data_build_h200.py --out "$RES/data" ;;
    main_job)    part main_job 300 bash -c 'cuda-agent run examples/tasks/swish.py --policy scripted:examples/trajectories/swish_cuda.yaml --backend cuda --out '"$RES"'/main_job' ;;
    *) echo "unknown part $what" | tee -a "$summary" ;;
  esac
done
tar czf "$OUT/results.tar.gz" -C "$RES" . 2>/dev/null
cp "$summary" "$OUT/summary.txt" 2>/dev/null || true
rm -rf "$RES"
cat "$summary" | tail -c 11000
