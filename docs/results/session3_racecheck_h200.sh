#!/bin/bash
# compute-sanitizer racecheck of the TMA-fed designs (prefill "tmas", decode "tma") on small subsets, one device call
# from the repo root with rawindexer/_kernels carried:   bash docs/results/session3_racecheck_h200.sh
set -u
OUT=${OUT:-/tmp/rc_out}; mkdir -p "$OUT"; export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD
SAN=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
T0=$(date +%s)
run() { local name=$1 limit=$2; shift 2; echo "== $name (t=$(( $(date +%s) - T0 )) s)";
        timeout "$limit" "$SAN" --tool racecheck --report-api-errors no --error-exitcode 9 "$@" > "$OUT/$name.log" 2>&1;
        echo "rc=$? t=$(( $(date +%s) - T0 )) s" >> "$OUT/$name.log"; grep -v '^PASS' "$OUT/$name.log" | tail -8; }
run racecheck_prefill 220 python3 tests/gpu/test_cuda_gpu.py --racecheck-subset --designs tmas
run racecheck_decode 220 python3 tests/gpu/test_paged_gpu.py --quick --design tma
echo "== done (t=$(( $(date +%s) - T0 )) s)"
