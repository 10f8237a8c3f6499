// Next-token sampling on the GPU, one thread block per row of fp32 logits; only the int32 ids
// go back to the host.
//
// Semantics (the distribution matches the CPU sampler, sampler.h; the random draw differs):
// - logit_bias and the penalties are applied to the logits before (sampling_extras.h).
// - temperature < 1e-5: argmax over allowed ids, ties to the lowest id.
// - otherwise z = logits / temperature over allowed ids (finite, not suppressed); min-p (rows
//   with SamplingExtras::min_p) keeps the ids with z >= max z + log(min_p), top-k the ids whose
//   z is at least the k-th largest (radix selection on the float bits: ties at the boundary are
//   all kept); both keep an upper set of z, so the stricter threshold applies. Top-p then keeps
//   the most likely ids whose probability, renormalised over that set, reaches top_p (found by
//   two histogram passes over z - max z, resolving the boundary to 1/32768 of a logit unit); the
//   token is drawn by an exponential race: argmax z_i - log(-log u_i), u_i a uniform hashed from
//   (seed, generated, i). So no sort, and a request's draw depends only on its own logits, seed
//   and step.
// - Rows whose every id is excluded yield -1.
// With a split scratch buffer, rows that need no min-p / top-k / top-p threshold (greedy, or a
// plain temperature draw: the bench's case) are scanned by many blocks at once (each a slice of
// the vocabulary, then one block merges the slices' winners) instead of by one block per row,
// which at batch 1 leaves all but one SM idle for the whole scan. The result is the same id: the
// same score per id, the same tie rule. Steps without extras (SamplingExtras all null) launch
// the same kernels as before min-p existed, with the same ids bit for bit.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "engine/cuda/step_arrays.h"

namespace gpufrac::engine {

// logits: [rows][vocab] fp32; parameters per row from `arrays` (temperature, top_k, top_p, seed,
// generated, suppressed ids); writes out_tokens[rows]. `split_scratch`: null (one block per
// row), or sampler_split_scratch_bytes(rows) bytes of device memory for the split scan.
void launch_sampler(const float* logits, int rows, int vocab, const StepArrays& arrays,
                    int32_t* out_tokens, cudaStream_t stream, void* split_scratch = nullptr);
uint64_t sampler_split_scratch_bytes(int rows);

}  // namespace gpufrac::engine
