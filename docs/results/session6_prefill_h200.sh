#!/bin/bash
# Session 6 (issue 14), one H200 call, from the repo root with rawindexer/_kernels (the shipped build), build/race
# (`python bench/race_sm90.py --build --build-only tmas,tmasb2,tmasb4`) and .whl (the DeepGEMM wheel) present:
#   bash docs/results/session6_prefill_h200.sh          # results: $OUT/session6_logs.tgz, $OUT/session6_summary.txt
#   race    tmasb4 (tmasb3 with its piece body compiled once per Q buffer) against tmas, tmasb2 and DeepGEMM on the
#           64 race cases, tmasb4 graded
#   sweep, nan   tmasb4's quick sweep and NaN/Inf contract (build/race)
#   ncu     the shipped auto choice (tmasb2, rawindexer/_kernels) and DeepGEMM's fp8_mqa_logits, one launch each (the
#           second call of bench/prefill_profile.py), at H = 64, clean_logits = 0: 4096 x 4096 multi_req, 8192 x 8192
#           causal, 2048 x 65536 causal; a few sections; bench/ncu_summary.py puts them side by side
# Every step is cut to the time left before DEADLINE s; the logs are re-tarred after each step, so a kill keeps them.
set -u
RES=${OUT:-/tmp/device_out}; mkdir -p "$RES"   # what comes back: two files
OUT=/tmp/session6_logs; rm -rf "$OUT"           # step logs and ncu reports (device_common's step() writes here)
source docs/results/device_common.sh
DEADLINE=${DEADLINE:-395}
pack() { tar -C "$OUT" -czf "$RES/session6_logs.tgz" --exclude '*.ncu-rep' . 2>/dev/null; }
run_step() { local name=$1 limit=$2; shift 2; local left=$(( DEADLINE - ($(date +%s) - T0) ));
             [ "$left" -lt 10 ] && { echo "== $name skipped: ${left} s left"; return 1; }
             [ "$limit" -gt "$left" ] && limit=$left; step "$name" "$limit" "$@"; pack; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu --format=csv,noheader

TAIL=40 run_step race 150 python3 bench/race_sm90.py --impls tmas,tmasb2,tmasb4 --grade tmasb4 --reps 5 --out "$OUT"
export RAWINDEXER_KERNEL_DIR=$PWD/build/race
run_step sweep 40 python3 tests/gpu/test_cuda_gpu.py --quick --designs tmasb4
run_step nan 30 python3 tests/gpu/test_cuda_gpu.py --nan --designs tmasb4
unset RAWINDEXER_KERNEL_DIR   # ncu below: the shipped build

NCU_BIN=$(command -v ncu || ls /usr/local/cuda*/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
SECTIONS="--section SpeedOfLight --section ComputeWorkloadAnalysis --section SchedulerStats --section WarpStateStats
          --section Occupancy --section LaunchStats"
M=gpu__time_duration.sum,sm__cycles_elapsed.avg.per_second,dram__throughput.avg.pct_of_peak_sustained_elapsed
M=$M,sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active
M=$M,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active
M=$M,sm__inst_issued.avg.pct_of_peak_sustained_active,smsp__inst_executed.sum
M=$M,sm__warps_active.avg.pct_of_peak_sustained_active,l1tex__throughput.avg.pct_of_peak_sustained_active
M=$M,lts__throughput.avg.pct_of_peak_sustained_elapsed
for s in barrier gmma long_scoreboard math_pipe_throttle mio_throttle short_scoreboard wait; do
  M=$M,smsp__average_warps_issue_stalled_${s}_per_issue_active.ratio; done
export NCU_BIN SECTIONS M
RAWS=()
prof() {  # NAME KERNEL_REGEX, then bench/prefill_profile.py's arguments: its second launch of the kernel is profiled
  local name=$1 kre=$2; shift 2
  # through bash -c so that step's echo of the command stays one short line ($M and $SECTIONS unexpanded)
  TAIL=4 run_step "ncu_$name" 60 bash -c '"$NCU_BIN" --clock-control none --target-processes application-only \
    -k "regex:$0" --launch-skip 1 --launch-count 1 $SECTIONS --metrics "$M" -f -o "$1" \
    python3 bench/prefill_profile.py --heads 64 --no-clean "${@:2}"' "$kre" "$OUT/$name" "$@" || return
  [ -f "$OUT/$name.ncu-rep" ] || return
  timeout 30 "$NCU_BIN" --import "$OUT/$name.ncu-rep" --print-units base > "$OUT/ncu_$name.txt" 2>&1
  timeout 30 "$NCU_BIN" --import "$OUT/$name.ncu-rep" --page raw --csv > "$OUT/ncu_${name}_raw.csv" 2>&1
  RAWS+=("$OUT/ncu_${name}_raw.csv")
  pack
}
if [ -n "$NCU_BIN" ]; then
  for c in 4096:4096:multi_req 8192:8192:causal 2048:65536:causal; do
    IFS=: read -r m n w <<< "$c"; tag=${m}x${n}_${w/multi_req/mr}
    prof "b2_$tag" '_tmasb2$' --impl ours --rows "$m" --keys "$n" --window "$w"
    prof "dg_$tag" 'sm90_fp8_mqa_logits' --impl dg --rows "$m" --keys "$n" --window "$w"
  done
else
  echo "== ncu: not found"
fi

{ echo "# session 6 H200 call: $(date -u)"; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  echo; echo "## race (tail)"; grep -v '^PASS' "$OUT/race_sm90.log" 2>/dev/null | tail -45
  for s in sweep nan; do echo; echo "## $s"; tail -4 "$OUT/$s.log" 2>/dev/null; done
  echo; echo "## ncu (H = 64, clean_logits = 0; b2 = tmasb2 from rawindexer/_kernels, dg = DeepGEMM)"
  python3 bench/ncu_summary.py ${RAWS[@]+"${RAWS[@]}"}
} > "$RES/session6_summary.txt" 2>&1
sed -n '/^## ncu/,$p' "$RES/session6_summary.txt"
echo "== done (t=$(( $(date +%s) - T0 )) s)"
pack; ls -la "$RES"
