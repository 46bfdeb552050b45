#!/bin/bash
# Session 19, call 2 (issue 10). Call 1's bench faulted (illegal address) at the second case of H 32 next_n 4, H 128
# next_n 1 and H 32 next_n 3 (64 x 131072, design "tma", after 64 x 32768 ran both designs; DeepGEMM refused those
# shapes after running its metadata kernel). Here:
# 1. bench/paged_fault_scan.py: each (H, next_n, design) in its own process over growing shapes, a synchronise after
#    every call, so a fault names its shape; H 64 next_n 2 as the control; once with DeepGEMM's metadata kernel first;
# 2. memcheck of the first faulting shape (its first errors);
# 3. the routing threshold of "auto" (tma4 from 16 K tiles): H 64 next_n 2 at B 16 / 128 x 4096 / 32768 (1 K - 64 K
#    tiles), uniform and ragged, tma beside tma4 and DeepGEMM;
# 4. where no fault was found: the bench at H 32 next_n 4 / H 128 next_n 1 / H 32 next_n 3 (no DeepGEMM there).
#   bash docs/results/session19_c2_h200.sh      (rawindexer/_kernels and .whl carried; results in $OUT/session19_c2.tgz)
set -u
RES=${OUT:-/tmp/device_out}; mkdir -p "$RES"
OUT=/tmp/session19_c2; rm -rf "$OUT"
source docs/results/device_common.sh
PACK=$RES/session19_c2.tgz
DEADLINE=${DEADLINE:-570}
SAN=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
SCAN="python3 bench/paged_fault_scan.py"
for hn in "32 4" "128 1" "32 3" "64 2"; do
  set -- $hn
  for d in tma tma4; do TAIL=9 run_step "scan_h$1n$2_$d" 60 $SCAN --heads $1 --next-n $2 --design $d; done
done
TAIL=9 run_step scan_h32n4_tma_dgmeta 60 $SCAN --heads 32 --next-n 4 --design tma --dg-meta
FIRST=$(grep -h '^FAULT' "$OUT"/scan_*.log | head -1)
if [ -n "$FIRST" ]; then
  echo "first fault: $FIRST"
  read -r _ _ H _ N D SHAPE _ <<< "${FIRST//:/ }"
  TAIL=40 run_step memcheck_fault 120 "$SAN" --tool memcheck --print-limit 8 --error-exitcode 9 $SCAN --heads "$H" --next-n "$N" --design "$D" --shapes "$SHAPE"
fi
BENCH="python3 -m rawindexer.bench --paged --designs tma,tma4"
TAIL=10 run_step bench_route 70 $BENCH --batches 16,128 --contexts 4096,32768 --next-n 2 --heads 64 --log "$OUT/bench_route.md"
TAIL=10 run_step bench_route_ragged 70 $BENCH --batches 16,128 --contexts 4096,32768 --next-n 2 --heads 64 --ragged --log "$OUT/bench_route_ragged.md"
for hn in "32 4" "128 1" "32 3"; do
  set -- $hn
  grep -q '^FAULT' "$OUT/scan_h$1n$2_tma.log" "$OUT/scan_h$1n$2_tma4.log" && continue
  TAIL=8 run_step "bench_h$1n$2" 45 $BENCH --settle 0.5 --batches 64,256 --contexts 32768,131072 --next-n $2 --heads $1 --log "$OUT/bench_h$1n$2.md"
done
echo "== done (t=$(( $(date +%s) - T0 )) s)"
pack; ls -la "$RES"
