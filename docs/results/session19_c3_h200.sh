#!/bin/bash
# Session 19, call 3 (issue 10): the build where "auto" sends next_n x H = 96 / 128 calls with >= 16 K tiles to
# "tma4" (rawindexer/dispatch/paged_sm90.py, four_warpgroups_win).
# 1. the GPU checks (graph replay of the three entry points, the new check that "auto" launches the four-warpgroup
#    kernel at 256 sequences x 4096 and grades it at H 64 nn 2 / H 32 nn 4 / H 128 nn 1 / H 32 nn 3, the torch output);
# 2. compute-sanitizer memcheck at the long shapes of call 1's unexplained fault (H 32 next_n 4, tma and tma4);
# 3. the public decode bench of the default design ("auto") beside DeepGEMM over the whole grid (B 1 / 8 /
#    64 / 256 x context 4096 / 32768 / 131072 x next_n 1 / 2 x H 32 / 64), uniform, then ragged at B 64 / 256.
#   bash docs/results/session19_c3_h200.sh      (rawindexer/_kernels and .whl carried; results in $OUT/session19_c3.tgz)
set -u
RES=${OUT:-/tmp/device_out}; mkdir -p "$RES"
OUT=/tmp/session19_c3; rm -rf "$OUT"
source docs/results/device_common.sh
PACK=$RES/session19_c3.tgz
DEADLINE=${DEADLINE:-570}
SAN=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
TAIL=8 run_step checks 90 python3 tests/gpu/test_paged_gpu.py --checks-only
for d in tma tma4; do
  TAIL=8 run_step "memcheck_h32n4_$d" 50 "$SAN" --tool memcheck --print-limit 8 --error-exitcode 9 \
    python3 bench/paged_fault_scan.py --heads 32 --next-n 4 --design $d --shapes 8x131072,64x32768
done
TAIL=6 run_step bench 270 python3 -m rawindexer.bench --paged --settle 0.5 --log "$OUT/paged_bench.md"
TAIL=6 run_step bench_ragged 140 python3 -m rawindexer.bench --paged --settle 0.5 --batches 64,256 --ragged --log "$OUT/paged_bench_ragged.md"
echo "== done (t=$(( $(date +%s) - T0 )) s)"
pack; ls -la "$RES"
