#!/bin/bash
# Session 16, first H200 call (issue 10), from the repo root with rawindexer/_kernels (shipped), .whl and two builds
# carried (python bench/paged_tma_variant.py .v/X --all -D...):
#   .v/spec1 -DPAGED_TMA_SPEC_TABLE=1: the split's first 32 block-table entries for a full-length guess of the
#            sequence and the tensor-map prefetch issued at entry, beside the context_lens load (used where the real
#            range starts at the guessed tile);
#   .v/spec2 -DPAGED_TMA_SPEC_TABLE=2: that, and the consumers' Q / weight copies issued at entry too.
#   bash docs/results/session16_c1_h200.sh      # results: $OUT/session16_c1.tgz
# smoke, both sweeps, the A/B shipped / spec1 / spec2 twice (--cases spec, DeepGEMM in the same call), shipped / spec1
# / spec2 once on ragged lengths, racecheck of spec2's quick sweep at split 1.
set -u
RES=${OUT:-/tmp/device_out}; mkdir -p "$RES"
OUT=/tmp/session16_c1; rm -rf "$OUT"
source docs/results/device_common.sh   # step, run_step, pack
PACK=$RES/session16_c1.tgz
DEADLINE=${DEADLINE:-575}
SAN=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
S1=$PWD/.v/spec1; S2=$PWD/.v/spec2; K=rawindexer/_kernels
run_step smoke 30 env RAWINDEXER_KERNEL_DIR=$S2 python3 bench/paged_profile.py --impl tma --batch 8 --context 4096 --next-n 2 --heads 64
grep -q '^rc=0' "$OUT/smoke.log" || { echo "smoke failed"; pack; exit 1; }
TAIL=4 run_step sweep_spec2 45 env RAWINDEXER_KERNEL_DIR=$S2 python3 tests/gpu/test_paged_gpu.py --design tma
TAIL=4 run_step sweep_spec1 45 env RAWINDEXER_KERNEL_DIR=$S1 python3 tests/gpu/test_paged_gpu.py --design tma
AB_CHILD_S=60 TAIL=20 run_step ab 230 python3 bench/paged_ab.py main=$K spec1=$S1 spec2=$S2 main=$K spec1=$S1 spec2=$S2 --cases spec --log "$OUT/ab.md"
AB_CHILD_S=60 TAIL=20 run_step ab_ragged 130 python3 bench/paged_ab.py main=$K spec1=$S1 spec2=$S2 --cases spec --ragged --log "$OUT/ab_ragged.md"
TAIL=4 run_step race_s1 40 env RAWINDEXER_KERNEL_DIR=$S2 "$SAN" --tool racecheck --report-api-errors no --error-exitcode 9 python3 tests/gpu/test_paged_gpu.py --quick --design tma --split 1
echo "== done (t=$(( $(date +%s) - T0 )) s)"
pack; ls -la "$RES"
