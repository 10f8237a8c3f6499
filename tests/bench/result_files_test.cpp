// The files bench writes keep to docs/result-format.md (the contract with `gpufrac report`).
#include "bench/result_files.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "common/strings.h"

namespace gpufrac {
namespace {

constexpr int64_t kMs = 1'000'000;

RequestRecord record(int target, int64_t id, int64_t sent_ms, int64_t ttft_ms,
                     bool warmup = false) {
  RequestRecord r;
  r.target = target;
  r.model = "m" + std::to_string(target);
  r.request_id = id;
  r.warmup = warmup;
  r.http_status = 200;
  sent_ms += 1000;  // monotonic 0 means "never"
  r.scheduled_ns = sent_ms * kMs;
  r.sent_ns = sent_ms * kMs;
  for (int i = 0; i < 4; ++i) r.event_ns.push_back((sent_ms + ttft_ms + 10 * i) * kMs);
  r.first_ns = r.event_ns.front();
  r.last_ns = r.event_ns.back();
  r.end_ns = r.last_ns + kMs;
  r.input_tokens = 32;
  r.output_tokens = 4;
  r.output_tokens_from_usage = true;
  r.requested_output_tokens = 4;
  return r;
}

PointResult two_target_point() {
  PointResult p;
  p.config = {{"arm", "fractions"},
              {"models_per_gpu", 2},
              {"gpus", 1},
              {"load", "closed"},
              {"concurrency", 2},
              {"request_rate", nullptr},
              {"isl", 32},
              {"osl", 4},
              {"isl_stddev", 0},
              {"osl_stddev", 0},
              {"requests", 2},
              {"warmup", 1},
              {"endpoint", "completions"},
              {"prompt", "ids"},
              {"seed", 0},
              {"cli_command", "gpufrac bench ..."}};
  p.machine = {
      {"hostname", "h"}, {"date", "2026-11-29T10:00:00Z"}, {"gpu", nullptr}, {"driver", nullptr}};
  for (int t = 0; t < 2; ++t) {
    BenchTarget target;
    target.model = "m" + std::to_string(t);
    target.url = "http://127.0.0.1:800" + std::to_string(t);
    p.targets.push_back(target);
  }
  // Target 0: TTFT 20 and 40 (p50 30); target 1: TTFT 100 and 100. Warmups excluded.
  p.run.records = {record(0, 0, 0, 500, true), record(0, 1, 0, 20),  record(0, 2, 5, 40),
                   record(1, 0, 0, 500, true), record(1, 1, 0, 100), record(1, 2, 0, 100)};
  std::vector<std::vector<RequestRecord>> by_target(2);
  for (const RequestRecord& r : p.run.records) by_target[size_t(r.target)].push_back(r);
  for (const auto& rs : by_target) p.target_metrics.push_back(compute_target_metrics(rs));
  p.aggregate = aggregate_metrics(p.target_metrics, p.run.records);
  p.run.start_time = "2026-11-29T10:00:00Z";
  p.run.end_time = "2026-11-29T10:00:01Z";
  return p;
}

TEST(ResultFiles, RecordLineHasEveryContractField) {
  Json j = record_to_json(record(0, 17, 1, 2));
  for (const char* key :
       {"target", "model", "request_id", "warmup", "status", "http_status", "error", "scheduled_ns",
        "sent_ns", "first_ns", "last_ns", "event_ns", "input_tokens", "output_tokens",
        "output_tokens_source", "requested_input_tokens", "requested_output_tokens",
        "finish_reason", "end_ns"}) {
    EXPECT_TRUE(j.contains(key)) << key;
  }
  EXPECT_EQ(j["status"], "ok");
  EXPECT_EQ(j["output_tokens_source"], "usage");
  EXPECT_EQ(j["event_ns"].size(), 4u);
  EXPECT_TRUE(j["finish_reason"].is_null());  // none came
  RequestRecord never_sent;
  never_sent.status = RequestStatus::kConnectionError;
  never_sent.error = "refused";
  Json n = record_to_json(never_sent);
  EXPECT_TRUE(n["sent_ns"].is_null());
  EXPECT_TRUE(n["http_status"].is_null());
  EXPECT_EQ(n["status"], "connection_error");
}

TEST(ResultFiles, SummaryJsonKeepsTheContract) {
  Json s = summary_json(two_target_point());
  EXPECT_EQ(s["schema"], "gpufrac.summary/1");
  for (const char* key :
       {"arm", "models_per_gpu", "gpus", "load", "concurrency", "request_rate", "isl", "osl",
        "isl_stddev", "osl_stddev", "requests", "warmup", "endpoint", "prompt", "seed"}) {
    EXPECT_TRUE(s["config"].contains(key)) << key;
  }
  for (const char* key : {"hostname", "date", "gpu", "driver"}) {
    EXPECT_TRUE(s["machine"].contains(key)) << key;
  }
  ASSERT_EQ(s["targets"].size(), 2u);
  const Json& m = s["targets"][0]["metrics"];
  for (const char* key :
       {"ttft_ms", "itl_ms", "request_latency_ms", "inter_chunk_gap_ms", "output_tokens",
        "input_tokens", "output_token_throughput", "request_throughput", "effective_concurrency",
        "duration_s", "completed", "failed", "errors", "output_token_mismatches",
        "input_token_mismatches"}) {
    EXPECT_TRUE(m.contains(key)) << key;
  }
  EXPECT_EQ(s["targets"][1]["model"], "m1");
  EXPECT_EQ(m["completed"], 2);
  EXPECT_DOUBLE_EQ(m["ttft_ms"]["p50"].get<double>(), 30);
  const Json& a = s["aggregate"];
  EXPECT_DOUBLE_EQ(a["ttft_ms_p50"].get<double>(), 65);               // (30 + 100) / 2
  EXPECT_DOUBLE_EQ(a["pooled"]["ttft_ms"]["p50"].get<double>(), 70);  // 20 40 100 100: rank 1.5
  EXPECT_EQ(a["completed"], 4);
  EXPECT_DOUBLE_EQ(a["output_token_throughput"].get<double>(),
                   s["targets"][0]["metrics"]["output_token_throughput"].get<double>() +
                       s["targets"][1]["metrics"]["output_token_throughput"].get<double>());
}

TEST(ResultFiles, CsvHasOneRowPerTargetAndAnAggregateRow) {
  std::string csv = summary_csv(two_target_point());
  std::vector<std::string> lines = split(csv, '\n');
  ASSERT_EQ(lines.size(), 5u);  // header, 2 targets, aggregate, trailing ""
  std::vector<std::string> header = split(lines[0], ',');
  std::vector<std::string> aggregate = split(lines[3], ',');
  ASSERT_EQ(header.size(), aggregate.size());
  auto column = [&](const std::string& name) {
    return size_t(std::find(header.begin(), header.end(), name) - header.begin());
  };
  EXPECT_EQ(aggregate[column("target")], "aggregate");
  EXPECT_EQ(aggregate[column("arm")], "fractions");
  EXPECT_EQ(aggregate[column("ttft_ms_p50")], "65");
  EXPECT_EQ(split(lines[1], ',')[column("ttft_ms_p50")], "30");
  EXPECT_EQ(split(lines[2], ',')[column("model")], "m1");
  EXPECT_EQ(aggregate[column("request_rate")], "");
}

TEST(ResultFiles, AiperfLayout) {
  Json j = aiperf_profile_json(two_target_point());
  EXPECT_EQ(j["time_to_first_token"]["unit"], "ms");
  EXPECT_DOUBLE_EQ(j["time_to_first_token"]["p50"].get<double>(), 70);  // pooled
  EXPECT_TRUE(j["time_to_first_token"].contains("avg"));
  EXPECT_TRUE(j["time_to_first_token"].contains("std"));
  EXPECT_EQ(j["inter_token_latency"]["unit"], "ms");
  EXPECT_EQ(j["output_token_throughput"]["unit"], "tokens/sec");
  EXPECT_EQ(j["request_throughput"]["unit"], "requests/sec");
  EXPECT_DOUBLE_EQ(j["request_count"]["avg"].get<double>(), 4);
  EXPECT_EQ(j["benchmark_duration"]["unit"], "sec");
  EXPECT_EQ(j["input_config"]["endpoint"]["model_names"], Json({"m0", "m1"}));
  EXPECT_EQ(j["input_config"]["loadgen"]["concurrency"], 2);
  EXPECT_TRUE(j["error_summary"].is_array());
}

TEST(ResultFiles, WritesTheFourFiles) {
  std::string dir =
      std::filesystem::temp_directory_path() / ("bench-files-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  write_point_files(dir + "/fractions-m2/c2", two_target_point());
  for (const char* name :
       {"records.jsonl", "summary.json", "summary.csv", "profile_export_aiperf.json"}) {
    EXPECT_TRUE(std::filesystem::exists(dir + "/fractions-m2/c2/" + name)) << name;
  }
  std::ifstream records(dir + "/fractions-m2/c2/records.jsonl");
  int lines = 0;
  for (std::string line; std::getline(records, line);) {
    EXPECT_NO_THROW(Json::parse(line));
    ++lines;
  }
  EXPECT_EQ(lines, 6);  // warmup included, marked
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace gpufrac
