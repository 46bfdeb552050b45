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
# `smoke_step`: the candidate's public prefill call (1024^2 causal H 64, 4096^2 multi_req H 32) and the decode tma
# kernel, once each; the script stops (after pack) if one fails.
smoke_step() {
  run_step smoke 60 bash -c 'python3 bench/prefill_profile.py --impl ours --rows 1024 --keys 1024 --window causal --heads 64 --calls 2 &&
    python3 bench/prefill_profile.py --impl ours --rows 4096 --keys 4096 --window multi_req --heads 32 --calls 2 &&
    python3 bench/paged_profile.py --impl tma --batch 8 --context 4096 --next-n 2 --heads 64'
  grep -q '^rc=0' "$OUT/smoke.log" || { echo "smoke failed"; pack; exit 1; }
}
# `race_run NAME DIR IMPLS [GRADE ARGS]`: one bench/race_sm90.py --impls IMPLS run with DIR as RAWINDEXER_RACE_BUILD,
# DeepGEMM in it, log in $OUT/race_NAME (GRADE ARGS: --no-grade or --grade DESIGNS), under RACE_LIMIT s (default 110).
race_run() {
  local name=$1 dir=$2 impls=$3; shift 3
  mkdir -p "$OUT/race_$name"
  TAIL=3 RAWINDEXER_RACE_BUILD=$dir run_step "race_$name" "${RACE_LIMIT:-110}" python3 bench/race_sm90.py --impls "$impls" "$@" --reps 5 --out "$OUT/race_$name"
}
# `race_ab OLD OLD_DIR NEW NEW_DIR ROUNDS IMPLS`: race_run with each kernel directory, old then new, ROUNDS times, the
# new build graded in round 1; logs in $OUT/race_OLD<i>, $OUT/race_NEW<i>.
race_ab() {
  local old=$1 old_dir=$2 new=$3 new_dir=$4 rounds=$5 impls=$6 i g
  for i in $(seq 1 "$rounds"); do
    RACE_LIMIT=80 race_run "$old$i" "$old_dir" "$impls" --no-grade
    g=--no-grade; [ "$i" = 1 ] && g="--grade $impls"
    race_run "$new$i" "$new_dir" "$impls" $g
  done
}
