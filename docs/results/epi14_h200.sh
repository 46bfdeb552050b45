#!/bin/bash
# v9 (issue 14, helper epi14): one H200 call -- race of tmas (v9 loop) against tmas8 (v8 loop) and DeepGEMM, ncu of
# both on 4096 x 32768 causal H = 32, the quick correctness sweep with tmas, racecheck on the small subset.
# From the repo root with rawindexer/_kernels, build/race and .whl (the DeepGEMM wheel) present:
#   bash docs/results/epi14_h200.sh
set -u
OUT=${OUT:-/tmp/epi14_out}; mkdir -p "$OUT"
python3 -m zipfile -e .whl/tokenspeed_deepgemm-*.whl /tmp/dg
export PYTHONPATH=/tmp/dg:$PWD PYTHONUNBUFFERED=1 CUDA_HOME=/usr/local/cuda
T0=$(date +%s)
step() { local name=$1 limit=$2; shift 2; echo "== $name (t=$(( $(date +%s) - T0 )) s)";
         timeout "$limit" "$@" > "$OUT/$name.log" 2>&1; echo "rc=$? t=$(( $(date +%s) - T0 )) s" >> "$OUT/$name.log";
         grep -v '^PASS' "$OUT/$name.log" | grep -v "cuGetProcAddress\|^========= $" | tail -${TAIL:-6}; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu --format=csv,noheader
TAIL=14 step epi14_race 240 python3 bench/race_sm90.py --impls tmas8,tmas --grade tmas --reps 10 --out "$OUT"
M=gpu__time_duration.sum,l1tex__throughput.avg.pct_of_peak_sustained_active,lts__throughput.avg.pct_of_peak_sustained_elapsed
M=$M,sm__inst_issued.avg.pct_of_peak_sustained_active,sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active
M=$M,sm__warps_active.avg.pct_of_peak_sustained_active,smsp__inst_executed.sum
for s in barrier gmma long_scoreboard math_pipe_throttle short_scoreboard wait; do
  M=$M,smsp__average_warps_issue_stalled_${s}_per_issue_active.ratio; done
for d in tmas tmas8; do
  TAIL=0 step epi14_ncu_$d 90 ncu --clock-control none -k regex:_${d}\$ --launch-skip 1 --launch-count 1 --metrics $M \
    python3 bench/race_sm90.py --profile $d --heads 32
done
cat "$OUT"/epi14_ncu_tmas.log "$OUT"/epi14_ncu_tmas8.log > "$OUT/epi14_ncu.txt" && rm "$OUT"/epi14_ncu_tmas*.log
grep -h "duration\|tensor_cycles\|inst_issued\|inst_executed\|stalled_wait\|short_score" "$OUT/epi14_ncu.txt"
step epi14_sweep 150 python3 tests/gpu/test_cuda_gpu.py --quick --designs tmas
SAN=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
step epi14_racecheck 150 "$SAN" --tool racecheck --report-api-errors no --error-exitcode 9 \
  python3 tests/gpu/test_cuda_gpu.py --racecheck-subset --designs tmas
echo "== done (t=$(( $(date +%s) - T0 )) s)"
