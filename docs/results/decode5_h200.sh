#!/bin/bash
# decode5, H200 call 1: where the N = next_n x H = 128 time of decode "tma" goes (ncu beside DeepGEMM) and an A/B of
# the candidate levers. Run from the root of a tree carrying rawindexer/_kernels (the shipped build, "base"), .whl
# (DeepGEMM) and the variant kernel directories under .v/ (bench/paged_tma_variant.py):
#   bash docs/results/decode5_h200.sh            # logs under ${OUT:-/tmp/d5_out}, tarred into d5_logs.tgz
#   AB="base=rawindexer/_kernels lean=.v/lean ..." NCU=0 bash docs/results/decode5_h200.sh   # A/B only
# Call 2 (the shipped candidate in rawindexer/_kernels, main's build in .v/main):
#   AB="main=.v/main sleep=rawindexer/_kernels wreg=.v/sleep_wreg_s6:s6 main=.v/main sleep=rawindexer/_kernels" NCU=0 \
#   NCU_EXTRA_DIR=rawindexer/_kernels SWEEP=1 RACE=1 bash docs/results/decode5_h200.sh
#   SWEEP=1: python3 tests/gpu/test_paged_gpu.py --design tma (every tma case of the sweep + graph/allocation checks)
#   Call 3: AB="main=.v/main smr=rawindexer/_kernels main=.v/main smr=rawindexer/_kernels" SMOKE=1 NCU=0 \
#   NCU_EXTRA_DIR=rawindexer/_kernels SWEEP=1 RACE=1 bash docs/results/decode5_h200.sh
#   RACE=1: compute-sanitizer racecheck of python3 tests/gpu/test_paged_gpu.py --quick --design tma
set -u
OUT=${OUT:-/tmp/d5_out}; L=$OUT/logs; mkdir -p "$L"
export PYTHONUNBUFFERED=1 CUDA_HOME=/usr/local/cuda
rm -rf /tmp/dg && python3 -m zipfile -e .whl/tokenspeed_deepgemm-*.whl /tmp/dg && export PYTHONPATH=/tmp/dg:$PWD
T0=$(date +%s)
step() { echo "== $1 (t=$(( $(date +%s) - T0 )) s)"; }
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.draw --format=csv,noheader
if [ "${SMOKE:-0}" = 1 ]; then  # the shipped candidate on one small N = 128 case first: a hang costs only 40 s
  step "smoke"
  timeout 40 python3 bench/paged_profile.py --impl tma --batch 8 --context 4096 --next-n 2 --heads 64 > "$L/smoke.out" 2>&1
  rc=$?; echo "smoke rc=$rc"; tail -3 "$L/smoke.out" | cut -c1-200
  [ $rc -eq 0 ] || { tar -C "$L" -czf "$OUT/d5_logs.tgz" .; exit 1; }
fi
AB=${AB:-"base=rawindexer/_kernels lean=.v/lean wreg=.v/wreg_s6:s6 pipe=.v/pipe_s8:s8 base=rawindexer/_kernels"}
step "A/B: $AB"
timeout "${AB_S:-240}" python3 bench/paged_ab.py $AB ${AB_CASES:-} --log "$L/ab.md" > "$L/ab.out" 2>&1
echo "rc=$?"; grep -v '^#\|^$' "$L/ab.out" | tail -14 | cut -c1-260
NCU_BIN=$(command -v ncu || ls /usr/local/cuda*/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
SECTIONS="--section SpeedOfLight --section WarpStateStats --section SchedulerStats --section Occupancy --section LaunchStats --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis"
METRICS="gpu__time_duration.sum,dram__bytes_read.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active,sm__inst_executed.sum,smsp__inst_executed.avg.per_cycle_active,sm__warps_active.avg.pct_of_peak_sustained_active,l1tex__data_pipe_lsu_wavefronts_mem_shared.sum,smsp__cycles_active.avg,sm__cycles_elapsed.avg.per_second"
prof() {  # $1 = name, $2 = kernel regex, $3 = source counters (1/0), rest: bench/paged_profile.py arguments
  local name=$1 kre=$2 src=$3; shift 3
  step "ncu $name"
  local extra=""; [ "$src" = 1 ] && extra="--section SourceCounters"
  timeout "${NCU_S:-120}" "$NCU_BIN" --clock-control none -k "regex:$kre" --launch-skip 1 --launch-count 1 $SECTIONS $extra \
    --metrics "$METRICS" -o "$L/$name" python3 bench/paged_profile.py "$@" > "$L/ncu_$name.out" 2>&1
  echo "rc=$?"
  "$NCU_BIN" --import "$L/$name.ncu-rep" --print-units base > "$L/ncu_$name.txt" 2>&1
  grep -E "Duration|DRAM Throughput|gmma|Issue Slots Busy|Issued Ipc|Achieved Occupancy|Warp Cycles Per Issued|No Eligible|Registers Per|Block Limit|Theoretical Occ|inst_executed|Stall|stall" "$L/ncu_$name.txt" | head -40 | cut -c1-160
  [ "$src" = 1 ] && "$NCU_BIN" --import "$L/$name.ncu-rep" --page source --csv --print-source sass > "$L/ncu_${name}_sass.csv" 2>&1
  "$NCU_BIN" --import "$L/$name.ncu-rep" --page raw --csv > "$L/ncu_${name}_raw.csv" 2>&1
}
if [ "${NCU:-1}" = 1 ] && [ -n "$NCU_BIN" ]; then
  prof tma_n128 "bs64_tma_n2" 1 --impl tma --batch 64 --context 32768 --next-n 2 --heads 64
  prof dg_n128 "sm90_fp8_paged_mqa_logits" 1 --impl dg --batch 64 --context 32768 --next-n 2 --heads 64
  prof tma_n64 "bs64_tma_n1" 0 --impl tma --batch 64 --context 32768 --next-n 1 --heads 64
fi
if [ -n "${NCU_EXTRA_DIR:-}" ] && [ -n "$NCU_BIN" ]; then
  export RAWINDEXER_KERNEL_DIR=$PWD/$NCU_EXTRA_DIR; prof var_n128 "bs64_tma_n2" 1 --impl tma --batch 64 --context 32768 --next-n 2 --heads 64; unset RAWINDEXER_KERNEL_DIR
fi
if [ "${SWEEP:-0}" = 1 ]; then
  step "sweep (tma)"
  timeout "${SWEEP_S:-150}" python3 tests/gpu/test_paged_gpu.py --design tma --log "$L/sweep_tma.log" > "$L/sweep.out" 2>&1
  echo "rc=$?"; grep -v '^PASS' "$L/sweep.out" | tail -8 | cut -c1-200
fi
if [ "${RACE:-0}" = 1 ]; then
  SAN=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
  step "racecheck (quick tma)"
  timeout "${RACE_S:-150}" "$SAN" --tool racecheck --report-api-errors no --error-exitcode 9 \
    python3 tests/gpu/test_paged_gpu.py --quick --design tma > "$L/racecheck_decode.log" 2>&1
  echo "rc=$?"; grep -v '^PASS' "$L/racecheck_decode.log" | tail -6 | cut -c1-200
fi
step done
tar -C "$L" -czf "$OUT/d5_logs.tgz" . && cp "$L/ab.md" "$OUT/" 2>/dev/null; rm -rf "$L"
