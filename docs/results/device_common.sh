# Sourced by the session-4 device scripts (docs/results/session4_*.sh), from the repo root with rawindexer/_kernels
# and .whl/ carried: DeepGEMM's wheel unpacked onto PYTHONPATH (the image has no unzip), CUDA_HOME for its JIT, and
# `step NAME LIMIT CMD...`: CMD under a time limit, its output in $OUT/NAME.log with its exit code and the time, the
# non-PASS lines of its tail echoed.
OUT=${OUT:-/tmp/device_out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
T0=$(date +%s)
rm -rf /tmp/dg && python3 -m zipfile -e .whl/tokenspeed_deepgemm-*.whl /tmp/dg && export PYTHONPATH=/tmp/dg:$PWD
for c in /usr/local/cuda /usr/local/cuda-13.0; do [ -x "$c/bin/nvcc" ] && export CUDA_HOME=$c && break; done
nvidia-smi -L
step() { local name=$1 limit=$2; shift 2; echo "== $name (t=$(( $(date +%s) - T0 )) s): $*";
         timeout "$limit" "$@" > "$OUT/$name.log" 2>&1; echo "rc=$? t=$(( $(date +%s) - T0 )) s" >> "$OUT/$name.log";
         grep -v '^PASS' "$OUT/$name.log" | tail -${TAIL:-14} | cut -c1-240; }
# `pack`: when PACK names a file, $OUT (less ncu reports) tarred into it, so a killed call still returns its logs.
# `run_step NAME LIMIT CMD...`: step, its LIMIT cut to what is left before DEADLINE s (default 560) after T0, then
# pack; skipped (status 1) when under 10 s are left. Scripts that define their own (session 6) override these.
pack() { [ -z "${PACK:-}" ] || tar -C "$OUT" -czf "$PACK" --exclude '*.ncu-rep' . 2>/dev/null; return 0; }
run_step() { local name=$1 limit=$2; shift 2; local left=$(( ${DEADLINE:-560} - ($(date +%s) - T0) ));
             [ "$left" -lt 10 ] && { echo "== $name skipped: ${left} s left"; return 1; }
             [ "$limit" -gt "$left" ] && limit=$left; step "$name" "$limit" "$@"; pack; }
