#!/bin/bash
# v10 (issue 14, helper balance14): the check of the shipped build with "auto" taking tmasb2 (not yet run; for the
# lead). From the repo root after `make`, with rawindexer/_kernels and .whl/ carried:
#   bash docs/results/balance14_ship_check_h200.sh
#   sweep       the small-shape sweep, api + tmasb2 through the family (the shipped cubin, not build/race)
#   memcheck    compute-sanitizer memcheck of tmasb2 on the sanitizer subset
#   racecheck   tmasb2 at H 32 and 64 (its shared-memory protocol is tmasb's: 0 hazards in call 1)
#   graph       graph capture and Indexer.bind (auto's tmasb2 plan depends on M: a template per shape)
#   bench       python -m rawindexer.bench --reps 10: the public call, graded, against DeepGEMM; auto runs tmasb2 in
#               10 of the 64 cases (671 x 131072 at H = 32, the long rows at H = 64 without clean_logits)
set -u
source docs/results/device_common.sh
step sweep 120 python3 tests/gpu/test_cuda_gpu.py --quick --designs tmasb2
SAN=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
step memcheck 100 "$SAN" --tool memcheck --error-exitcode 9 python3 tests/gpu/test_cuda_gpu.py --sanitizer-subset --designs tmasb2
step racecheck 150 "$SAN" --tool racecheck --report-api-errors no --error-exitcode 9 python3 tests/gpu/test_cuda_gpu.py --racecheck-subset --racecheck-heads 32,64 --designs tmasb2
step graph 60 python3 tests/gpu/test_graph_gpu.py
TAIL=40 step bench 240 python3 -m rawindexer.bench --reps 10 --out "$OUT/bench"
(cd "$OUT" && tar -cf /tmp/check.tar . && rm -rf ./* && mv /tmp/check.tar "$OUT/balance14_ship_check.tar")
echo "== done (t=$(( $(date +%s) - T0 )) s)"
