#!/bin/bash
# The decode-kernel performance work (issue 10) on one H200, one device call per step. Run from the repo root with
# rawindexer/_kernels (the build under test), .whl (DeepGEMM's wheel) and .carry/var_* (kernel directories of the
# builds compared, each made by docs/results/paged_build_variant.py) carried. (On this workplace the device gets the
# session's checkout: the worktree went as a copy in an ignored folder of it, `cd` there first.)
#   bash docs/results/paged_decodeperf_h200.sh variants "NAME=DIR[:mtN][:sN] ..."   # timing table + decode sweep
#   bash docs/results/paged_decodeperf_h200.sh final ["NAME=DIR..."]               # [timing table +] decode sweep + full bench
# Logs under ${OUT:-/tmp/paged_out}, tarred into one file.
set -u
OUT=${OUT:-/tmp/paged_out}; mkdir -p "$OUT/logs"
export PYTHONUNBUFFERED=1
T0=$(date +%s)
if ls .whl/tokenspeed_deepgemm-*.whl >/dev/null 2>&1; then
  rm -rf /tmp/dg && python3 -m zipfile -e .whl/tokenspeed_deepgemm-*.whl /tmp/dg && export PYTHONPATH=/tmp/dg:$PWD
else
  export PYTHONPATH=$PWD
fi
export CUDA_HOME=/usr/local/cuda
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.draw --format=csv
step() { local name=$1 limit=$2; shift 2; echo "== $name (t=$(( $(date +%s) - T0 )) s): $*";
         timeout "$limit" "$@" > "$OUT/logs/$name.log" 2>&1; echo "rc=$?" >> "$OUT/logs/$name.log";
         grep -v '^PASS' "$OUT/logs/$name.log" | tail -45; }
if [ "$1" = variants ]; then
  step paged_variants 300 python3 docs/results/paged_variants.py $2 --log "$OUT/logs/paged_variants_table.log"
  step paged_sweep "${SWEEP_LIMIT:-170}" python3 tests/gpu/test_paged_gpu.py --log "$OUT/logs/paged_sweep.log"
else
  [ -n "${2:-}" ] && step paged_variants 200 python3 docs/results/paged_variants.py $2 --log "$OUT/logs/paged_variants_table.log"
  step paged_sweep 240 python3 tests/gpu/test_paged_gpu.py --log "$OUT/logs/paged_sweep.log"
  step paged_bench 240 python3 -m rawindexer.bench --paged --log "$OUT/logs/paged_bench.md"
fi
echo "== done (t=$(( $(date +%s) - T0 )) s)"
tar -C "$OUT" -czf "$OUT/logs.tgz" logs && rm -rf "$OUT/logs"
