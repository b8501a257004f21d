#!/usr/bin/env bash
# Put the pinned KernelBench problems (KernelBench/level1..4 and LICENSE) into .kernelbench/ at the repo root.
#
#   bash scripts/fetch_kernelbench.sh [MIRROR]
#
# MIRROR: a local clone or bare mirror of ScalingIntelligence/KernelBench (machines without GitHub access);
# without it the repository of scripts/kernelbench.lock is cloned. The commit of the lock file is checked out
# and verified; .kernelbench/COMMIT records it. Only problem files and the licence are copied: task data, never
# KernelBench's harness code. Then: cuda-agent eval --tasks 'kernelbench:.kernelbench?levels=1' ...
set -euo pipefail
repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
lock="$repo_root/scripts/kernelbench.lock"
commit="$(sed -n 's/^commit=//p' "$lock")"
url="$(sed -n 's/^repository=//p' "$lock")"
dest="${KERNELBENCH_DEST:-$repo_root/.kernelbench}"
source="${1:-${KERNELBENCH_MIRROR:-}}"

if [[ -f "$dest/COMMIT" && "$(cat "$dest/COMMIT")" == "$commit" ]]; then
  echo "KernelBench $commit already in $dest"
  exit 0
fi
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
if [[ -n "$source" ]]; then
  [[ -d "$source" ]] || { echo "fetch_kernelbench: mirror $source is not a folder" >&2; exit 2; }
  git_dir="$source"
else
  git clone --quiet --bare --filter=blob:none "$url" "$work/mirror.git"
  git_dir="$work/mirror.git"
fi
resolved="$(git -C "$git_dir" rev-parse --verify --quiet "$commit^{commit}" || true)"
if [[ "$resolved" != "$commit" ]]; then
  echo "fetch_kernelbench: commit $commit (scripts/kernelbench.lock) is not in $git_dir" >&2
  exit 3
fi
git -C "$git_dir" archive --format=tar "$commit" LICENSE KernelBench/level1 KernelBench/level2 \
  KernelBench/level3 KernelBench/level4 | tar -x -C "$work"
count="$(find "$work/KernelBench" -name '*.py' | wc -l)"
if [[ "$count" -lt 250 ]]; then
  echo "fetch_kernelbench: only $count problem files at $commit, expected at least 250 (levels 1-3)" >&2
  exit 4
fi
rm -rf "$dest"
mkdir -p "$dest"
mv "$work/KernelBench" "$work/LICENSE" "$dest/"
echo "$commit" > "$dest/COMMIT"
echo "KernelBench $commit: $count problem files in $dest"
