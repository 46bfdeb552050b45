#!/bin/bash
# Session 17, fifth H200 call (issue 10), from the repo root with rawindexer/_kernels (the shipped build), .whl and
# .v/rr carried (call 1's build: python bench/paged_tma_variant.py .v/rr --all -DPAGED_TMA_ROW_REGS=1 at commit
# b044e9b). Call 1 timed rr at the load onset (0.3-3% slower); at the steady, power-capped clock a tile's energy sets
# the pace, and rr reads 72 fewer shared-memory wavefronts per tile. The A/B main / rr twice with the 1.5 s warm-up.
#   bash docs/results/session17_c5_h200.sh      # results: $OUT/session17_c5.tgz
set -u
RES=${OUT:-/tmp/device_out}; mkdir -p "$RES"
OUT=/tmp/session17_c5; rm -rf "$OUT"
source docs/results/device_common.sh   # step, run_step, pack
PACK=$RES/session17_c5.tgz
DEADLINE=${DEADLINE:-150}
C=$PWD/.v/rr; K=rawindexer/_kernels
AB_CHILD_S=60 TAIL=12 run_step ab 140 python3 bench/paged_ab.py main=$K rr=$C main=$K rr=$C --cases n128short --log "$OUT/ab.md"
echo "== done (t=$(( $(date +%s) - T0 )) s)"
pack; ls -la "$RES"
