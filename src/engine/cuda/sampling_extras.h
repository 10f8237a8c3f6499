// The GPU's work on a step's logits around the sampler (gpu_sampler.h) for rows with sampling
// extras (SamplingExtras, step_arrays.h); launched only for steps that have them, so a plain step
// runs exactly the kernels it ran before. One thread block per row; rows are sample rows.
//
//   launch_logit_adjustments  before the sampler: logit_bias and the penalties
//                             (logit_adjustment.h) applied in place to each row's adjusted ids;
//                             with a penalty on, a row that feeds a placeholder counts its token
//                             (read from `previous_sampled`, the previous step's samples) as one
//                             more generated occurrence. The raw values it replaces are saved in
//                             extras.saved_logits / saved_placeholder_ids.
//   launch_restore_logits     after the sampler: puts the saved raw values back, so the logits
//                             buffer holds the raw logits again (for logprobs and return_logits).
//   launch_logprobs           after the restore: for each row with extras.logprobs[r] = k >= 0,
//                             out[r][0] = the sampled id's logprob, out[r][1..k] the k most likely
//                             ids' (ties to the lower id), the rest of the kLogprobsStride entries
//                             {-1, 0}: log_softmax of the raw logits, as token_logprobs() on the
//                             CPU (sampler.h), in fp32. Rows that did not ask get {-1, 0} only.
//                             Top ids are found by k block-wide argmax passes (k <= 20).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "engine/cuda/step_arrays.h"
#include "engine/model/token_logprob.h"

namespace gpufrac::engine {

void launch_logit_adjustments(float* logits, int rows, int vocab, const StepArrays& arrays,
                              const int32_t* previous_sampled, cudaStream_t stream);
void launch_restore_logits(float* logits, int rows, int vocab, const StepArrays& arrays,
                           cudaStream_t stream);
void launch_logprobs(const float* logits, int rows, int vocab, const StepArrays& arrays,
                     const int32_t* sampled, TokenLogprob* out, cudaStream_t stream);

}  // namespace gpufrac::engine
