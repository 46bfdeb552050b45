#!/bin/bash
# Issue 9, session 4: the launch path with the C launcher's CPython extension, on the H200, in one device call
# (repo root, rawindexer/_kernels and .whl/ carried):  bash docs/results/session4_launch_h200.sh
#   info        python -m rawindexer info (the per-call route in use)
#   host_ext    host µs per entry point, default route (the extension)
#   host_shim   the same with RAWINDEXER_CUDA_LAUNCH=shim (the ctypes-called C launcher, session 3's route)
#   ourside     bench/host_path_cpu.py on this host: our side of a call with a no-op driver (no GPU work)
#   quick       python -m rawindexer.bench --quick: (a) public call, (a) bound, (b), (c), DeepGEMM
#   graph, nan  graph capture and the NaN contract through the new route
set -u
source docs/results/device_common.sh
step info 30 python3 -m rawindexer info
TAIL=16 step host_ext 90 python3 -m rawindexer.bench --host-only
TAIL=16 RAWINDEXER_CUDA_LAUNCH=shim step host_shim 90 env RAWINDEXER_CUDA_LAUNCH=shim python3 -m rawindexer.bench --host-only
TAIL=16 step ourside 90 python3 bench/host_path_cpu.py --calls 20000 --rounds 5
TAIL=12 step quick 150 python3 -m rawindexer.bench --quick --reps 20 --out "$OUT/quick"
step graph 60 python3 tests/gpu/test_graph_gpu.py
step nan 60 python3 tests/gpu/test_cuda_gpu.py --nan
tar -C "$OUT" -cf "$OUT/quick.tar" quick 2>/dev/null && rm -rf "$OUT/quick"
echo "== done (t=$(( $(date +%s) - T0 )) s)"
