#!/bin/bash
# Session 18, fourth H200 call (issue 10), from the repo root with rawindexer/_kernels (the shipped build), .whl and
# .v/wreb = python bench/paged_tma_variant.py .v/wreb -DPAGED_TMA_WG4=1 -DPAGED_TMA_WG4_WREGS=1 -DPAGED_TMA_WG4_REGS=112
# -DPAGED_TMA_WG4_BALANCED=1 (D = 128: call 3's wre on the balanced schedule; the schedule's values read from shared
# memory passed through pw_uniform, so the run state stays in uniform registers: 0 spills, 215 instructions per tile).
#   bash docs/results/session18_c4_h200.sh      # results: $OUT/session18_c4.tgz
# The last ~250 s of the session's device time: smoke, the quick sweep, the A/B main / wreb
# at uniform and at ragged lengths on the three large N = 128 cases.
set -u
RES=${OUT:-/tmp/device_out}; mkdir -p "$RES"
OUT=/tmp/session18_c4; rm -rf "$OUT"
source docs/results/device_common.sh   # step, run_step, pack
PACK=$RES/session18_c4.tgz
DEADLINE=${DEADLINE:-115}
W=$PWD/.v/wreb; K=rawindexer/_kernels
run_step smoke 30 bash -c "RAWINDEXER_KERNEL_DIR=$W python3 bench/paged_profile.py --impl tma --batch 8 --context 4096 --next-n 2 --heads 64"
grep -q '^rc=0' "$OUT/smoke.log" || { echo "smoke failed"; pack; exit 1; }
TAIL=3 run_step sweep_wreb 30 env RAWINDEXER_KERNEL_DIR=$W python3 tests/gpu/test_paged_gpu.py --quick --design tma
AB_CHILD_S=50 TAIL=8 run_step ab 60 python3 bench/paged_ab.py main=$K wreb=$W --cases wg4short --log "$OUT/ab.md"
AB_CHILD_S=50 TAIL=8 run_step ab_ragged 60 python3 bench/paged_ab.py main=$K wreb=$W --cases wg4short --ragged --log "$OUT/ab_ragged.md"
echo "== done (t=$(( $(date +%s) - T0 )) s)"
pack; ls -la "$RES"
