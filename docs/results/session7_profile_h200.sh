#!/bin/bash
# Session 7 (issue 14), one H200 call, from the repo root with rawindexer/_kernels (the shipped build) and .whl present:
#   bash docs/results/session7_profile_h200.sh      # results: $OUT/session7_profile.tgz, $OUT/session7_profile.txt
# Where the time of the cases still slower than DeepGEMM goes, per SASS instruction (ncu SourceCounters: warp-stall
# samples by instruction, bench/ncu_sass_stalls.py) and in the headline metrics (bench/ncu_summary.py), ours (the
# shipped auto choice) beside DeepGEMM's fp8_mqa_logits, one launch each (the second call of bench/prefill_profile.py):
#   4096 x 4096 multi_req H 64 c0 (tmasb4) and H 32 c0 (tmas); 1024 x 1024 causal H 64 c0 (wg); DeepGEMM on all three.
set -u
RES=${OUT:-/tmp/device_out}; mkdir -p "$RES"
OUT=/tmp/session7_prof; rm -rf "$OUT"
source docs/results/device_common.sh   # step, run_step, pack
PACK=$RES/session7_profile.tgz
DEADLINE=${DEADLINE:-300}
NCU_BIN=$(command -v ncu || ls /usr/local/cuda*/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
SECTIONS="--section SpeedOfLight --section WarpStateStats --section SourceCounters --section LaunchStats --section Occupancy"
M=gpu__time_duration.sum,sm__cycles_elapsed.avg.per_second,dram__throughput.avg.pct_of_peak_sustained_elapsed
M=$M,sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active,sm__inst_issued.avg.pct_of_peak_sustained_active
M=$M,smsp__inst_executed.sum,sm__warps_active.avg.pct_of_peak_sustained_active,smsp__average_warp_latency_per_inst_issued.ratio
for s in barrier gmma long_scoreboard math_pipe_throttle mio_throttle short_scoreboard wait not_selected dispatch_stall; do
  M=$M,smsp__average_warps_issue_stalled_${s}_per_issue_active.ratio; done
export NCU_BIN SECTIONS M
RAWS=()
# DeepGEMM JIT-compiles at first use: warm its cache outside ncu
python3 bench/prefill_profile.py --impl dg --rows 1024 --keys 1024 --window causal --heads 64 --no-clean >/dev/null 2>&1
python3 bench/prefill_profile.py --impl dg --rows 4096 --keys 4096 --window multi_req --heads 64 --no-clean >/dev/null 2>&1
prof() {  # NAME KERNEL_REGEX, then bench/prefill_profile.py's arguments
  local name=$1 kre=$2; shift 2
  TAIL=4 run_step "ncu_$name" 60 bash -c '"$NCU_BIN" --clock-control none --target-processes application-only \
    -k "regex:$0" --launch-skip 1 --launch-count 1 $SECTIONS --metrics "$M" -f -o "$1" \
    python3 bench/prefill_profile.py --no-clean "${@:2}"' "$kre" "$OUT/$name" "$@" || return
  [ -f "$OUT/$name.ncu-rep" ] || return
  timeout 30 "$NCU_BIN" --import "$OUT/$name.ncu-rep" --page raw --csv > "$OUT/ncu_${name}_raw.csv" 2>&1
  timeout 60 "$NCU_BIN" --import "$OUT/$name.ncu-rep" --page source --csv --print-source sass > "$OUT/sass_$name.csv" 2>&1
  python3 bench/ncu_sass_stalls.py "$OUT/sass_$name.csv" 40 > "$OUT/stalls_$name.txt" 2>&1
  RAWS+=("$OUT/ncu_${name}_raw.csv")
  pack
}
if [ -n "$NCU_BIN" ]; then
  prof b4_4096_mr64 '_tmasb4$' --impl ours --rows 4096 --keys 4096 --window multi_req --heads 64
  prof dg_4096_mr64 'sm90_fp8_mqa_logits' --impl dg --rows 4096 --keys 4096 --window multi_req --heads 64
  prof tmas_4096_mr32 '_tmas$' --impl ours --rows 4096 --keys 4096 --window multi_req --heads 32
  prof dg_4096_mr32 'sm90_fp8_mqa_logits' --impl dg --rows 4096 --keys 4096 --window multi_req --heads 32
  prof wg_1024_c64 'fp8_mqa_logits_sm90' --impl ours --rows 1024 --keys 1024 --window causal --heads 64
  prof dg_1024_c64 'sm90_fp8_mqa_logits' --impl dg --rows 1024 --keys 1024 --window causal --heads 64
else
  echo "== ncu: not found"
fi
{ echo "# session 7 H200 profile call: $(date -u)"; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  python3 bench/ncu_summary.py --all-stalls ${RAWS[@]+"${RAWS[@]}"}
  for f in "$OUT"/stalls_*.txt; do echo; echo "## $(basename "$f")"; head -60 "$f"; done
} > "$RES/session7_profile.txt" 2>&1
head -40 "$RES/session7_profile.txt"
echo "== done (t=$(( $(date +%s) - T0 )) s)"
pack; ls -la "$RES"
