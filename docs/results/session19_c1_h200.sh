#!/bin/bash
# Prepared at the end of session 18 for the next session's first H200 call (issue 10): verify the opt-in decode design
# "tma4" (kernels/sm90/paged_tma_wg4.cuh) as the package builds it, before `auto` routes to it. From the repo root
# with rawindexer/_kernels (`make`) and .whl carried; results in $OUT/session19_c1.tgz.
#   bash docs/results/session19_c1_h200.sh
# 1. the full tma4 sweep (every H, D 64 and 128, 1-D / 2-D lengths, clean or not; its balanced four-warpgroup
#    kernels at next_n x H = 96 / 128), and on a 3-block grid (runs spanning several sequences);
# 2. compute-sanitizer memcheck and racecheck of the quick tma4 sweep;
# 3. the public decode bench, tma beside tma4 and DeepGEMM, uniform and ragged lengths (where the
#    routing threshold lies; B 64 and 256 here, the small batches in a later call: each bench step runs ~2.5 s per
#    case and implementation).
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
TAIL=4 run_step sweep_tma4_p3 60 python3 tests/gpu/test_paged_gpu.py --quick --design tma4 --persistent-grid 3
TAIL=6 run_step memcheck_tma4 90 "$SAN" --tool memcheck --error-exitcode 9 python3 tests/gpu/test_paged_gpu.py --quick --design tma4
TAIL=6 run_step racecheck_tma4 120 "$SAN" --tool racecheck --report-api-errors no --error-exitcode 9 python3 tests/gpu/test_paged_gpu.py --quick --design tma4 --persistent-grid 3
TAIL=40 run_step bench 150 python3 -m rawindexer.bench --paged --designs tma,tma4 --batches 64,256 --log "$OUT/paged_bench.md"
TAIL=40 run_step bench_ragged 150 python3 -m rawindexer.bench --paged --designs tma,tma4 --batches 64,256 --ragged --log "$OUT/paged_bench_ragged.md"
echo "== done (t=$(( $(date +%s) - T0 )) s)"
pack; ls -la "$RES"
