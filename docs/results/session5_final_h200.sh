#!/bin/bash
# The end-of-session-5 H200 run of the merged main (one device call), from the repo root with rawindexer/_kernels
# (the shipped build), .v/prefence (the decode build before the ring-release proxy fence: a copy of
# rawindexer/_kernels made before that commit) and .whl/ (DeepGEMM) carried:
#   bash docs/results/session5_final_h200.sh
#   info, nan, sweep, graph, interop, memcheck   the merged sm_90a kernels (auto now takes tmasb2 in some cases)
#   bench            python -m rawindexer.bench --reps 10: the public call against DeepGEMM, the 64 cases
#   paged_race_s1    racecheck of the decode tma kernel with split_n 1, so every block's ring wraps (decode7 found
#                    hazards there on the build without the proxy fence)
#   paged_sweep      the tma decode sweep on the shipped build
#   paged_ab         prefence vs fence (the shipped build), twice each, beside DeepGEMM, decode7's cases
#   racecheck_b2     racecheck of tmasb2 at H 32 and 64 on the racecheck subset
set -u
source docs/results/device_common.sh
step info 20 python3 -m rawindexer info
step nan 60 python3 tests/gpu/test_cuda_gpu.py --nan
step sweep 60 python3 tests/gpu/test_cuda_gpu.py --quick --designs tmas,tmasb2
step graph 40 python3 tests/gpu/test_graph_gpu.py
step interop 40 python3 tests/gpu/test_cuda_gpu.py --interop
SAN=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
step memcheck 70 "$SAN" --tool memcheck --error-exitcode 9 python3 tests/gpu/test_cuda_gpu.py --sanitizer-subset --designs tmas,tmasb2
TAIL=30 step bench 100 python3 -m rawindexer.bench --reps 10 --out "$OUT/bench"
step paged_race_s1 80 "$SAN" --tool racecheck --report-api-errors no --error-exitcode 9 python3 tests/gpu/test_paged_gpu.py --quick --design tma --split 1
step paged_sweep 50 python3 tests/gpu/test_paged_gpu.py --design tma --log "$OUT/paged_sweep_detail.log"
AB_CHILD_S=70 TAIL=16 step paged_ab 150 python3 bench/paged_ab.py pre=.v/prefence fence=rawindexer/_kernels pre=.v/prefence fence=rawindexer/_kernels --cases decode7 --log "$OUT/paged_ab.md"
step racecheck_b2 ${RACE_LIMIT:-90} "$SAN" --tool racecheck --report-api-errors no --error-exitcode 9 python3 tests/gpu/test_cuda_gpu.py --racecheck-subset --racecheck-heads 32,64 --designs tmasb2
(cd "$OUT" && tar -cf /tmp/final.tar . && rm -rf ./* && mv /tmp/final.tar "$OUT/final.tar")
echo "== done (t=$(( $(date +%s) - T0 )) s)"
