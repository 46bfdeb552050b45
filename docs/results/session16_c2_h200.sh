#!/bin/bash
# Session 16, second H200 call (issue 10), from the repo root with rawindexer/_kernels (shipped), .whl and one build
# carried: .v/cand = python bench/paged_tma_variant.py .v/cand --all -DPAGED_PAIR_REDUCE=2 -DPAGED_TMA_PIPE_PEEL=1
# (two query rows reduced together: 3 shuffles and one store per lane for two rows; the two-accumulator loop's interior
# tiles through a copy of it without length tests).
#   bash docs/results/session16_c2_h200.sh      # results: $OUT/session16_c2.tgz
# smoke, the full sweep of every design (the head reduce is shared by f16 / fp8 / tma), the A/B shipped / cand twice
# (--cases spec, DeepGEMM in the same call), the same on ragged lengths, racecheck of cand's quick tma sweep at split 1,
# then the public decode benchmark on cand's kernels as far as the time allows.
set -u
RES=${OUT:-/tmp/device_out}; mkdir -p "$RES"
OUT=/tmp/session16_c2; rm -rf "$OUT"
source docs/results/device_common.sh   # step, run_step, pack
PACK=$RES/session16_c2.tgz
DEADLINE=${DEADLINE:-575}
SAN=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
C=$PWD/.v/cand; K=rawindexer/_kernels
run_step smoke 30 env RAWINDEXER_KERNEL_DIR=$C python3 bench/paged_profile.py --impl tma --batch 8 --context 4096 --next-n 2 --heads 64
grep -q '^rc=0' "$OUT/smoke.log" || { echo "smoke failed"; pack; exit 1; }
TAIL=6 run_step sweep_cand 120 env RAWINDEXER_KERNEL_DIR=$C python3 tests/gpu/test_paged_gpu.py
AB_CHILD_S=60 TAIL=20 run_step ab 200 python3 bench/paged_ab.py main=$K cand=$C main=$K cand=$C --cases spec --log "$OUT/ab.md"
AB_CHILD_S=60 TAIL=20 run_step ab_ragged 160 python3 bench/paged_ab.py main=$K cand=$C main=$K cand=$C --cases spec --ragged --log "$OUT/ab_ragged.md"
TAIL=4 run_step race_s1 30 env RAWINDEXER_KERNEL_DIR=$C "$SAN" --tool racecheck --report-api-errors no --error-exitcode 9 python3 tests/gpu/test_paged_gpu.py --quick --design tma --split 1
TAIL=60 run_step paged_bench_cand 150 env RAWINDEXER_KERNEL_DIR=$C python3 -m rawindexer.bench --paged --designs tma --log "$OUT/paged_bench_cand.md"
echo "== done (t=$(( $(date +%s) - T0 )) s)"
pack; ls -la "$RES"
