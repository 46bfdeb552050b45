#!/bin/bash
# Session 4, after session4_final_h200.sh (whose racecheck of tmas at H 64 + 128 ran out of its 110 s): compute-sanitizer
# racecheck of tmas at H = 64 (the kept-weights body; H = 128 builds the same body), then the host table again.
#   bash docs/results/session4_racecheck64_h200.sh   (repo root, rawindexer/_kernels and .whl/ carried)
set -u
source docs/results/device_common.sh
SAN=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
step racecheck64 260 "$SAN" --tool racecheck --report-api-errors no --error-exitcode 9 python3 tests/gpu/test_cuda_gpu.py --racecheck-subset --racecheck-heads 64 --designs tmas --log "$OUT/racecheck64_cases.log"
TAIL=16 step host 60 python3 -m rawindexer.bench --host-only
echo "== done (t=$(( $(date +%s) - T0 )) s)"
