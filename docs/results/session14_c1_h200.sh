#!/bin/bash
# Session 14, first H200 call (issue 10), from the repo root with rawindexer/_kernels (shipped), .whl and four builds
# carried (python bench/paged_tma_variant.py .v/X [--all] -D...):
#   .v/early  --all -DPAGED_TMA_EARLY_TABLE=1: the split's fixed tile range, its first block-table entries and the
#             tensor-map prefetch issued at entry, beside the context_lens load;
#   .v/early2 --all -DPAGED_TMA_EARLY_TABLE=2: that, and the consumers' Q / weight copies issued at entry too;
#   .v/ptr    -DPAGED_TMA_TRACE=1 (shipped kernels, stamped); .v/etr2 -DPAGED_TMA_TRACE=1 -DPAGED_TMA_EARLY_TABLE=2.
#   bash docs/results/session14_c1_h200.sh      # results: $OUT/session14_c1.tgz
# smoke, both sweeps, the A/B shipped / early / early2 twice (decode7 cases, DeepGEMM in the same call), the same on
# ragged lengths, both traces at 64 x 32768 next_n 2 H 64, racecheck of early2's quick sweep at split 1 and 2.
set -u
RES=${OUT:-/tmp/device_out}; mkdir -p "$RES"
OUT=/tmp/session14_c1; rm -rf "$OUT"
source docs/results/device_common.sh   # step, run_step, pack
PACK=$RES/session14_c1.tgz
DEADLINE=${DEADLINE:-560}
SAN=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
E1=$PWD/.v/early; E2=$PWD/.v/early2
run_step smoke 30 env RAWINDEXER_KERNEL_DIR=$E2 python3 bench/paged_profile.py --impl tma --batch 8 --context 4096 --next-n 2 --heads 64
grep -q '^rc=0' "$OUT/smoke.log" || { echo "smoke failed"; pack; exit 1; }
TAIL=4 run_step sweep_early2 40 env RAWINDEXER_KERNEL_DIR=$E2 python3 tests/gpu/test_paged_gpu.py --design tma
TAIL=4 run_step sweep_early 40 env RAWINDEXER_KERNEL_DIR=$E1 python3 tests/gpu/test_paged_gpu.py --design tma
AB_CHILD_S=60 TAIL=20 run_step ab 200 python3 bench/paged_ab.py main=rawindexer/_kernels early=$E1 early2=$E2 main=rawindexer/_kernels early=$E1 early2=$E2 --cases decode7 --log "$OUT/ab.md"
AB_CHILD_S=60 TAIL=20 run_step ab_ragged 140 python3 bench/paged_ab.py main=rawindexer/_kernels early2=$E2 main=rawindexer/_kernels early2=$E2 --cases decode7 --ragged --log "$OUT/ab_ragged.md"
TAIL=30 run_step trace_main 40 env RAWINDEXER_KERNEL_DIR=$PWD/.v/ptr python3 bench/paged_trace.py --batch 64 --context 32768 --next-n 2 --heads 64
TAIL=30 run_step trace_early2 40 env RAWINDEXER_KERNEL_DIR=$PWD/.v/etr2 python3 bench/paged_trace.py --batch 64 --context 32768 --next-n 2 --heads 64
TAIL=4 run_step race_s1 40 env RAWINDEXER_KERNEL_DIR=$E2 "$SAN" --tool racecheck --report-api-errors no --error-exitcode 9 python3 tests/gpu/test_paged_gpu.py --quick --design tma --split 1
TAIL=4 run_step race_s2 40 env RAWINDEXER_KERNEL_DIR=$E2 "$SAN" --tool racecheck --report-api-errors no --error-exitcode 9 python3 tests/gpu/test_paged_gpu.py --quick --design tma --split 2
echo "== done (t=$(( $(date +%s) - T0 )) s)"
pack; ls -la "$RES"
