#!/bin/bash
# Session 6, second end-of-session H200 call on the same shipped build as session6_final_h200.sh: the prefill benchmark
# again (a second sample: the first run read DeepGEMM 2-4% slower on long rows than session 5 did) and the full decode
# benchmark (B x context x next_n x H against DeepGEMM, read bandwidth measured in the same run). From the repo root with
# rawindexer/_kernels and .whl carried:   bash docs/results/session6_final2_h200.sh
set -u
source docs/results/device_common.sh
TAIL=12 step bench2 150 python3 -m rawindexer.bench --reps 10 --out "$OUT/bench2"
TAIL=60 step paged_bench 300 python3 -m rawindexer.bench --paged --log "$OUT/paged_bench.md"
echo "== done (t=$(( $(date +%s) - T0 )) s)"
(cd "$OUT" && tar -cf /tmp/final2.tar . && rm -rf ./* && mv /tmp/final2.tar "$OUT/final2.tar")
