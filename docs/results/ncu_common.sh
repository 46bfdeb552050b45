# Sourced by the ncu device scripts (session7_profile_h200.sh, session8_profile_h200.sh) after device_common.sh:
# NCU_BIN, the sections and headline metrics, and `prof NAME KERNEL_REGEX ARGS...`: one launch (the second call of
# bench/prefill_profile.py --no-clean ARGS) under ncu, its raw metrics as CSV (RAWS collects them for
# bench/ncu_summary.py), its per-SASS-instruction stall samples (bench/ncu_sass_stalls.py).
NCU_BIN=$(command -v ncu || ls /usr/local/cuda*/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
SECTIONS="--section SpeedOfLight --section WarpStateStats --section SourceCounters --section LaunchStats --section Occupancy"
M=gpu__time_duration.sum,sm__cycles_elapsed.avg.per_second,dram__throughput.avg.pct_of_peak_sustained_elapsed
M=$M,sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active,sm__inst_issued.avg.pct_of_peak_sustained_active
M=$M,smsp__inst_executed.sum,sm__warps_active.avg.pct_of_peak_sustained_active,smsp__average_warp_latency_per_inst_issued.ratio
for s in barrier gmma long_scoreboard math_pipe_throttle mio_throttle short_scoreboard wait not_selected dispatch_stall; do
  M=$M,smsp__average_warps_issue_stalled_${s}_per_issue_active.ratio; done
export NCU_BIN SECTIONS M
RAWS=()
prof() {  # NAME KERNEL_REGEX, then bench/prefill_profile.py's arguments
  local name=$1 kre=$2; shift 2
  TAIL=4 run_step "ncu_$name" ${PROF_LIMIT:-60} bash -c '"$NCU_BIN" --clock-control none --target-processes application-only \
    -k "regex:$0" --launch-skip 1 --launch-count 1 $SECTIONS --metrics "$M" -f -o "$1" \
    python3 bench/prefill_profile.py --no-clean "${@:2}"' "$kre" "$OUT/$name" "$@" || return
  [ -f "$OUT/$name.ncu-rep" ] || return
  timeout 30 "$NCU_BIN" --import "$OUT/$name.ncu-rep" --page raw --csv > "$OUT/ncu_${name}_raw.csv" 2>&1
  timeout 60 "$NCU_BIN" --import "$OUT/$name.ncu-rep" --page source --csv --print-source sass > "$OUT/sass_$name.csv" 2>&1
  python3 bench/ncu_sass_stalls.py "$OUT/sass_$name.csv" 40 > "$OUT/stalls_$name.txt" 2>&1
  RAWS+=("$OUT/ncu_${name}_raw.csv")
  pack
}
# `summary TITLE FILE`: the headline metrics side by side and each profile's top stall locations, into FILE.
summary() {
  { echo "# $1: $(date -u)"; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
    python3 bench/ncu_summary.py --all-stalls ${RAWS[@]+"${RAWS[@]}"}
    for f in "$OUT"/stalls_*.txt; do echo; echo "## $(basename "$f")"; head -60 "$f"; done
  } > "$2" 2>&1
  head -40 "$2"
}
# `prof_1024_c64_beside_dg NAME KERNEL_REGEX TITLE FILE` (session 9): 1024^2 causal H 64 under ncu, ours (the kernel
# KERNEL_REGEX picks) as NAME_1024_c64 and DeepGEMM's, with the SMs' active-cycle spread added to the metrics, then
# `summary TITLE FILE`. DeepGEMM is warmed (JIT) outside ncu first.
prof_1024_c64_beside_dg() {
  local name=$1 kre=$2 title=$3 file=$4 shape="--rows 1024 --keys 1024 --window causal --heads 64"
  M=$M,sm__cycles_active.avg,sm__cycles_active.max,sm__cycles_active.min,sm__cycles_elapsed.max
  python3 bench/prefill_profile.py --impl dg $shape --no-clean >/dev/null 2>&1
  [ -n "$NCU_BIN" ] || { echo "== ncu: not found"; return; }
  PROF_LIMIT=60
  prof "${name}_1024_c64" "$kre" --impl ours $shape
  prof dg_1024_c64 'sm90_fp8_mqa_logits' --impl dg $shape
  summary "$title" "$file"
}
