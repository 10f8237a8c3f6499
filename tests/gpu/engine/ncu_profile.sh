#!/usr/bin/env bash
# Nsight Compute profiles of the engine's hot kernels on qwen3-4b, one launch each, with the
# clocks left alone (--clock-control none): the flash prefill kernel at 2048 tokens and the
# plain m=1 GEMV of a decode step. Not part of a gpu-check suite (ncu replays each kernel ~20
# times); run by hand on a GPU machine with ncu:
#   tests/gpu/engine/ncu_profile.sh BUILD_DIR OUT_DIR
# BUILD_DIR: a CUDA build or an extracted `scripts/gpu-check --pack` directory. Writes
# OUT_DIR/ncu-flash.txt and OUT_DIR/ncu-gemv.txt (src/engine/cuda/NOTES.md quotes them).
set -euo pipefail
[ $# -eq 2 ] || { sed -n '2,8p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
source "$(cd "$(dirname "$0")/../../.." && pwd)/scripts/lib/cuda-libs.sh"
bench="$1/tests/engine/gpufrac_cuda_bench"
out="$2"
mkdir -p "$out"
sections=(--section SpeedOfLight --section Occupancy --section WarpStateStats
          --section SchedulerStats --section InstructionStats --section ComputeWorkloadAnalysis
          --section MemoryWorkloadAnalysis)
ncu --clock-control none --kernel-name-base mangled -k regex:flash_prefill_kernelILi128E \
  --launch-count 1 "${sections[@]}" \
  "$bench" --model qwen3-4b --batches 1 --context 256 --prefill 2048 --variants fast \
  --iterations 2 --profile-batches 1 > "$out/ncu-flash.txt"
ncu --clock-control none --kernel-name-base mangled -k regex:gemv_kernelILi1ELb0E \
  --launch-skip 300 --launch-count 1 "${sections[@]}" \
  "$bench" --model qwen3-4b --batches 1 --context 2048 --prefill 256 --variants fast \
  --iterations 2 --profile-batches 1 > "$out/ncu-gemv.txt"
echo "ncu_profile: wrote $out/ncu-flash.txt and $out/ncu-gemv.txt"
