#!/bin/bash
# Session 6, decode call 3 (issue 10): call 2's A/B of the per-thread release (.v/arr) against the shipped build again,
# three of each interleaved, because call 2 read H 32 next_n 4 at 64 x 32768 12-16% slower in both of its arr runs and
# the small batches slower in one. From the repo root with rawindexer/_kernels, .v/arr and .whl carried:
#   bash docs/results/session6_decode3_h200.sh
set -u
source docs/results/device_common.sh
AB_CHILD_S=70 TAIL=20 step ab3 200 python3 bench/paged_ab.py main=rawindexer/_kernels arr=.v/arr main=rawindexer/_kernels arr=.v/arr main=rawindexer/_kernels arr=.v/arr --cases decode7 --log "$OUT/ab3.md"
echo "== done (t=$(( $(date +%s) - T0 )) s)"
