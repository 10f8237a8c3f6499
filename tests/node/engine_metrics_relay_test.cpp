// merge_engine_expositions: two engines' /metrics become one exposition, each family once, every
// sample labelled with its replica.
#include "node/engine_metrics_relay.h"

#include <gtest/gtest.h>

#include <string>

namespace gpufrac {
namespace {

std::string engine_text(int running, int le_count) {
  return "# HELP vllm:num_requests_running Requests in the running batch.\n"
         "# TYPE vllm:num_requests_running gauge\n"
         "vllm:num_requests_running{model_name=\"m\",engine=\"0\"} " + std::to_string(running) + "\n"
         "# HELP vllm:time_to_first_token_seconds TTFT.\n"
         "# TYPE vllm:time_to_first_token_seconds histogram\n"
         "vllm:time_to_first_token_seconds_bucket{model_name=\"m\",le=\"0.5\"} " +
         std::to_string(le_count) + "\n"
         "vllm:time_to_first_token_seconds_sum{model_name=\"m\"} 0.25\n"
         "vllm:time_to_first_token_seconds_count{model_name=\"m\"} " + std::to_string(le_count) +
         "\n"
         "process_up 1\n";
}

TEST(EngineMetricsRelay, EachFamilyOnceWithEveryReplicasSamples) {
  std::string merged =
      merge_engine_expositions({{"a/0", engine_text(2, 5)}, {"b/0", engine_text(1, 7)}});
  EXPECT_EQ(merged,
            "# HELP vllm:num_requests_running Requests in the running batch.\n"
            "# TYPE vllm:num_requests_running gauge\n"
            "vllm:num_requests_running{replica=\"a/0\",model_name=\"m\",engine=\"0\"} 2\n"
            "vllm:num_requests_running{replica=\"b/0\",model_name=\"m\",engine=\"0\"} 1\n"
            "# HELP vllm:time_to_first_token_seconds TTFT.\n"
            "# TYPE vllm:time_to_first_token_seconds histogram\n"
            "vllm:time_to_first_token_seconds_bucket{replica=\"a/0\",model_name=\"m\",le=\"0.5\"} 5\n"
            "vllm:time_to_first_token_seconds_sum{replica=\"a/0\",model_name=\"m\"} 0.25\n"
            "vllm:time_to_first_token_seconds_count{replica=\"a/0\",model_name=\"m\"} 5\n"
            "vllm:time_to_first_token_seconds_bucket{replica=\"b/0\",model_name=\"m\",le=\"0.5\"} 7\n"
            "vllm:time_to_first_token_seconds_sum{replica=\"b/0\",model_name=\"m\"} 0.25\n"
            "vllm:time_to_first_token_seconds_count{replica=\"b/0\",model_name=\"m\"} 7\n"
            "process_up{replica=\"a/0\"} 1\n"
            "process_up{replica=\"b/0\"} 1\n");
}

TEST(EngineMetricsRelay, EmptyLabelSetsAndNoEngines) {
  EXPECT_EQ(merge_engine_expositions({{"a/1", "up{} 1\n"}}), "up{replica=\"a/1\"} 1\n");
  EXPECT_EQ(merge_engine_expositions({}), "");
}

}  // namespace
}  // namespace gpufrac
