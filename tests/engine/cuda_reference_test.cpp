// GPU test (label gpu): the CUDA runner against transformers on random Qwen3 checkpoints (the
// 0.6B shape and two layers of the 4B width) built by tests/gpu/engine/make_reference.py, which
// scripts/gpu-check runs first; GPUFRAC_REFERENCE_DIR names its output.
//
// The reference is transformers' forward pass of the saved bf16 checkpoint upcast to fp32: the
// exact function of the weights. The bound on max |ours - reference| over a checkpoint's logits
// is 2 x max |transformers bf16 - reference| on the same prompts: our bf16 engine must be no
// further from the exact function than twice what transformers' own bf16 inference is (two
// independent bf16 implementations each land about that far from it, in different directions).
// Top-1: equal at every position, except where the reference's logit of our token is within the
// bound of its maximum (a near tie, counted and printed). Greedy generation: 64 tokens equal to
// transformers' greedy generation; a divergence is accepted only at a step where the
// reference's own top-1/top-2 margin is within the bound, and is printed either way.
#include <gtest/gtest.h>

#include <cctype>
#include <cstdio>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "common/json.h"
#include "cuda_test_support.h"
#include "engine/cuda/cuda_runner.h"
#include "engine/model/model_loader.h"
#include "engine/model/safetensors.h"

namespace gpufrac::engine {
namespace {

using testing::BlockCounter;
using testing::TestSequence;

constexpr int kBlockSize = 16;

std::string reference_dir() {
  const char* dir = std::getenv("GPUFRAC_REFERENCE_DIR");
  return dir ? dir : "";
}

struct Reference {
  std::string name;
  Json json;
  std::vector<float> logits;  // [positions][vocab]
  std::vector<int64_t> first_row;  // row of each prompt's position 0
  double bound = 0;
};

Reference load_reference(const std::string& name) {
  Reference r;
  r.name = name;
  std::string dir = reference_dir() + "/" + name;
  r.json = Json::parse(read_small_file(dir + "/reference.json"));
  std::ifstream in(dir + "/logits_fp32.bin", std::ios::binary | std::ios::ate);
  if (!in) throw std::runtime_error("cannot open " + dir + "/logits_fp32.bin");
  r.logits.resize(size_t(in.tellg()) / sizeof(float));
  in.seekg(0);
  in.read(reinterpret_cast<char*>(r.logits.data()), std::streamsize(r.logits.size() * 4));
  int64_t row = 0;
  for (const Json& prompt : r.json["prompts"]) {
    r.first_row.push_back(row);
    row += int64_t(prompt.size());
  }
  r.bound = 2 * r.json["hf_bf16_max_abs_diff"].get<double>();
  return r;
}

struct Tally {
  int rows = 0;
  int exact_top1 = 0;
  int near_ties = 0;
  double max_abs_diff = 0;
};

class CudaReference : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    ASSERT_FALSE(reference_dir().empty())
        << "GPUFRAC_REFERENCE_DIR is not set: run scripts/gpu-check, which builds the reference "
           "checkpoints (tests/gpu/engine/make_reference.py) first";
    reference_ = load_reference(GetParam());
    ModelWeights weights =
        load_checkpoint_weights(reference_dir() + "/" + GetParam() + "/checkpoint");
    vocab_ = weights.config.vocab_size;
    CudaRunnerOptions options;
    options.max_model_len = 1024;
    runner_ = std::make_unique<CudaRunner>(DeviceWeights::upload(weights), options);
    runner_->allocate_kv_cache(1024, kBlockSize);
  }

  // Feeds every prompt in chunks of `chunk` tokens (all prompts batched), sampling after every
  // chunk, and compares each sampled row with the reference row of its position.
  void check_prompts(int chunk) {
    const Json& prompts = reference_.json["prompts"];
    std::vector<std::unique_ptr<TestSequence>> owned;
    for (const Json& p : prompts) {
      owned.push_back(std::make_unique<TestSequence>());
      owned.back()->tokens = p.get<std::vector<int32_t>>();
      owned.back()->blocks = blocks_.take(int(p.size()));
    }
    for (bool more = true; more;) {
      more = false;
      StepBatch batch;
      batch.return_logits = true;
      std::vector<std::pair<size_t, int>> rows;  // (prompt, position) of each sampled row
      for (size_t i = 0; i < owned.size(); ++i) {
        TestSequence& s = *owned[i];
        int n = std::min(chunk, int(s.tokens.size()) - s.computed);
        if (n == 0) continue;
        batch.sequences.push_back({std::span<const int32_t>(s.tokens.data() + s.computed, size_t(n)),
                                   s.computed, s.blocks, true, {}});
        rows.push_back({i, s.computed + n - 1});
        s.computed += n;
        more = true;
      }
      if (!more) break;
      StepResult result;
      runner_->forward(batch, result);
      for (size_t r = 0; r < rows.size(); ++r) {
        auto [prompt, position] = rows[r];
        const float* ref = reference_.logits.data() +
                           size_t(reference_.first_row[prompt] + position) * size_t(vocab_);
        compare(std::span<const float>(ref, size_t(vocab_)),
                std::span<const float>(result.logits.data() + r * size_t(vocab_), size_t(vocab_)),
                result.next_tokens[r], "prompt " + std::to_string(prompt) + " position " +
                                           std::to_string(position) + " chunk " +
                                           std::to_string(chunk));
      }
    }
  }

  void compare(std::span<const float> ref, std::span<const float> ours, int32_t sampled,
               const std::string& where) {
    testing::RowComparison c = testing::compare_rows(ref, ours);
    EXPECT_LE(c.max_abs_diff, reference_.bound) << where;
    EXPECT_EQ(sampled, c.actual_top1) << "greedy sampler != argmax at " << where;
    ++tally_.rows;
    tally_.max_abs_diff = std::max(tally_.max_abs_diff, c.max_abs_diff);
    if (c.actual_top1 == c.reference_top1) {
      ++tally_.exact_top1;
    } else {
      ++tally_.near_ties;
      EXPECT_LE(c.reference_margin, reference_.bound) << "top-1 differs beyond a near tie at "
                                                      << where;
    }
  }

  // Free-running greedy generation from a prompt, compared with transformers' tokens.
  std::string check_generation(const Json& generation) {
    int prompt_index = generation["prompt_index"].get<int>();
    std::vector<int32_t> expected = generation["tokens"].get<std::vector<int32_t>>();
    std::vector<double> margins = generation["margins"].get<std::vector<double>>();
    TestSequence s;
    s.tokens = reference_.json["prompts"][size_t(prompt_index)].get<std::vector<int32_t>>();
    const size_t prompt_length = s.tokens.size();
    s.blocks = blocks_.take(int(prompt_length + expected.size()));
    while (s.tokens.size() < prompt_length + expected.size()) {
      StepBatch batch = testing::make_step({&s}, 4096, false);
      StepResult result;
      runner_->forward(batch, result);
      testing::complete_step({&s}, batch);
      s.tokens.push_back(result.next_tokens.at(0));
    }
    for (size_t i = 0; i < expected.size(); ++i) {
      if (s.tokens[prompt_length + i] != expected[i]) {
        EXPECT_LE(margins[i], reference_.bound)
            << "generation from prompt " << prompt_index << " diverges at step " << i
            << " where transformers' margin " << margins[i] << " exceeds the bound";
        char text[160];
        std::snprintf(text, sizeof text, "%zu/%zu equal, diverges at step %zu (reference margin "
                      "%.4f, bound %.4f)", i, expected.size(), i, margins[i], reference_.bound);
        return text;
      }
    }
    return std::to_string(expected.size()) + "/" + std::to_string(expected.size()) + " equal";
  }

  Reference reference_;
  int vocab_ = 0;
  std::unique_ptr<CudaRunner> runner_;
  BlockCounter blocks_{kBlockSize};
  Tally tally_;
};

TEST_P(CudaReference, LogitsTopOneAndGreedyGenerationMatchTransformers) {
  check_prompts(1);     // one token per step: the decode graphs, every position
  check_prompts(16);    // prefill chunks
  check_prompts(4096);  // each prompt in one prefill
  std::string generations;
  for (const Json& g : reference_.json["generations"]) {
    generations += (generations.empty() ? "" : "; ") + check_generation(g);
  }
  std::printf("reference %s: %d rows, max |diff| %.4f (transformers bf16 %.4f, bound %.4f), "
              "top-1 equal %d/%d, near ties %d; greedy %s\n",
              reference_.name.c_str(), tally_.rows, tally_.max_abs_diff,
              reference_.json["hf_bf16_max_abs_diff"].get<double>(), reference_.bound,
              tally_.exact_top1, tally_.rows, tally_.near_ties, generations.c_str());
}

std::vector<std::string> checkpoint_names() {
  std::string dir = reference_dir();
  if (dir.empty()) return {"(GPUFRAC_REFERENCE_DIR unset)"};
  try {
    Json index = Json::parse(read_small_file(dir + "/index.json"));
    return index["checkpoints"].get<std::vector<std::string>>();
  } catch (const std::exception&) {
    return {"(no index.json in GPUFRAC_REFERENCE_DIR)"};
  }
}

INSTANTIATE_TEST_SUITE_P(Checkpoints, CudaReference, ::testing::ValuesIn(checkpoint_names()),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           std::string name;
                           for (char c : info.param) name += std::isalnum(c) ? c : '_';
                           return name;
                         });

}  // namespace
}  // namespace gpufrac::engine
