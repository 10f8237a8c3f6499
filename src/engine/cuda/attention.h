// Paged attention over the KV cache, for any mix of decode tokens and prompt chunks: every query
// token (row) attends causally to the first `token_context[row]` positions of its sequence,
// reading K/V through the sequence's block table (the token's own K/V were written by
// launch_qkv_rope_kv before; in a decode-only step the decode kernel writes and uses them
// itself, AttentionParams::rope).
//
// One thread block per (row, KV head, group of up to 8 query heads): all query heads that share
// a KV head read each K/V vector once (GQA). When rows x KV heads would leave the SMs this
// process may use idle for part of the grid's waves, the context is split across `splits` blocks
// (flash-decoding) whose partial results are merged by log-sum-exp in a second kernel. Rows with
// context 0 (graph padding) produce zeros. The split count is chosen on the host
// (attention_splits) and each block derives its range from the context length in device memory,
// so a captured graph stays valid for any length.
//
// Two kernel sets (AttentionKernels):
// - kSimple: the kernel above for every row (scalar FMAs; the reference the fast ones are tested
//   against, and the fallback selected by GPUFRAC_CUDA_SIMPLE=1).
// - kFast (head_dim 64 or 128, up to 8 query heads per KV head, a power-of-two block size; other
//   shapes use kSimple): sequences with at least kFlashMinQueries query rows this step (prompt
//   chunks) go to a flash-attention kernel on the tensor cores (with hopper_flash where it runs:
//   the warpgroup MMA, 64 query rows x two query heads per block, 128-key K/V tiles copied by
//   TMA, flash_hopper.cu; otherwise mma.sync m16n8k16 bf16, 64 query rows x two query heads of
//   one KV head per block, one head where the group is odd or where the pairs' blocks would not
//   fill the sm_count SMs; 64-key K/V tiles in shared memory, online softmax in registers); every
//   other row (decode) goes to a kernel that stages 64-key K/V tiles in shared memory with
//   16-byte loads (three tiles in flight in a decode-only step that streams whole contexts,
//   decode_streams_whole_contexts; two otherwise) and computes all
//   query heads of its KV head from them, split over the context as above; its grid spans rows
//   [0, decode_rows) and the split count is planned for those rows (a served step puts its
//   decodes first, before the prompt chunks). With overlapped launches the decode kernel runs
//   beside the flash kernel of its step instead of after it (attention_fast.cu says why that is
//   safe).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "engine/cuda/cuda_types.h"
#include "engine/cuda/layer_kernels.h"
#include "engine/cuda/step_arrays.h"

namespace gpufrac::engine {

enum class AttentionKernels { kSimple, kFast };

struct AttentionParams {
  const bf16* q = nullptr;        // [rows][num_heads][head_dim]
  const bf16* k_cache = nullptr;  // this layer: [blocks][num_kv_heads][block_size][head_dim]
  const bf16* v_cache = nullptr;
  const StepHeader* header = nullptr;        // block-table width (device)
  const int32_t* block_tables = nullptr;     // [sequences][width]
  const int32_t* token_seq = nullptr;        // [rows]: block-table row of each query token
  const int32_t* token_context = nullptr;    // [rows]: positions it attends to
  const int32_t* seq_query_start = nullptr;  // [num_seqs + 1]: first row of each sequence
  int num_seqs = 0;
  int max_queries = 1;  // most rows of one sequence this step (host value; 1 for graph buckets)
  int min_queries = 1;  // fewest rows of one sequence this step (host value; 1 for graph buckets)
  int rows = 0;
  // Fast kernels: rows [0, decode_rows) hold every row of a sequence with fewer than
  // kFlashMinQueries rows (the rest are the flash kernel's prompt chunks); the decode kernel's
  // and the split merge's grids span only these. -1: every row.
  int decode_rows = -1;
  // Sequences [0, first_flash_seq) have fewer than kFlashMinQueries rows (a served step's
  // decodes): the flash kernel's grid starts at this one.
  int first_flash_seq = 0;
  int num_heads = 0;
  int num_kv_heads = 0;
  int head_dim = 0;
  int block_size = 0;
  float scale = 0;  // 1 / sqrt(head_dim)
  int splits = 1;
  float* partial_out = nullptr;  // splits > 1: [rows][num_heads][splits][head_dim]
  float* partial_lse = nullptr;  // splits > 1: [rows][num_heads][splits] (log2 domain)
  bf16* out = nullptr;           // [rows][num_heads][head_dim]
  AttentionKernels kernels = AttentionKernels::kFast;
  int sm_count = 0;  // SMs this process may use (the flash kernel's block shape); 0: unknown
  // Prompt chunks take the flash kernel on Hopper's warpgroup MMA where it runs (head_dim 128,
  // an even query-head group, a block size of 8 to 64, sm_90); otherwise the mma.sync one.
  bool hopper_flash = false;
  // Steps with decode rows beside prompt chunks on the Hopper flash kernel: that kernel runs as a
  // persistent grid of at most flash_sms blocks (one per SM) taking the chunks' tiles in
  // balanced rounds, and the decode kernel's blocks run on the other SMs meanwhile
  // (flash_sms_beside_decodes). 0: one flash block per tile.
  int flash_sms = 0;
  // With a persistent flash grid: a counter (device int, 0 between launches) of the decode
  // blocks that have finished; only the last one waits for the flash kernel before it exits.
  // Null: every decode block beside the flash kernel waits for it before it exits.
  int32_t* beside_flash_exits = nullptr;
  // Launch the fast kernels and the split merge to overlap the previous kernel on the stream
  // (kernel_launch.cuh); every attention kernel waits for its predecessor first.
  bool overlap = false;
  // rope.qkv set (decode_attention_applies_rope): the decode kernel computes each row's q
  // through q/k norm + RoPE from rope.qkv itself and writes each row's K/V into the cache
  // (launch_qkv_rope_kv is not run; q is not read).
  QkvRopeParams rope;
};

// Sequences with at least this many query rows in a step take the flash (prefill) kernel.
constexpr int kFlashMinQueries = 16;
// True when kFast has kernels for this shape and a power-of-two block size (otherwise
// launch_paged_attention uses kSimple).
bool fast_attention_supported(int num_heads, int num_kv_heads, int head_dim, int block_size);
// Whether launch_paged_attention runs the kFast kernels for this choice and shape (the flash
// kernel then takes the prompt chunks, and the decode kernel only the decode_rows).
bool runs_fast_attention(AttentionKernels kernels, int num_heads, int num_kv_heads, int head_dim,
                         int block_size);

// How many context splits to run `rows` query rows in on `sm_count` SMs: the count whose grid,
// in waves of kDecodeBlocksPerSm blocks per SM (one per SM `beside_flash`: the decode rows of a
// step with prompt chunks, whose blocks share the SMs with the flash kernel's), finishes first
// when each block costs its 64-key tiles plus one tile of fixed cost; a larger count must win by
// 10%. Every split covers at least 64 positions of `max_context`; 0 (unknown: graph capture)
// plans for 2048. Grids of 8 waves or more are not split.
int attention_splits(int rows, int num_heads, int num_kv_heads, int sm_count, int max_context,
                     bool beside_flash);
// SMs the flash kernel's persistent grid holds for p's attention (AttentionParams::flash_sms):
// its block count where p.flash_sms > 0, the step has prompt chunks and decode rows, and the
// Hopper flash kernel runs them; else 0. The decode rows' splits are then planned for the others.
int flash_sms_beside_decodes(const AttentionParams& p);
// Whether a decode-only step's `rows` stream whole contexts instead of splitting them: when the
// unsplit grid fills at least nine tenths of one wave of the kernel with three K/V stages in
// flight (two blocks per SM; at Qwen3-4B's 8 KV heads on 132 SMs, from 30 rows). With the fast
// kernels the runner then runs one split and launch_paged_attention that kernel (beside prompt
// chunks it plans and runs as before: the flash kernel needs the room).
bool decode_streams_whole_contexts(int rows, int num_heads, int num_kv_heads, int sm_count);
// Floats of partial_out (and of partial_lse, times 1/head_dim) needed for any rows >= 1 at this
// SM count or fewer (what a persistent flash grid leaves the decode rows), beside the flash
// kernel or not.
int64_t attention_partial_floats(int num_heads, int num_kv_heads, int head_dim, int sm_count);

// Whether the decode kernel takes the step's q/k norm + RoPE + KV write over (AttentionParams::
// rope): the fast kernels, a decode-only step of one row per sequence (max_queries 1), the
// q/k/v as one fp32 matrix, and a decode grid of one wave of resident blocks on p.sm_count SMs
// (each block computes its own query heads: in one wave that costs one block's time, in more it
// is paid per wave; batch 32 at context 2048, two waves, was 0.9% slower fused).
bool decode_attention_applies_rope(const AttentionParams& params, const QkvRopeParams& rope);

void launch_paged_attention(const AttentionParams& params, cudaStream_t stream);

}  // namespace gpufrac::engine
