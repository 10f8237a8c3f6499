// The inputs of one forward step, packed on the host into one page-locked buffer and copied to
// the device with a single cudaMemcpyAsync: token ids, positions, the KV slot of every token,
// per-token attention extents, block tables, the rows to sample and their sampling parameters.
//
// Layout: arrays at offsets fixed by (tokens, sequences, samples, suppressed-id capacity) with
// the block tables last. Their row width (the longest context's block count this step) lives in
// device memory (StepHeader), so a CUDA graph captured for a decode bucket replays unchanged for
// any context length: a bucket's layout depends on its row count alone.
//
// Padded decode steps (graph buckets): rows past the real sequences feed token 0 at position 0,
// write no K/V (slot -1), attend to nothing (context 0) and sample greedily; their outputs are
// dropped.
//
// A placeholder token (SequenceWork::previous_sample_row = r, runner.h) is packed as the id
// -1 - r: the embedding kernel reads the previous step's sampled id of row r on the device.
//
// Sampling extras (min-p, penalties, logit adjustments, logprobs: SamplingExtras in
// step_arrays.h) go to a second pair of page-locked buffers and a device buffer of their own,
// packed only when a sampled row uses them and grown as needed; a step without them uploads
// exactly what it did before they existed. A step with extras never fits a graph bucket.
//
// Not thread-safe. pack() alternates between two page-locked buffers, so a step can be packed
// while the previous step's upload waits on the stream; the upload of the step packed two packs
// earlier must have completed (the runner collects a step before packing the one after next).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "engine/cuda/device_buffer.h"
#include "engine/cuda/step_arrays.h"
#include "engine/model/runner.h"

namespace gpufrac::engine {

// What pack() produced: counts (padded ones for graph buckets) and the device arrays.
struct PackedStep {
  int num_tokens = 0;
  int num_seqs = 0;
  int num_samples = 0;
  int real_samples = 0;  // samples of real sequences (the first real_samples rows)
  int max_context = 0;   // longest context this step, in positions
  bool adjusts_logits = false;  // a row has logit adjustments or penalties (arrays.extras set)
  bool wants_logprobs = false;  // a row asked for logprobs (arrays.extras set)
  StepArrays arrays;
};

struct StepLimits {
  int max_tokens = 0;      // tokens per step
  int max_seqs = 0;        // sequences per step
  int max_table_width = 0; // block-table entries per sequence (max_model_len / block_size)
  int vocab_size = 0;
  int block_size = 0;
  int num_blocks = 0;
};

class StepInputs {
 public:
  // Suppressed ids a padded (graph) row may carry; a step with more runs without a graph.
  static constexpr int kGraphSuppressedPerRow = 16;
  // Suppressed ids per sequence on average that a step's buffer holds.
  static constexpr int kMaxSuppressedPerSeq = 64;

  explicit StepInputs(const StepLimits& limits);

  // True when `batch` is a pure decode step that fits a graph bucket of `rows` rows (and uses no
  // sampling extras).
  static bool fits_graph(const StepBatch& batch, int rows);
  // Validates `batch` against the limits (throws RuntimeFailure naming the first problem, before
  // anything is written) and lays it out; `padded_rows` > 0 pads a pure decode step to that many
  // rows with the bucket layout. `previous_samples`: the rows the previous step sampled, which
  // placeholders may name.
  PackedStep pack(const StepBatch& batch, int padded_rows, int previous_samples);
  // A padded decode layout of `rows` rows that are all padding: warms a bucket up before its
  // graph is captured.
  PackedStep pack_padding(int rows);
  // The device arrays of a padded decode layout of `rows` rows, without packing anything: what a
  // graph for that bucket is captured with.
  StepArrays bucket_arrays(int rows) const;
  // Copies the last packed step to the device buffers (asynchronous on `stream`).
  void upload(cudaStream_t stream) const;
  // GPU memory held now (the step buffer and the extras buffers grown so far).
  uint64_t device_bytes() const {
    return device_.bytes() + extras_device_[0].bytes() + extras_device_[1].bytes();
  }

 private:
  struct Layout;
  struct ExtrasLayout;
  static Layout layout(int tokens, int seqs, int samples, int suppressed);
  StepArrays arrays_at(const Layout& layout) const;
  void validate(const StepBatch& batch, int previous_samples) const;
  PackedStep fill(const StepBatch* batch, int padded_rows);
  // Packs the sampling extras of the sampled rows into extras_host_[current_] and points
  // out.arrays.extras at extras_device_[current_].
  void fill_extras(const StepBatch& batch, PackedStep& out);

  StepLimits limits_;
  PinnedBuffer host_[2];  // alternate packs
  int current_ = 0;       // the buffer of the last pack
  DeviceBuffer device_;
  uint64_t used_bytes_ = 0;
  // Alternate with host_ as well (and grow on demand): pack n reallocates only buffers that
  // pack n - 2 used, whose step has completed.
  PinnedBuffer extras_host_[2];
  DeviceBuffer extras_device_[2];
  uint64_t extras_upload_bytes_ = 0;  // 0: the last pack had no extras
};

}  // namespace gpufrac::engine
