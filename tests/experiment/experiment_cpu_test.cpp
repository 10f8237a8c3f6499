// The whole main job on the CPU, as the README's run command does it, with a shortened sweep:
// `gpufrac experiment SPEC` brings up real nodes of `gpufrac serve --model tiny --device cpu`,
// drives them with bench through the router, writes the report; a second run resumes and
// runs nothing.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace gpufrac {
namespace {

std::string run(const std::string& command, int* status) {
  std::string output;
  FILE* pipe = ::popen((command + " 2>&1").c_str(), "r");
  char buffer[4096];
  while (size_t n = std::fread(buffer, 1, sizeof buffer, pipe)) output.append(buffer, n);
  *status = ::pclose(pipe);
  return output;
}

TEST(ExperimentCpu, ShortSweepRunsEndToEndAndResumes) {
  const char* bin = std::getenv("GPUFRAC_BIN");
  ASSERT_NE(bin, nullptr);
  std::string dir = testing::TempDir() + "/experiment_cpu";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/spec.yaml")
      << "name: ci\nmodel: tiny\ndevice: cpu\n"
         "engine_args: {max-num-seqs: 8, max-model-len: 256}\n"
         "workload: {isl: 16, osl: 4, requests: 3, warmup: 1}\n"
         "runs:\n"
         "  - {arm: dedicated, models_per_gpu: 1, concurrency: [1, 2]}\n"
         "  - {arm: timeslice, models_per_gpu: 2, concurrency: [1]}\n"
         "  - {arm: fractions, models_per_gpu: 2, concurrency: [1]}\n"
         "output: " << dir << "/results\n";
  int status = 0;
  std::string out = run(std::string(bin) + " experiment " + dir + "/spec.yaml --no-progress", &status);
  ASSERT_EQ(status, 0) << out;
  EXPECT_NE(out.find("4 point(s) to run"), std::string::npos) << out;
  EXPECT_NE(out.find("| req/GPU | base c | shared c | dedicated | timeslice | fractions |"),
            std::string::npos) << out;
  for (const char* file : {"report/report.md", "dedicated-m1/c2/summary.json",
                           "fractions-m2/c1/summary.json", "timeslice-m2/c1/summary.json"}) {
    EXPECT_TRUE(std::filesystem::exists(dir + "/results/" + file)) << file;
  }
  std::string again = run(std::string(bin) + " experiment " + dir + "/spec.yaml --no-progress", &status);
  ASSERT_EQ(status, 0) << again;
  EXPECT_NE(again.find("0 point(s) to run"), std::string::npos) << again;
}

TEST(ExperimentCpu, BadSpecIsOneLineNamingTheField) {
  const char* bin = std::getenv("GPUFRAC_BIN");
  ASSERT_NE(bin, nullptr);
  std::string spec = testing::TempDir() + "/experiment_bad.yaml";
  std::ofstream(spec) << "runs:\n  - {arm: fractions, concurrency: [1], models_per_gpu: 0}\n";
  int status = 0;
  std::string out = run(std::string(bin) + " experiment " + spec, &status);
  EXPECT_EQ(WEXITSTATUS(status), 2) << out;
  EXPECT_NE(out.find("runs[0].models_per_gpu"), std::string::npos) << out;
}

}  // namespace
}  // namespace gpufrac
