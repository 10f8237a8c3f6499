#!/usr/bin/env bash
# Nsight Compute profiles of the engine's hot kernels on qwen3-4b, one launch each, with the
# clocks left alone (--clock-control none): the prefill's flash kernel at 2048 tokens (the Hopper
# one, and the mma.sync one of --variants mma-flash), the decode attention kernel at batch 32 and
# context 2048, and the plain m=1 GEMV of a decode step. Not part of a gpu-check suite (ncu
# replays each kernel ~20 times); run by hand on a GPU machine with ncu:
#   tests/gpu/engine/ncu_profile.sh BUILD_DIR OUT_DIR
# BUILD_DIR: a CUDA build or an extracted `scripts/gpu-check --pack` directory. Writes
# OUT_DIR/ncu-flash-hopper.txt, ncu-flash-mma.txt, ncu-decode-attention.txt and ncu-gemv.txt
# (src/engine/cuda/NOTES.md quotes them).
set -euo pipefail
[ $# -eq 2 ] || { sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
source "$(cd "$(dirname "$0")/../../.." && pwd)/scripts/lib/cuda-libs.sh"
bench="$1/tests/engine/gpufrac_cuda_bench"
out="$2"
mkdir -p "$out"
sections=(--section SpeedOfLight --section Occupancy --section WarpStateStats
          --section SchedulerStats --section InstructionStats --section ComputeWorkloadAnalysis
          --section MemoryWorkloadAnalysis)
# profile KERNEL_REGEX OUT_FILE NCU_ARGS... -- BENCH_ARGS...: one launch of the kernel.
profile() {
  local kernel="$1" file="$2"; shift 2
  local ncu_args=()
  while [ "$1" != "--" ]; do ncu_args+=("$1"); shift; done
  shift
  ncu --clock-control none --kernel-name-base mangled -k "regex:$kernel" --launch-count 1 \
    "${ncu_args[@]}" "${sections[@]}" "$bench" --model qwen3-4b --iterations 2 "$@" \
    > "$out/$file"
}
# Each kernel is taken from one of the bench's per-stage eager steps (its NVTX range: "prefill",
# "decode b<batch>"): the runner's start-up runs steps of its own (graph captures, the GEMV's
# timing) at short contexts, which a launch count cannot tell apart.
profile flash_hopper_kernel ncu-flash-hopper.txt --nvtx --nvtx-include "prefill/" -- \
  --batches 1 --context 256 --prefill 2048 --variants fast --profile-batches 1
profile flash_prefill_kernelILi128E ncu-flash-mma.txt --nvtx --nvtx-include "prefill/" -- \
  --batches 1 --context 256 --prefill 2048 --variants mma-flash --profile-batches 1
profile decode_attention_kernelILi128E ncu-decode-attention.txt --nvtx --nvtx-include "decode b32/" -- \
  --batches 32 --context 2048 --prefill 256 --variants fast --profile-batches 32
profile gemv_kernelILi1ELb0E ncu-gemv.txt --nvtx --nvtx-include "decode b1/" -- \
  --batches 1 --context 2048 --prefill 256 --variants fast --profile-batches 1
echo "ncu_profile: wrote ncu-flash-hopper.txt, ncu-flash-mma.txt, ncu-decode-attention.txt and" \
  "ncu-gemv.txt in $out"
