// /metrics of the OpenAI server (fake runner, in-process) against the dashboards that read it:
// every series vLLM's stock Grafana dashboard queries is there, of vLLM's type, under the served
// model's model_name, with data after one request; docs/grafana/gpufrac.json queries nothing else.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include "common/json.h"
#include "common/strings.h"
#include "server_test_client.h"
#include "server_test_fixture.h"

namespace gpufrac::testing {
namespace {

// Every series that vLLM's stock Grafana dashboard queries, each as
// NAME{model_name="$model_name"}, typed from examples/observability/prometheus_grafana/grafana.json
// of the vllm-project/vllm repository (commit 4b5c627c23e6). Its panels: E2E Request Latency, Token
// Throughput, Inter Token Latency, Scheduler State, Time To First Token Latency, Cache
// Utilization, Request Prompt Length, Request Generation Length, Finish Reason, Queue Time,
// Requests Prefill and Decode Time, Max Generation Token in Sequence Group. Its model_name
// variable is label_values(model_name).
const char* const kStockDashboardSeries[] = {
    "vllm:e2e_request_latency_seconds_bucket",
    "vllm:e2e_request_latency_seconds_sum",
    "vllm:e2e_request_latency_seconds_count",
    "vllm:prompt_tokens_total",
    "vllm:generation_tokens_total",
    "vllm:inter_token_latency_seconds_bucket",
    "vllm:inter_token_latency_seconds_sum",
    "vllm:inter_token_latency_seconds_count",
    "vllm:num_requests_running",
    "vllm:num_requests_waiting",
    "vllm:time_to_first_token_seconds_bucket",
    "vllm:time_to_first_token_seconds_sum",
    "vllm:time_to_first_token_seconds_count",
    "vllm:kv_cache_usage_perc",
    "vllm:request_prompt_tokens_bucket",
    "vllm:request_generation_tokens_bucket",
    "vllm:request_success_total",  // sum by(finished_reason)
    "vllm:request_queue_time_seconds_sum",
    "vllm:request_prefill_time_seconds_sum",
    "vllm:request_decode_time_seconds_sum",
    "vllm:request_max_num_generation_tokens_sum",
};

// The metric families behind those series and their type in vLLM's exposition.
const std::map<std::string, std::string> kStockDashboardFamilies = {
    {"vllm:e2e_request_latency_seconds", "histogram"},
    {"vllm:prompt_tokens_total", "counter"},
    {"vllm:generation_tokens_total", "counter"},
    {"vllm:inter_token_latency_seconds", "histogram"},
    {"vllm:num_requests_running", "gauge"},
    {"vllm:num_requests_waiting", "gauge"},
    {"vllm:time_to_first_token_seconds", "histogram"},
    {"vllm:kv_cache_usage_perc", "gauge"},
    {"vllm:request_prompt_tokens", "histogram"},
    {"vllm:request_generation_tokens", "histogram"},
    {"vllm:request_success_total", "counter"},
    {"vllm:request_queue_time_seconds", "histogram"},
    {"vllm:request_prefill_time_seconds", "histogram"},
    {"vllm:request_decode_time_seconds", "histogram"},
    {"vllm:request_max_num_generation_tokens", "histogram"},
};

// The sample lines of `series` (its exact name, then labels).
std::vector<std::string> samples_of(const std::string& text, const std::string& series) {
  std::vector<std::string> lines;
  for (const std::string& line : split(text, '\n')) {
    if (line.rfind(series + "{", 0) == 0) lines.push_back(line);
  }
  return lines;
}

TEST(ServerMetrics, EveryQueryOfVllmsStockDashboardReturnsData) {
  ServerSetup setup;
  setup.model_name = "org/some-model";
  FakeServer server(setup);
  RawReply r = http_exchange(
      server.port(),
      http_post("/v1/completions",
                R"({"prompt":[1,2,3,4,5],"max_tokens":4,"temperature":0,"stream":true})"));
  ASSERT_EQ(r.status, 200) << r.body;
  HttpReply metrics = http_get(server.url("/metrics"));
  ASSERT_EQ(metrics.status, 200);
  const std::string& text = metrics.body;

  const std::string model_label = "model_name=\"org/some-model\"";
  for (const char* series : kStockDashboardSeries) {
    std::vector<std::string> lines = samples_of(text, series);
    EXPECT_FALSE(lines.empty()) << series << " is missing:\n" << text;
    for (const std::string& line : lines) {
      EXPECT_NE(line.find(model_label), std::string::npos) << line;
    }
  }
  for (const auto& [family, type] : kStockDashboardFamilies) {
    EXPECT_NE(text.find("# TYPE " + family + " " + type + "\n"), std::string::npos)
        << family << " should be a " << type;
  }

  // One request of 5 prompt tokens and 4 generated ones, in every panel.
  const std::string labels = "{" + model_label + ",engine=\"0\"}";
  for (const char* histogram :
       {"vllm:e2e_request_latency_seconds", "vllm:time_to_first_token_seconds",
        "vllm:request_prompt_tokens", "vllm:request_generation_tokens",
        "vllm:request_queue_time_seconds", "vllm:request_prefill_time_seconds",
        "vllm:request_decode_time_seconds", "vllm:request_max_num_generation_tokens"}) {
    EXPECT_EQ(metric_value(text, std::string(histogram) + "_count" + labels), 1) << histogram;
  }
  EXPECT_EQ(metric_value(text, "vllm:inter_token_latency_seconds_count" + labels), 3);
  EXPECT_EQ(metric_value(text, "vllm:prompt_tokens_total" + labels), 5);
  EXPECT_EQ(metric_value(text, "vllm:generation_tokens_total" + labels), 4);
  EXPECT_EQ(metric_value(text, "vllm:request_prompt_tokens_sum" + labels), 5);
  EXPECT_EQ(metric_value(text, "vllm:request_max_num_generation_tokens_sum" + labels), 4);
  EXPECT_EQ(metric_value(text, "vllm:request_success_total{" + model_label +
                                   ",engine=\"0\",finished_reason=\"length\"}"),
            1);
  EXPECT_EQ(metric_value(text, "vllm:num_requests_running" + labels), 0);
  EXPECT_EQ(metric_value(text, "vllm:kv_cache_usage_perc" + labels), 0);
}

TEST(ServerMetrics, TheShippedDashboardQueriesOnlySeriesServeExposes) {
  const char* source = std::getenv("GPUFRAC_SOURCE_DIR");
  ASSERT_NE(source, nullptr);
  std::ifstream in(std::string(source) + "/docs/grafana/gpufrac.json");
  ASSERT_TRUE(in) << "docs/grafana/gpufrac.json not found";
  std::stringstream file;
  file << in.rdbuf();
  Json dashboard = Json::parse(file.str());

  std::set<std::string> variables;
  for (const Json& v : dashboard["templating"]["list"]) variables.insert(v["name"]);
  EXPECT_TRUE(variables.count("datasource") && variables.count("model_name")) << file.str();

  FakeServer server;
  http_exchange(server.port(),
                http_post("/v1/completions", R"({"prompt":[1,2,3],"max_tokens":3,"stream":true})"));
  std::string text = http_get(server.url("/metrics")).body;
  const std::regex series(R"((vllm|gpufrac):[a-z0-9_]+)");
  int queried = 0;
  for (const Json& panel : dashboard["panels"]) {
    if (!panel.contains("targets")) continue;
    for (const Json& target : panel["targets"]) {
      std::string expr = target["expr"];
      EXPECT_NE(expr.find("model_name=~\"$model_name\""), std::string::npos) << expr;
      EXPECT_EQ(target["datasource"]["uid"], "${datasource}") << panel["title"];
      for (std::sregex_iterator m(expr.begin(), expr.end(), series), end; m != end; ++m) {
        EXPECT_FALSE(samples_of(text, m->str()).empty())
            << panel["title"] << " queries " << m->str() << ", which /metrics lacks";
        ++queried;
      }
    }
  }
  EXPECT_GT(queried, 20);
}

}  // namespace
}  // namespace gpufrac::testing
