#!/bin/bash
# Prepared at the end of session 18 for the next session's first H200 call (issue 10): verify the opt-in decode design
# "tma4" (kernels/sm90/paged_tma_wg4.cuh) as the package builds it, before `auto` routes to it. From the repo root
# with rawindexer/_kernels (`make`) and .whl carried; results in $OUT/session19_c1.tgz.
#   bash docs/results/session19_c1_h200.sh
# 1. the full tma4 sweep (every H, D 64 and 128, 1-D / 2-D lengths, clean or not; its balanced four-warpgroup
#    kernels at next_n x H = 96 / 128), and on a 3-block grid (runs spanning several sequences);
# 2. compute-sanitizer memcheck and racecheck of the quick tma4 sweep;
# 3. the public decode bench, tma beside tma4 and DeepGEMM (graph-replayed device time and the eager loop, host
#    included), at next_n x H = 128: H 64 next_n 2 over B 8 / 64 / 256 x context 4096 / 32768 / 131072, uniform and
#    ragged (where the routing threshold lies), then H 32 next_n 4, H 128 next_n 1 and H 32 next_n 3 (N = 96) at the
#    long cases. Each bench step runs ~2.7 s per case and implementation; steps are ordered by need and cut at
#    DEADLINE.
set -u
RES=${OUT:-/tmp/device_out}; mkdir -p "$RES"
OUT=/tmp/session19_c1; rm -rf "$OUT"
source docs/results/device_common.sh   # step, run_step, pack
PACK=$RES/session19_c1.tgz
DEADLINE=${DEADLINE:-575}
SAN=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
run_step smoke 40 python3 bench/paged_profile.py --impl tma --batch 8 --context 4096 --next-n 2 --heads 64
grep -q '^rc=0' "$OUT/smoke.log" || { echo "smoke failed"; pack; exit 1; }
TAIL=6 run_step sweep_tma4 120 python3 tests/gpu/test_paged_gpu.py --design tma4
BENCH="python3 -m rawindexer.bench --paged --designs tma,tma4"
TAIL=14 run_step bench_h64n2 110 $BENCH --batches 8,64,256 --next-n 2 --heads 64 --log "$OUT/bench_h64n2.md"
TAIL=14 run_step bench_h64n2_ragged 110 $BENCH --batches 8,64,256 --next-n 2 --heads 64 --ragged --log "$OUT/bench_h64n2_ragged.md"
TAIL=4 run_step sweep_tma4_p3 60 python3 tests/gpu/test_paged_gpu.py --quick --design tma4 --persistent-grid 3
TAIL=6 run_step memcheck_tma4 90 "$SAN" --tool memcheck --error-exitcode 9 python3 tests/gpu/test_paged_gpu.py --quick --design tma4
TAIL=8 run_step bench_h32n4 50 $BENCH --settle 0.5 --batches 64,256 --contexts 32768,131072 --next-n 4 --heads 32 --log "$OUT/bench_h32n4.md"
TAIL=8 run_step bench_h128n1 50 $BENCH --settle 0.5 --batches 64,256 --contexts 32768,131072 --next-n 1 --heads 128 --log "$OUT/bench_h128n1.md"
TAIL=6 run_step racecheck_tma4 120 "$SAN" --tool racecheck --report-api-errors no --error-exitcode 9 python3 tests/gpu/test_paged_gpu.py --quick --design tma4 --persistent-grid 3
TAIL=8 run_step bench_h32n3 50 $BENCH --settle 0.5 --batches 64,256 --contexts 32768,131072 --next-n 3 --heads 32 --log "$OUT/bench_h32n3.md"
echo "== done (t=$(( $(date +%s) - T0 )) s)"
pack; ls -la "$RES"
