#!/bin/bash
# Session 5: compute-sanitizer racecheck of tmasb2 (shipped in auto's balanced cases) on the racecheck subset, H 32 and
# H 64 as separate steps (the two together did not finish within 90 s in session5_final_h200.sh). From the repo root
# with rawindexer/_kernels and .whl/ carried:  bash docs/results/session5_racecheck_b2_h200.sh
set -u
source docs/results/device_common.sh
SAN=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
for h in 64 32; do
  step racecheck_b2_h$h 120 "$SAN" --tool racecheck --report-api-errors no --error-exitcode 9 python3 tests/gpu/test_cuda_gpu.py --racecheck-subset --racecheck-heads $h --designs tmasb2
done
(cd "$OUT" && tar -cf /tmp/rc.tar . && rm -rf ./* && mv /tmp/rc.tar "$OUT/racecheck_b2.tar")
echo "== done (t=$(( $(date +%s) - T0 )) s)"
