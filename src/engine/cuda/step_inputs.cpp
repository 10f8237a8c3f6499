#include "engine/cuda/step_inputs.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "common/error.h"
#include "engine/cuda/cuda_check.h"

namespace gpufrac::engine {

struct StepInputs::Layout {
  uint64_t token_ids, positions, slot_mapping, token_seq, token_context;
  uint64_t seq_query_start, seq_context;
  uint64_t sample_token, temperature, top_k, top_p, seed, generated;
  uint64_t suppressed_start, suppressed_ids;
  uint64_t block_tables;
  uint64_t end(int seqs, int table_width) const {
    return block_tables + uint64_t(seqs) * uint64_t(table_width) * 4;
  }
};

namespace {

uint64_t take(uint64_t& cursor, uint64_t bytes) {
  uint64_t at = cursor;
  cursor += (bytes + 15) / 16 * 16;
  return at;
}

}  // namespace

// The sampling extras of `rows` sampled rows with `entries` logit adjustments in all: the inputs
// (uploaded), then the device scratch of the adjustment kernels.
struct StepInputs::ExtrasLayout {
  uint64_t min_p, penalties, logprobs, adjust_start, adjust_ids, adjust_bias, adjust_counts;
  uint64_t upload_end;
  uint64_t saved_logits, saved_placeholder_ids, end;

  static ExtrasLayout of(int rows, int entries) {
    ExtrasLayout l{};
    uint64_t cursor = 0, r = uint64_t(rows), a = uint64_t(std::max(entries, 1));
    l.min_p = take(cursor, r * 4);
    l.penalties = take(cursor, r * sizeof(Penalties));
    l.logprobs = take(cursor, r * 4);
    l.adjust_start = take(cursor, (r + 1) * 4);
    l.adjust_ids = take(cursor, a * 4);
    l.adjust_bias = take(cursor, a * 4);
    l.adjust_counts = take(cursor, a * 4);
    l.upload_end = cursor;
    l.saved_logits = take(cursor, (a + r) * 4);
    l.saved_placeholder_ids = take(cursor, r * 4);
    l.end = cursor;
    return l;
  }
};

namespace {

std::string sequence_label(size_t index) { return "forward: sequence " + std::to_string(index); }

}  // namespace

StepInputs::Layout StepInputs::layout(int tokens, int seqs, int samples, int suppressed) {
  Layout l{};
  uint64_t cursor = sizeof(StepHeader);
  uint64_t t = uint64_t(tokens), s = uint64_t(seqs), r = uint64_t(samples);
  l.token_ids = take(cursor, t * 4);
  l.positions = take(cursor, t * 4);
  l.slot_mapping = take(cursor, t * 4);
  l.token_seq = take(cursor, t * 4);
  l.token_context = take(cursor, t * 4);
  l.seq_query_start = take(cursor, (s + 1) * 4);
  l.seq_context = take(cursor, s * 4);
  l.sample_token = take(cursor, r * 4);
  l.temperature = take(cursor, r * 4);
  l.top_k = take(cursor, r * 4);
  l.top_p = take(cursor, r * 4);
  l.seed = take(cursor, r * 8);
  l.generated = take(cursor, r * 8);
  l.suppressed_start = take(cursor, (r + 1) * 4);
  l.suppressed_ids = take(cursor, uint64_t(std::max(suppressed, 1)) * 4);
  l.block_tables = cursor;
  return l;
}

StepInputs::StepInputs(const StepLimits& limits) : limits_(limits) {
  int max_suppressed = limits.max_seqs * kMaxSuppressedPerSeq;
  uint64_t bytes = layout(limits.max_tokens, limits.max_seqs, limits.max_seqs, max_suppressed)
                       .end(limits.max_seqs, limits.max_table_width);
  host_[0] = PinnedBuffer(bytes, "step inputs");
  host_[1] = PinnedBuffer(bytes, "step inputs");
  device_ = DeviceBuffer(bytes, "step inputs");
}

bool StepInputs::fits_graph(const StepBatch& batch, int rows) {
  if (batch.sequences.empty() || int(batch.sequences.size()) > rows) return false;
  for (const SequenceWork& s : batch.sequences) {
    if (s.tokens.size() != 1 || !s.sample) return false;
    if (s.sampling.suppressed_ids.size() > size_t(kGraphSuppressedPerRow)) return false;
    if (s.sampling.uses_extras()) return false;
  }
  return true;
}

void StepInputs::validate(const StepBatch& batch, int previous_samples) const {
  if (batch.sequences.empty()) throw RuntimeFailure("forward: the batch has no sequences");
  if (int(batch.sequences.size()) > limits_.max_seqs) {
    throw RuntimeFailure("forward: " + std::to_string(batch.sequences.size()) +
                         " sequences in one step, the CUDA runner was sized for " +
                         std::to_string(limits_.max_seqs));
  }
  if (limits_.num_blocks == 0) throw RuntimeFailure("forward: the KV cache is not allocated");
  int64_t tokens = 0;
  int64_t suppressed = 0;
  for (size_t i = 0; i < batch.sequences.size(); ++i) {
    const SequenceWork& s = batch.sequences[i];
    if (s.tokens.empty()) throw RuntimeFailure(sequence_label(i) + " feeds no tokens");
    if (s.start_position < 0) throw RuntimeFailure(sequence_label(i) + " has a negative start");
    tokens += int64_t(s.tokens.size());
    suppressed += int64_t(s.sampling.suppressed_ids.size());
    if (s.previous_sample_row >= previous_samples) {
      throw RuntimeFailure(sequence_label(i) + " takes its last token from sample row " +
                           std::to_string(s.previous_sample_row) + " of the previous step, " +
                           "which sampled " + std::to_string(previous_samples) + " rows");
    }
    const size_t real_ids = s.tokens.size() - (s.previous_sample_row >= 0 ? 1 : 0);
    for (int32_t id : s.tokens.first(real_ids)) {
      if (id < 0 || id >= limits_.vocab_size) {
        throw RuntimeFailure(sequence_label(i) + ": token id " + std::to_string(id) +
                             " is outside the vocabulary [0, " +
                             std::to_string(limits_.vocab_size) + ")");
      }
    }
    for (const LogitAdjustment& a : s.sampling.adjustments) {
      if (a.id < 0 || a.id >= limits_.vocab_size || a.output_count < 0) {
        throw RuntimeFailure(sequence_label(i) + ": logit adjustment of id " +
                             std::to_string(a.id) + " (count " + std::to_string(a.output_count) +
                             ") outside the vocabulary [0, " + std::to_string(limits_.vocab_size) +
                             ")");
      }
    }
    if (s.sampling.logprobs < -1 || s.sampling.logprobs > kMaxTopLogprobs) {
      throw RuntimeFailure(sequence_label(i) + " asks for " + std::to_string(s.sampling.logprobs) +
                           " logprobs; at most " + std::to_string(kMaxTopLogprobs));
    }
    int64_t context = s.start_position + int64_t(s.tokens.size());
    int64_t blocks = (context + limits_.block_size - 1) / limits_.block_size;
    if (blocks > limits_.max_table_width) {
      throw RuntimeFailure(sequence_label(i) + " reaches position " + std::to_string(context) +
                           ", beyond the runner's max_model_len of " +
                           std::to_string(int64_t(limits_.max_table_width) * limits_.block_size));
    }
    if (int64_t(s.block_table.size()) < blocks) {
      throw RuntimeFailure(sequence_label(i) + ": its block table has " +
                           std::to_string(s.block_table.size()) + " blocks, " +
                           std::to_string(context) + " positions need " + std::to_string(blocks));
    }
    for (int64_t b = 0; b < blocks; ++b) {
      int32_t block = s.block_table[size_t(b)];
      if (block < 0 || block >= limits_.num_blocks) {
        throw RuntimeFailure(sequence_label(i) + ": KV block id " + std::to_string(block) +
                             " is outside the pool [0, " + std::to_string(limits_.num_blocks) +
                             ")");
      }
    }
  }
  if (tokens > limits_.max_tokens) {
    throw RuntimeFailure("forward: " + std::to_string(tokens) +
                         " tokens in one step, the CUDA runner was sized for " +
                         std::to_string(limits_.max_tokens));
  }
  if (suppressed > int64_t(limits_.max_seqs) * kMaxSuppressedPerSeq) {
    throw RuntimeFailure("forward: " + std::to_string(suppressed) + " suppressed ids in one step, " +
                         "at most " + std::to_string(kMaxSuppressedPerSeq) + " per sequence fit");
  }
}

PackedStep StepInputs::pack(const StepBatch& batch, int padded_rows, int previous_samples) {
  validate(batch, previous_samples);
  if (padded_rows > 0 && !fits_graph(batch, padded_rows)) {
    throw RuntimeFailure("forward: internal error: a step padded to a graph bucket must be a "
                         "pure decode step that fits it");
  }
  return fill(&batch, padded_rows);
}

PackedStep StepInputs::pack_padding(int rows) { return fill(nullptr, rows); }

PackedStep StepInputs::fill(const StepBatch* batch, int padded_rows) {
  static const std::vector<SequenceWork> kNoSequences;
  const std::vector<SequenceWork>& sequences = batch ? batch->sequences : kNoSequences;
  const int real_seqs = int(sequences.size());
  int tokens = 0, samples = 0, suppressed = 0, width = 1, max_context = 0;
  for (const SequenceWork& s : sequences) {
    tokens += int(s.tokens.size());
    samples += s.sample ? 1 : 0;
    suppressed += s.sample ? int(s.sampling.suppressed_ids.size()) : 0;
    int context = s.start_position + int(s.tokens.size());
    max_context = std::max(max_context, context);
    width = std::max(width, (context + limits_.block_size - 1) / limits_.block_size);
  }
  const int real_samples = samples;
  int seqs = real_seqs, suppressed_capacity = suppressed;
  if (padded_rows > 0) {
    tokens = seqs = samples = padded_rows;
    suppressed_capacity = padded_rows * kGraphSuppressedPerRow;
  }
  Layout l = layout(tokens, seqs, samples, suppressed_capacity);
  current_ = 1 - current_;
  unsigned char* h = host_[current_].as<unsigned char>();
  auto at = [&](uint64_t offset) { return reinterpret_cast<int32_t*>(h + offset); };
  int32_t *token_ids = at(l.token_ids), *positions = at(l.positions), *slots = at(l.slot_mapping);
  int32_t *token_seq = at(l.token_seq), *token_context = at(l.token_context);
  int32_t *query_start = at(l.seq_query_start), *seq_context = at(l.seq_context);
  int32_t *sample_token = at(l.sample_token), *top_k = at(l.top_k);
  int32_t *suppressed_start = at(l.suppressed_start), *suppressed_ids = at(l.suppressed_ids);
  int32_t* tables = at(l.block_tables);
  auto* temperature = reinterpret_cast<float*>(h + l.temperature);
  auto* top_p = reinterpret_cast<float*>(h + l.top_p);
  auto* seed = reinterpret_cast<uint64_t*>(h + l.seed);
  auto* generated = reinterpret_cast<int64_t*>(h + l.generated);

  reinterpret_cast<StepHeader*>(h)->table_width = width;
  int token = 0, row = 0, ids = 0;
  for (int si = 0; si < seqs; ++si) {
    int32_t* table = tables + int64_t(si) * width;
    query_start[si] = token;
    if (si >= real_seqs) {  // padding row of a graph bucket
      std::fill(table, table + width, 0);
      token_ids[token] = 0;
      positions[token] = 0;
      slots[token] = -1;
      token_seq[token] = si;
      token_context[token] = 0;
      seq_context[si] = 0;
      sample_token[row] = token;
      temperature[row] = 0;
      top_k[row] = 0;
      top_p[row] = 1;
      seed[row] = 0;
      generated[row] = 0;
      suppressed_start[row] = ids;
      ++token;
      ++row;
      continue;
    }
    const SequenceWork& s = sequences[size_t(si)];
    int context = s.start_position + int(s.tokens.size());
    int blocks = (context + limits_.block_size - 1) / limits_.block_size;
    std::copy(s.block_table.begin(), s.block_table.begin() + blocks, table);
    std::fill(table + blocks, table + width, 0);
    seq_context[si] = context;
    for (size_t j = 0; j < s.tokens.size(); ++j, ++token) {
      int position = s.start_position + int(j);
      const bool placeholder = s.previous_sample_row >= 0 && j + 1 == s.tokens.size();
      token_ids[token] = placeholder ? -1 - s.previous_sample_row : s.tokens[j];
      positions[token] = position;
      slots[token] = table[position / limits_.block_size] * limits_.block_size +
                     position % limits_.block_size;
      token_seq[token] = si;
      token_context[token] = position + 1;
    }
    if (s.sample) {
      const SamplingParams& p = s.sampling;
      sample_token[row] = token - 1;
      temperature[row] = p.temperature;
      top_k[row] = p.top_k;
      top_p[row] = p.top_p;
      seed[row] = p.seed;
      generated[row] = p.generated;
      suppressed_start[row] = ids;
      for (int32_t id : p.suppressed_ids) suppressed_ids[ids++] = id;
      ++row;
    }
  }
  query_start[seqs] = token;
  suppressed_start[samples] = ids;
  used_bytes_ = l.end(seqs, width);

  PackedStep out;
  out.num_tokens = tokens;
  out.num_seqs = seqs;
  out.num_samples = samples;
  out.real_samples = real_samples;
  out.max_context = max_context;
  out.arrays = arrays_at(l);
  extras_upload_bytes_ = 0;
  const bool extras = std::any_of(sequences.begin(), sequences.end(), [](const SequenceWork& s) {
    return s.sample && s.sampling.uses_extras();
  });
  if (extras) fill_extras(*batch, out);
  return out;
}

void StepInputs::fill_extras(const StepBatch& batch, PackedStep& out) {
  int rows = 0, entries = 0;
  for (const SequenceWork& s : batch.sequences) {
    if (!s.sample) continue;
    ++rows;
    entries += int(s.sampling.adjustments.size());
    out.adjusts_logits |= s.sampling.penalties.active() || !s.sampling.adjustments.empty();
    out.wants_logprobs |= s.sampling.logprobs >= 0;
  }
  const ExtrasLayout l = ExtrasLayout::of(rows, entries);
  PinnedBuffer& host = extras_host_[current_];
  DeviceBuffer& device = extras_device_[current_];
  if (host.bytes() < l.upload_end) host = PinnedBuffer(2 * l.upload_end, "sampling extras");
  if (device.bytes() < l.end) device = DeviceBuffer(2 * l.end, "sampling extras");

  unsigned char* h = host.as<unsigned char>();
  auto* min_p = reinterpret_cast<float*>(h + l.min_p);
  auto* penalties = reinterpret_cast<Penalties*>(h + l.penalties);
  auto* logprobs = reinterpret_cast<int32_t*>(h + l.logprobs);
  auto* adjust_start = reinterpret_cast<int32_t*>(h + l.adjust_start);
  auto* adjust_ids = reinterpret_cast<int32_t*>(h + l.adjust_ids);
  auto* adjust_bias = reinterpret_cast<float*>(h + l.adjust_bias);
  auto* adjust_counts = reinterpret_cast<int32_t*>(h + l.adjust_counts);
  int row = 0, at = 0;
  for (const SequenceWork& s : batch.sequences) {
    if (!s.sample) continue;
    const SamplingParams& p = s.sampling;
    min_p[row] = p.min_p;
    penalties[row] = p.penalties;
    logprobs[row] = p.logprobs;
    adjust_start[row] = at;
    for (const LogitAdjustment& a : p.adjustments) {
      adjust_ids[at] = a.id;
      adjust_bias[at] = a.bias;
      adjust_counts[at] = a.output_count << 1 | (a.in_prompt ? 1 : 0);
      ++at;
    }
    ++row;
  }
  adjust_start[rows] = at;
  extras_upload_bytes_ = l.upload_end;

  unsigned char* d = device.as<unsigned char>();
  SamplingExtras& x = out.arrays.extras;
  x.min_p = reinterpret_cast<const float*>(d + l.min_p);
  x.penalties = reinterpret_cast<const Penalties*>(d + l.penalties);
  x.logprobs = reinterpret_cast<const int32_t*>(d + l.logprobs);
  x.adjust_start = reinterpret_cast<const int32_t*>(d + l.adjust_start);
  x.adjust_ids = reinterpret_cast<const int32_t*>(d + l.adjust_ids);
  x.adjust_bias = reinterpret_cast<const float*>(d + l.adjust_bias);
  x.adjust_counts = reinterpret_cast<const int32_t*>(d + l.adjust_counts);
  x.saved_logits = reinterpret_cast<float*>(d + l.saved_logits);
  x.saved_placeholder_ids = reinterpret_cast<int32_t*>(d + l.saved_placeholder_ids);
}

StepArrays StepInputs::arrays_at(const Layout& l) const {
  auto* d = device_.as<unsigned char>();
  auto dev = [&](uint64_t offset) { return reinterpret_cast<const int32_t*>(d + offset); };
  StepArrays a;
  a.header = reinterpret_cast<const StepHeader*>(d);
  a.token_ids = dev(l.token_ids);
  a.positions = dev(l.positions);
  a.slot_mapping = dev(l.slot_mapping);
  a.token_seq = dev(l.token_seq);
  a.token_context = dev(l.token_context);
  a.seq_query_start = dev(l.seq_query_start);
  a.seq_context = dev(l.seq_context);
  a.sample_token = dev(l.sample_token);
  a.temperature = reinterpret_cast<const float*>(d + l.temperature);
  a.top_k = dev(l.top_k);
  a.top_p = reinterpret_cast<const float*>(d + l.top_p);
  a.seed = reinterpret_cast<const uint64_t*>(d + l.seed);
  a.generated = reinterpret_cast<const int64_t*>(d + l.generated);
  a.suppressed_start = dev(l.suppressed_start);
  a.suppressed_ids = dev(l.suppressed_ids);
  a.block_tables = dev(l.block_tables);
  return a;
}

StepArrays StepInputs::bucket_arrays(int rows) const {
  return arrays_at(layout(rows, rows, rows, rows * kGraphSuppressedPerRow));
}

void StepInputs::upload(cudaStream_t stream) const {
  GPUFRAC_CUDA_CHECK(cudaMemcpyAsync(device_.data(), host_[current_].data(), used_bytes_,
                                     cudaMemcpyHostToDevice, stream));
  if (extras_upload_bytes_ > 0) {
    GPUFRAC_CUDA_CHECK(cudaMemcpyAsync(extras_device_[current_].data(),
                                       extras_host_[current_].data(), extras_upload_bytes_,
                                       cudaMemcpyHostToDevice, stream));
  }
}

}  // namespace gpufrac::engine
