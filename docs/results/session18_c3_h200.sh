#!/bin/bash
# Session 18, third H200 call (issue 10), from the repo root with rawindexer/_kernels (the shipped build), .whl and
# .v/wre = python bench/paged_tma_variant.py .v/wre --all -DPAGED_TMA_WG4=1 -DPAGED_TMA_WG4_WREGS=1
# -DPAGED_TMA_WG4_REGS=112 (call 2's wra with a leaner tile loop: shared-space addresses only, the row pointer and
# i >= 0 made visible to ptxas; H 64 next_n 2 232 instructions per tile against wra's 254 and the shipped 244) and
# .v/wres = ... -DPAGED_TMA_WG4_SUSPEND_NS=0x989680 (D = 128; the producers' free-slot wait sleeps, as DeepGEMM's).
#   bash docs/results/session18_c3_h200.sh      # results: $OUT/session18_c3.tgz
# smoke, the tma sweep of wre three ways, the A/B main / wre / wres twice (uniform lengths), then ncu of wre at 64 x 32768
# H 64 next_n 2 (SourceCounters).
set -u
RES=${OUT:-/tmp/device_out}; mkdir -p "$RES"
OUT=/tmp/session18_c3; rm -rf "$OUT"
source docs/results/device_common.sh   # step, run_step, pack
PACK=$RES/session18_c3.tgz
DEADLINE=${DEADLINE:-420}
W=$PWD/.v/wre; WS=$PWD/.v/wres; K=rawindexer/_kernels
run_step smoke 40 bash -c "RAWINDEXER_KERNEL_DIR=$W python3 bench/paged_profile.py --impl tma --batch 8 --context 4096 --next-n 2 --heads 64 && RAWINDEXER_KERNEL_DIR=$WS python3 bench/paged_profile.py --impl tma --batch 8 --context 4096 --next-n 2 --heads 64"
grep -q '^rc=0' "$OUT/smoke.log" || { echo "smoke failed"; pack; exit 1; }
TAIL=6 run_step sweep_wre 120 env RAWINDEXER_KERNEL_DIR=$W python3 tests/gpu/test_paged_gpu.py --design tma
TAIL=4 run_step sweep_wre_p4 45 env RAWINDEXER_KERNEL_DIR=$W python3 tests/gpu/test_paged_gpu.py --quick --design tma --split 5 --persistent-grid 4
TAIL=4 run_step sweep_wre_p2 45 env RAWINDEXER_KERNEL_DIR=$W python3 tests/gpu/test_paged_gpu.py --quick --design tma --split 1 --persistent-grid 2
TAIL=4 run_step sweep_wres 45 env RAWINDEXER_KERNEL_DIR=$WS python3 tests/gpu/test_paged_gpu.py --quick --design tma
AB_CHILD_S=90 TAIL=24 run_step ab 260 python3 bench/paged_ab.py main=$K wre=$W wres=$WS main=$K wre=$W wres=$WS --cases wg4 --log "$OUT/ab.md"
NCU_BIN=$(command -v ncu || ls /usr/local/cuda*/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
SECTIONS="--section SpeedOfLight --section WarpStateStats --section SchedulerStats --section Occupancy --section LaunchStats --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis --section SourceCounters"
if [ -n "$NCU_BIN" ]; then
  TAIL=3 RAWINDEXER_KERNEL_DIR=$W run_step ncu_wre_n128 60 "$NCU_BIN" --clock-control none -k "regex:bs64_tma_n2" --launch-skip 1 --launch-count 1 $SECTIONS -o "$OUT/wre_n128" python3 bench/paged_profile.py --impl tma --batch 64 --context 32768 --next-n 2 --heads 64
  "$NCU_BIN" --import "$OUT/wre_n128.ncu-rep" --print-units base > "$OUT/ncu_wre_n128.txt" 2>&1
  grep -E "Duration|DRAM Throughput|Issue Slots Busy|Warp Cycles Per Issued|No Eligible" "$OUT/ncu_wre_n128.txt" | head -8 | cut -c1-160
  "$NCU_BIN" --import "$OUT/wre_n128.ncu-rep" --page source --csv --print-source sass > "$OUT/ncu_wre_n128_sass.csv" 2>&1
fi
echo "== done (t=$(( $(date +%s) - T0 )) s)"
pack; ls -la "$RES"
