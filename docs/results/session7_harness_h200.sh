#!/bin/bash
# Session 7 (issue 10), one H200 call: which part of the full decode bench's history slows our N = 128 kernel (the
# bench read 64 x 131072 H 64 next_n 2 at 365-444 us in every session, the A/B harness at 312-333 us). The same
# bench, cut four ways, each in its own process (shipped build, rawindexer/_kernels and .whl carried):
#   a: --designs tma --batches 64          b: --designs f16,fp8,tma --batches 64
#   c: --designs tma --batches 1,8,64      d: --batches 1,8,64 (every design, the full bench's order up to B = 64)
#   bash docs/results/session7_harness_h200.sh     # results: $OUT/session7_harness.tgz
set -u
RES=${OUT:-/tmp/device_out}; mkdir -p "$RES"
OUT=/tmp/session7_harness; rm -rf "$OUT"
source docs/results/device_common.sh   # step, run_step, pack
PACK=$RES/session7_harness.tgz
DEADLINE=${DEADLINE:-420}
TAIL=14 run_step a_tma_b64 100 python3 -m rawindexer.bench --paged --designs tma --batches 64 --log "$OUT/a.md"
TAIL=14 run_step b_all_b64 120 python3 -m rawindexer.bench --paged --designs f16,fp8,tma --batches 64 --log "$OUT/b.md"
TAIL=14 run_step c_tma_b1864 100 python3 -m rawindexer.bench --paged --designs tma --batches 1,8,64 --log "$OUT/c.md"
TAIL=14 run_step d_all_b1864 140 python3 -m rawindexer.bench --paged --batches 1,8,64 --log "$OUT/d.md"
echo "== done (t=$(( $(date +%s) - T0 )) s)"
pack; ls -la "$RES"
