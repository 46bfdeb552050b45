#!/bin/bash
# Session 15, first H200 call (issue 10), from the repo root with rawindexer/_kernels (shipped) and .whl carried:
#   bash docs/results/session15_c1_h200.sh      # results: $OUT/session15_c1.tgz
# The decode split count on ragged lengths: the shipped kernel at the heuristic's split_n and with it raised so that no
# split holds more than T = 64 / 32 / 16 / 8 tiles (bench/paged_ab.py ":tT"), on ragged lengths first, then on full ones
# (the same builds, DeepGEMM in each run), over --cases split.
set -u
RES=${OUT:-/tmp/device_out}; mkdir -p "$RES"
OUT=/tmp/session15_c1; rm -rf "$OUT"
source docs/results/device_common.sh   # step, run_step, pack
PACK=$RES/session15_c1.tgz
DEADLINE=${DEADLINE:-580}
K=rawindexer/_kernels
ENTRIES="main=$K t64=$K:t64 t32=$K:t32 t16=$K:t16 t8=$K:t8 main=$K"
TAIL=20 AB_CHILD_S=150 run_step ab_ragged 290 python3 bench/paged_ab.py $ENTRIES --cases split --ragged --log "$OUT/ab_ragged.md"
TAIL=20 AB_CHILD_S=150 run_step ab_uniform 290 python3 bench/paged_ab.py ${ENTRIES/ t8=$K:t8/} --cases split --log "$OUT/ab_uniform.md"
echo "== done (t=$(( $(date +%s) - T0 )) s)"
pack; ls -la "$RES"
