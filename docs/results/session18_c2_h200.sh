#!/bin/bash
# Session 18, second H200 call (issue 10), from the repo root with rawindexer/_kernels (the shipped build), .whl and two
# builds carried: .v/wra = python bench/paged_tma_variant.py .v/wra --all -DPAGED_TMA_WG4=1 -DPAGED_TMA_WG4_WREGS=1
# -DPAGED_TMA_WG4_REGS=112 (call 1's four-warpgroup form with setmaxnreg 112 / 24 and the weights in registers; the
# next run's lengths read before the run's waits) and .v/wrb0 = ... -DPAGED_TMA_WG4=1 -DPAGED_TMA_WG4_REGS=112
# -DPAGED_TMA_WG4_BALANCED=1 (D = 128: each block's tile range of the whole batch, computed from context_lens).
#   bash docs/results/session18_c2_h200.sh      # results: $OUT/session18_c2.tgz
# smoke, the tma sweep of wra three ways and wrb0 two, the A/B main / wra / wrb0, main / wra, the ragged A/B main / wra /
# wrb0 / main, then ncu of wra and DeepGEMM at 64 x 32768
# H 64 next_n 2 (SourceCounters: per-instruction stalls).
set -u
RES=${OUT:-/tmp/device_out}; mkdir -p "$RES"
OUT=/tmp/session18_c2; rm -rf "$OUT"
source docs/results/device_common.sh   # step, run_step, pack
PACK=$RES/session18_c2.tgz
DEADLINE=${DEADLINE:-575}
W=$PWD/.v/wra; R=$PWD/.v/wrb0; K=rawindexer/_kernels
run_step smoke 40 bash -c "RAWINDEXER_KERNEL_DIR=$W python3 bench/paged_profile.py --impl tma --batch 8 --context 4096 --next-n 2 --heads 64 && RAWINDEXER_KERNEL_DIR=$R python3 bench/paged_profile.py --impl tma --batch 8 --context 4096 --next-n 2 --heads 64"
grep -q '^rc=0' "$OUT/smoke.log" || { echo "smoke failed"; pack; exit 1; }
TAIL=6 run_step sweep_wra 120 env RAWINDEXER_KERNEL_DIR=$W python3 tests/gpu/test_paged_gpu.py --design tma
TAIL=4 run_step sweep_wra_p4 45 env RAWINDEXER_KERNEL_DIR=$W python3 tests/gpu/test_paged_gpu.py --quick --design tma --split 5 --persistent-grid 4
TAIL=4 run_step sweep_wra_p2 45 env RAWINDEXER_KERNEL_DIR=$W python3 tests/gpu/test_paged_gpu.py --quick --design tma --split 1 --persistent-grid 2
TAIL=4 run_step sweep_wrb0 45 env RAWINDEXER_KERNEL_DIR=$R python3 tests/gpu/test_paged_gpu.py --quick --design tma
TAIL=4 run_step sweep_wrb0_p3 45 env RAWINDEXER_KERNEL_DIR=$R python3 tests/gpu/test_paged_gpu.py --quick --design tma --persistent-grid 3
AB_CHILD_S=90 TAIL=24 run_step ab 240 python3 bench/paged_ab.py main=$K wra=$W wrb0=$R main=$K wra=$W --cases wg4 --log "$OUT/ab.md"
AB_CHILD_S=90 TAIL=14 run_step ab_ragged 150 python3 bench/paged_ab.py main=$K wra=$W wrb0=$R main=$K --cases wg4 --ragged --log "$OUT/ab_ragged.md"
NCU_BIN=$(command -v ncu || ls /usr/local/cuda*/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
SECTIONS="--section SpeedOfLight --section WarpStateStats --section SchedulerStats --section Occupancy --section LaunchStats --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis --section SourceCounters"
prof() {  # $1 = name, $2 = kernel regex, rest: bench/paged_profile.py arguments
  local name=$1 kre=$2; shift 2
  TAIL=3 run_step "ncu_$name" 90 "$NCU_BIN" --clock-control none -k "regex:$kre" --launch-skip 1 --launch-count 1 $SECTIONS -o "$OUT/$name" python3 bench/paged_profile.py "$@"
  "$NCU_BIN" --import "$OUT/$name.ncu-rep" --print-units base > "$OUT/ncu_$name.txt" 2>&1
  grep -E "Duration|DRAM Throughput|Issue Slots Busy|Warp Cycles Per Issued|No Eligible|Registers Per|Achieved Occ" "$OUT/ncu_$name.txt" | head -12 | cut -c1-160
  "$NCU_BIN" --import "$OUT/$name.ncu-rep" --page source --csv --print-source sass > "$OUT/ncu_${name}_sass.csv" 2>&1
  pack
}
if [ -n "$NCU_BIN" ]; then
  RAWINDEXER_KERNEL_DIR=$W prof wra_n128 "bs64_tma_n2" --impl tma --batch 64 --context 32768 --next-n 2 --heads 64
  prof dg_n128 "sm90_fp8_paged_mqa_logits" --impl dg --batch 64 --context 32768 --next-n 2 --heads 64
fi
echo "== done (t=$(( $(date +%s) - T0 )) s)"
pack; ls -la "$RES"
