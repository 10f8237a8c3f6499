#include "bench/result_files.h"

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>

#include "common/error.h"
#include "common/strings.h"

namespace gpufrac {
namespace {

const char* const kStatsFields[] = {"mean", "p50", "p90", "p99"};

std::string number(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%.6g", value);
  return text;
}

std::string csv_field(const Json& value) {
  if (value.is_null()) return "";
  if (value.is_string()) {
    std::string s = value.get<std::string>();
    if (s.find_first_of(",\"\n") == std::string::npos) return s;
    std::string quoted = "\"";
    for (char c : s) quoted += c == '"' ? std::string("\"\"") : std::string(1, c);
    return quoted + "\"";
  }
  if (value.is_number_float()) return number(value.get<double>());
  return value.dump();
}

// AIPerf's per-metric block: unit, avg, percentiles, min, max, std, count.
Json aiperf_stats(const Stats& s, const char* unit) {
  Json j = {{"unit", unit}};
  if (s.count == 0) return j;
  j["avg"] = s.mean;
  for (size_t i = 0; i < kReportedPercentiles.size(); ++i) {
    j["p" + std::to_string(kReportedPercentiles[i])] = s.percentiles[i];
  }
  j["min"] = s.min;
  j["max"] = s.max;
  j["std"] = s.std;
  j["count"] = s.count;
  return j;
}

Json aiperf_scalar(double value, const char* unit) {
  return {{"unit", unit}, {"avg", value}};
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

void write_file(const std::filesystem::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
  out.close();
  if (!out) throw RuntimeFailure("cannot write " + path.string());
}

}  // namespace

Json summary_json(const PointResult& p) {
  Json targets = Json::array();
  for (size_t i = 0; i < p.targets.size(); ++i) {
    targets.push_back({{"model", p.targets[i].model},
                       {"url", p.targets[i].url},
                       {"metrics", target_metrics_to_json(p.target_metrics[i])}});
  }
  return {{"schema", "gpufrac.summary/1"},
          {"config", p.config},
          {"machine", p.machine},
          {"client", p.client},
          {"start_time", p.run.start_time},
          {"end_time", p.run.end_time},
          {"targets", targets},
          {"aggregate", aggregate_metrics_to_json(p.aggregate)}};
}

std::string summary_csv(const PointResult& p) {
  const char* const config_columns[] = {"arm",  "models_per_gpu", "gpus",
                                        "load", "concurrency",    "request_rate"};
  const char* const distributions[] = {"ttft_ms", "itl_ms", "request_latency_ms",
                                       "inter_chunk_gap_ms"};
  std::ostringstream out;
  for (const char* c : config_columns) out << c << ",";
  out << "target,model,url,completed,failed,duration_s,output_token_throughput,"
         "request_throughput,effective_concurrency,output_token_mismatches";
  for (const char* d : distributions) {
    for (const char* f : kStatsFields) out << "," << d << "_" << f;
  }
  out << ",output_tokens_mean,input_tokens_mean\n";

  auto row = [&](const std::string& target, const std::string& model, const std::string& url,
                 const Json& m, const Json& stats_source, const Json& p50_override) {
    for (const char* c : config_columns) out << csv_field(p.config.value(c, Json())) << ",";
    out << csv_field(target) << "," << csv_field(model) << "," << csv_field(url);
    for (const char* k :
         {"completed", "failed", "duration_s", "output_token_throughput", "request_throughput",
          "effective_concurrency", "output_token_mismatches"}) {
      out << "," << csv_field(m[k]);
    }
    for (const char* d : distributions) {
      for (const char* f : kStatsFields) {
        Json value = stats_source[d][f];
        if (std::string(f) == "p50" && p50_override.contains(d)) value = p50_override[d];
        out << "," << csv_field(value);
      }
    }
    out << "," << csv_field(stats_source["output_tokens"]["mean"]) << ","
        << csv_field(stats_source["input_tokens"]["mean"]) << "\n";
  };
  for (size_t i = 0; i < p.targets.size(); ++i) {
    Json m = target_metrics_to_json(p.target_metrics[i]);
    row(std::to_string(i), p.targets[i].model, p.targets[i].url, m, m, Json::object());
  }
  // The aggregate row: sums, pooled distributions, and the p50s of TTFT and ITL as the mean of
  // the per-target p50s (the reference study's aggregation; the pooled ones are in summary.json).
  Json a = aggregate_metrics_to_json(p.aggregate);
  row("aggregate", "", "", a, a["pooled"],
      {{"ttft_ms", a["ttft_ms_p50"]}, {"itl_ms", a["itl_ms_p50"]}});
  return out.str();
}

Json aiperf_profile_json(const PointResult& p) {
  const AggregateMetrics& a = p.aggregate;
  Json j;
  j["request_throughput"] = aiperf_scalar(a.request_throughput, "requests/sec");
  j["request_latency"] = aiperf_stats(a.request_latency_ms, "ms");
  j["time_to_first_token"] = aiperf_stats(a.ttft_ms, "ms");
  j["inter_token_latency"] = aiperf_stats(a.itl_ms, "ms");
  j["inter_chunk_latency"] = aiperf_stats(a.inter_chunk_gap_ms, "ms");
  j["output_sequence_length"] = aiperf_stats(a.output_tokens, "tokens");
  j["input_sequence_length"] = aiperf_stats(a.input_tokens, "tokens");
  j["output_token_throughput"] = aiperf_scalar(a.output_token_throughput, "tokens/sec");
  j["benchmark_duration"] = aiperf_scalar(a.duration_s, "sec");
  j["request_count"] = aiperf_scalar(double(a.completed), "requests");
  j["error_request_count"] = aiperf_scalar(double(a.failed), "requests");
  j["total_osl"] = aiperf_scalar(double(a.total_output_tokens), "tokens");
  j["total_isl"] = aiperf_scalar(double(a.total_input_tokens), "tokens");
  j["was_cancelled"] = false;
  j["start_time"] = p.run.start_time;
  j["end_time"] = p.run.end_time;

  // Errors grouped by status and HTTP code, with the first message seen for each group.
  std::map<std::pair<std::string, int>, std::pair<std::string, int64_t>> groups;
  for (const RequestRecord& r : p.run.records) {
    if (r.warmup || r.ok()) continue;
    auto& [message, count] = groups[{status_name(r.status), r.http_status}];
    if (count++ == 0) message = r.error;
  }
  Json errors = Json::array();
  for (const auto& [key, value] : groups) {
    errors.push_back({{"error_details",
                       {{"code", key.second ? Json(key.second) : Json(nullptr)},
                        {"type", key.first},
                        {"message", value.first}}},
                      {"count", value.second}});
  }
  j["error_summary"] = errors;

  Json models = Json::array(), urls = Json::array();
  for (const BenchTarget& t : p.targets) {
    models.push_back(t.model);
    urls.push_back(t.url);
  }
  const Json& c = p.config;
  j["input_config"] = {
      {"endpoint",
       {{"model_names", models},
        {"type", c.value("endpoint", "")},
        {"streaming", true},
        {"urls", urls}}},
      {"input",
       {{"random_seed", c.value("seed", Json())},
        {"prompt",
         {{"input_tokens",
           {{"mean", c.value("isl", Json())}, {"stddev", c.value("isl_stddev", Json())}}},
          {"output_tokens",
           {{"mean", c.value("osl", Json())}, {"stddev", c.value("osl_stddev", Json())}}}}}}},
      {"loadgen",
       {{"concurrency", c.value("concurrency", Json())},
        {"request_rate", c.value("request_rate", Json())},
        {"request_count", c.value("requests", Json())},
        {"warmup_request_count", c.value("warmup", Json())}}},
      {"cli_command", c.value("cli_command", "")}};
  return j;
}

void write_point_files(const std::string& dir, const PointResult& point) {
  std::filesystem::path path(dir);
  std::error_code error;
  std::filesystem::create_directories(path, error);
  if (error) throw RuntimeFailure("cannot create " + dir + ": " + error.message());
  std::string records;
  for (const RequestRecord& r : point.run.records) records += record_to_json(r).dump() + "\n";
  write_file(path / "records.jsonl", records);
  write_file(path / "summary.json", summary_json(point).dump(2) + "\n");
  write_file(path / "summary.csv", summary_csv(point));
  write_file(path / "profile_export_aiperf.json", aiperf_profile_json(point).dump(2) + "\n");
}

Json describe_machine() {
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  Json machine = {
      {"hostname", host}, {"date", utc_now_iso()}, {"gpu", nullptr}, {"driver", nullptr}};
  std::smatch match;
  std::string version = read_file("/proc/driver/nvidia/version");
  static const std::regex kDriver(R"(Kernel Module\s+(?:for\s+\S+\s+)?([0-9][0-9.]+))");
  if (std::regex_search(version, match, kDriver)) machine["driver"] = match[1].str();
  std::error_code error;
  for (const auto& gpu : std::filesystem::directory_iterator("/proc/driver/nvidia/gpus", error)) {
    std::string info = read_file((gpu.path() / "information").string());
    static const std::regex kModel(R"(Model:\s*([^\n]+))");
    if (std::regex_search(info, match, kModel)) {
      machine["gpu"] = std::string(trim(match[1].str()));
      break;
    }
  }
  return machine;
}

}  // namespace gpufrac
