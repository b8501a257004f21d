M=$(nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits | head -1); echo "mem=$M"
if [ "$M" -gt 100000 ]; then python3 -c "
import json;p='gpu-state/kb_check_run/rows.jsonl';r=[l for l in open(p) if json.loads(l)['status']!='too_large'];open(p,'w').writelines(r)"; fi
KB_STATE=/nonexistent KB_LEVELS=2 KB_IDS=16 KB_CONCURRENCY=1 KB_CHECK_CAP_S=95 SESSION_DEADLINE_S=100 OUT=$OUT/a bash scripts/gpu_session.sh kb_check
KB_STATE=gpu-state/kb_check_run KB_CHECK_ARGS="--retry-errors --recheck-outliers -o eval.device_steps=2" KB_CHECK_CAP_S=440 SESSION_DEADLINE_S=455 OUT=$OUT bash scripts/gpu_session.sh kb_check
