#include "experiment/experiment_spec.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/error.h"

namespace gpufrac {
namespace {

std::string error_of(const std::string& yaml) {
  try {
    parse_experiment_spec(yaml, "spec.yaml");
  } catch (const UsageError& e) {
    return e.what();
  }
  return "";
}

// The specs shipped in experiments/ stay valid as the spec format changes.
TEST(ExperimentSpec, ShippedSpecsParse) {
  const char* source = std::getenv("GPUFRAC_SOURCE_DIR");
  ASSERT_NE(source, nullptr) << "GPUFRAC_SOURCE_DIR is set by ctest";
  int parsed = 0;
  for (const auto& entry :
       std::filesystem::directory_iterator(std::string(source) + "/experiments")) {
    if (entry.path().extension() != ".yaml") continue;
    std::ifstream file(entry.path());
    std::stringstream text;
    text << file.rdbuf();
    EXPECT_NO_THROW(parse_experiment_spec(text.str(), entry.path().string())) << entry.path();
    ++parsed;
  }
  EXPECT_GE(parsed, 2);
}

TEST(ExperimentSpec, EmbeddedDefaultsParse) {
  ExperimentSpec gpu = parse_experiment_spec(default_experiment_yaml(true), "embedded:gpu");
  EXPECT_EQ(gpu.model, "qwen3-4b");
  EXPECT_EQ(gpu.isl, 2048);
  EXPECT_EQ(gpu.osl, 256);
  ASSERT_EQ(gpu.runs.size(), 4u);
  EXPECT_EQ(gpu.runs[0].arm, "dedicated");
  EXPECT_EQ(gpu.runs[2].concurrency, (std::vector<int>{1, 2, 4, 8, 16, 32}));
  EXPECT_EQ(gpu.runs[3].models_per_gpu, (std::vector<int>{4, 8}));
  ASSERT_TRUE(gpu.packing_search.has_value());
  EXPECT_DOUBLE_EQ(gpu.packing_search->rate, 0.1);
  EXPECT_FALSE(gpu.requests.has_value());  // auto: the study's max(40, 10c)

  ExperimentSpec cpu = parse_experiment_spec(default_experiment_yaml(false), "embedded:cpu");
  EXPECT_EQ(cpu.model, "tiny");
  EXPECT_EQ(cpu.device, "cpu");
  EXPECT_EQ(cpu.requests, 32);
}

TEST(ExperimentSpec, MinimalSpecGetsDefaults) {
  ExperimentSpec spec =
      parse_experiment_spec("runs:\n  - {arm: fractions, concurrency: 1}\n", "spec.yaml");
  EXPECT_EQ(spec.runs[0].models_per_gpu, std::vector<int>{2});
  EXPECT_EQ(spec.runs[0].concurrency, std::vector<int>{1});
  EXPECT_FALSE(spec.packing_search.has_value());
  EXPECT_DOUBLE_EQ(spec.price_per_node_hour, 1.0);
}

TEST(ExperimentSpec, ErrorsNameFileLineAndField) {
  EXPECT_NE(error_of("runs: []\n").find("runs"), std::string::npos);
  std::string unknown = error_of("modle: tiny\nruns:\n  - {arm: fractions, concurrency: 1}\n");
  EXPECT_NE(unknown.find("spec.yaml:1: modle: unknown field"), std::string::npos) << unknown;
  std::string arm = error_of("runs:\n  - {arm: mig, concurrency: 1}\n");
  EXPECT_NE(arm.find("runs[0].arm"), std::string::npos) << arm;
  std::string both = error_of("runs:\n  - {arm: fractions, concurrency: 1, rates: 0.1}\n");
  EXPECT_NE(both.find("not both"), std::string::npos) << both;
  std::string dedicated =
      error_of("runs:\n  - {arm: dedicated, models_per_gpu: 2, concurrency: 1}\n");
  EXPECT_NE(dedicated.find("runs[0].models_per_gpu"), std::string::npos) << dedicated;
  std::string zero = error_of("runs:\n  - {arm: fractions, concurrency: [1, 0]}\n");
  EXPECT_NE(zero.find("runs[0].concurrency[1]"), std::string::npos) << zero;
  std::string yaml = error_of("runs: [\n");
  EXPECT_NE(yaml.find("not valid YAML"), std::string::npos) << yaml;
}

}  // namespace
}  // namespace gpufrac
