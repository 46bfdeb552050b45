set -u
OUT=${OUT:-/tmp/s3_out}; mkdir -p "$OUT"; export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD
T0=$(date +%s)
step() { local name=$1 limit=$2; shift 2; echo "== $name (t=$(( $(date +%s) - T0 )) s): $*";
         timeout "$limit" "$@" > "$OUT/$name.log" 2>&1; echo "rc=$? t=$(( $(date +%s) - T0 )) s" >> "$OUT/$name.log";
         grep -v '^PASS' "$OUT/$name.log" | grep -v "cuGetProcAddress\|^========= $" | tail -${TAIL:-12}; }
SAN=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
step nan 60 python3 tests/gpu/test_cuda_gpu.py --nan --log "$OUT/nan_cases.log"
step sweep 200 python3 tests/gpu/test_cuda_gpu.py --quick --designs wg,tmas,mma --log "$OUT/sweep_cases.log"
step sanitizer 120 "$SAN" --tool memcheck --error-exitcode 9 python3 tests/gpu/test_cuda_gpu.py --sanitizer-subset --designs tmas
step racecheck 150 "$SAN" --tool racecheck --error-exitcode 9 python3 tests/gpu/test_cuda_gpu.py --sanitizer-subset --designs tmas
echo "== done (t=$(( $(date +%s) - T0 )) s)"
