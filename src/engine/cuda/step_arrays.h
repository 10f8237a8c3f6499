// The device-side view of one step's packed inputs (filled by StepInputs, step_inputs.h): the
// pointers kernels read. C++17 and free of host-only headers, so .cu files can include it.
#pragma once

#include <cstdint>

#include "engine/model/logit_adjustment.h"

namespace gpufrac::engine {

// Sampling inputs beyond temperature, top-k, top-p and suppression (SamplingParams::uses_extras),
// packed in a buffer of their own (StepInputs) only for steps where a row uses them. Otherwise
// every pointer is null and the sampler runs exactly its plain path; the decode graphs are
// captured that way, so a step with extras always runs eagerly.
struct SamplingExtras {
  const float* min_p = nullptr;            // [R]
  const Penalties* penalties = nullptr;    // [R]
  const int32_t* adjust_start = nullptr;   // [R + 1]: range of row r in the adjust_* arrays
  const int32_t* adjust_ids = nullptr;     // [A]
  const float* adjust_bias = nullptr;      // [A]
  const int32_t* adjust_counts = nullptr;  // [A]: output_count << 1 | in_prompt
  const int32_t* logprobs = nullptr;       // [R]: SamplingParams::logprobs
  // Device scratch the adjustment kernels write: the raw logits they replaced ([A] entries, then
  // [R] placeholder slots) and which id each row's placeholder slot holds ([R], -1: none).
  float* saved_logits = nullptr;
  int32_t* saved_placeholder_ids = nullptr;
};

struct StepHeader {
  int32_t table_width;  // entries per block-table row this step
  int32_t pad[3];
};

// Device pointers into the uploaded buffer, as the kernels read them.
struct StepArrays {
  const StepHeader* header = nullptr;
  const int32_t* token_ids = nullptr;        // [T]
  const int32_t* positions = nullptr;        // [T]
  const int32_t* slot_mapping = nullptr;     // [T]: block * block_size + offset; -1 = no write
  const int32_t* token_seq = nullptr;        // [T]: the token's sequence (block-table row)
  const int32_t* token_context = nullptr;    // [T]: positions it attends to (position + 1)
  const int32_t* seq_query_start = nullptr;  // [S + 1]: first token of each sequence
  const int32_t* seq_context = nullptr;      // [S]: start_position + tokens fed
  const int32_t* sample_token = nullptr;     // [R]: token whose logits row r samples from
  const float* temperature = nullptr;        // [R]
  const int32_t* top_k = nullptr;            // [R]
  const float* top_p = nullptr;              // [R]
  const uint64_t* seed = nullptr;            // [R]
  const int64_t* generated = nullptr;        // [R]
  const int32_t* suppressed_start = nullptr; // [R + 1]: range of row r in suppressed_ids
  const int32_t* suppressed_ids = nullptr;
  const int32_t* block_tables = nullptr;     // [S][header->table_width]
  SamplingExtras extras;
};

}  // namespace gpufrac::engine
