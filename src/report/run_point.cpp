#include "report/run_point.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>

#include "common/error.h"

namespace gpufrac {
namespace {

namespace fs = std::filesystem;

constexpr const char* kSchema = "gpufrac.summary/1";
constexpr const char* kSummaryName = "summary.json";

[[noreturn]] void bad_field(const std::string& path, const std::string& field,
                            const std::string& want) {
  throw UsageError(path + ": " + field + " " + want +
                   " (see docs/result-format.md; re-run gpufrac bench for this point)");
}

const Json& object_field(const Json& parent, const char* name, const std::string& path,
                         const std::string& field) {
  if (!parent.contains(name) || !parent[name].is_object())
    bad_field(path, field, "is missing or not an object");
  return parent[name];
}

std::optional<double> optional_number(const Json& parent, const char* name, const std::string& path,
                                      const std::string& field) {
  if (!parent.is_object() || !parent.contains(name) || parent[name].is_null()) return std::nullopt;
  if (!parent[name].is_number()) bad_field(path, field, "must be a number or null");
  return parent[name].get<double>();
}

int positive_int(const Json& config, const char* name, const std::string& path) {
  std::string field = std::string("config.") + name;
  if (!config.contains(name) || !config[name].is_number_integer()) {
    bad_field(path, field, "must be a positive integer");
  }
  int64_t value = config[name].get<int64_t>();
  if (value < 1 || value > 1'000'000) bad_field(path, field, "must be a positive integer");
  return int(value);
}

std::optional<double> pooled_p50(const Json& aggregate, const char* metric,
                                 const std::string& path) {
  if (!aggregate.contains("pooled") || !aggregate["pooled"].is_object()) return std::nullopt;
  const Json& pooled = aggregate["pooled"];
  if (!pooled.contains(metric) || !pooled[metric].is_object()) return std::nullopt;
  return optional_number(pooled[metric], "p50", path,
                         std::string("aggregate.pooled.") + metric + ".p50");
}

// Mean over summary.targets of targets[i].metrics.<metric>.<percentile>; missing when there are
// no targets or one lacks the value (a mean over some of the models would hide the others).
std::optional<double> mean_over_targets(const Json& summary, const char* metric,
                                        const char* percentile, const std::string& path) {
  if (!summary.contains("targets") || summary["targets"].is_null()) return std::nullopt;
  const Json& targets = summary["targets"];
  if (!targets.is_array()) bad_field(path, "targets", "must be an array");
  if (targets.empty()) return std::nullopt;
  double sum = 0;
  for (size_t i = 0; i < targets.size(); ++i) {
    std::string field = "targets[" + std::to_string(i) + "].metrics." + metric + "." + percentile;
    const Json& target = targets[i];
    if (!target.is_object() || !target.contains("metrics") || !target["metrics"].is_object())
      return std::nullopt;
    const Json& metrics = target["metrics"];
    if (!metrics.contains(metric) || !metrics[metric].is_object()) return std::nullopt;
    std::optional<double> value = optional_number(metrics[metric], percentile, path, field);
    if (!value) return std::nullopt;
    sum += *value;
  }
  return sum / double(targets.size());
}

}  // namespace

std::optional<double> RunPoint::tok_s_per_gpu() const {
  if (!output_tok_s) return std::nullopt;
  return *output_tok_s / gpus;
}

RunPoint run_point_from_summary(const Json& summary, const std::string& path) {
  if (!summary.is_object() || summary.value("schema", "") != kSchema) {
    bad_field(path, "schema", std::string("must be \"") + kSchema + "\"");
  }
  const Json& config = object_field(summary, "config", path, "config");
  const Json& aggregate = object_field(summary, "aggregate", path, "aggregate");

  RunPoint point;
  point.path = path;
  if (!config.contains("arm") || !config["arm"].is_string()) {
    bad_field(path, "config.arm", "must be \"dedicated\", \"timeslice\" or \"fractions\"");
  }
  point.arm = config["arm"].get<std::string>();
  if (point.arm != "dedicated" && point.arm != "timeslice" && point.arm != "fractions") {
    bad_field(path, "config.arm", "must be \"dedicated\", \"timeslice\" or \"fractions\"");
  }
  point.models_per_gpu = positive_int(config, "models_per_gpu", path);
  point.gpus = positive_int(config, "gpus", path);
  std::string load = config.contains("load") && config["load"].is_string()
                         ? config["load"].get<std::string>()
                         : "";
  if (load != "closed" && load != "open") bad_field(path, "config.load", "must be closed or open");
  point.closed_loop = load == "closed";
  if (point.closed_loop) {
    point.concurrency = positive_int(config, "concurrency", path);
  } else {
    point.request_rate = optional_number(config, "request_rate", path, "config.request_rate");
    if (!point.request_rate || *point.request_rate <= 0) {
      bad_field(path, "config.request_rate", "must be a positive number for an open loop");
    }
    if (config.contains("concurrency") && !config["concurrency"].is_null()) {
      point.concurrency = positive_int(config, "concurrency", path);
    }
  }

  point.output_tok_s = optional_number(aggregate, "output_token_throughput", path,
                                       "aggregate.output_token_throughput");
  point.ttft_p50_ms = optional_number(aggregate, "ttft_ms_p50", path, "aggregate.ttft_ms_p50");
  point.itl_p50_ms = optional_number(aggregate, "itl_ms_p50", path, "aggregate.itl_ms_p50");
  point.pooled_ttft_p50_ms = pooled_p50(aggregate, "ttft_ms", path);
  point.pooled_itl_p50_ms = pooled_p50(aggregate, "itl_ms", path);
  point.ttft_p90_ms = mean_over_targets(summary, "ttft_ms", "p90", path);
  point.ttft_p99_ms = mean_over_targets(summary, "ttft_ms", "p99", path);
  point.itl_p90_ms = mean_over_targets(summary, "itl_ms", "p90", path);
  point.request_throughput =
      optional_number(aggregate, "request_throughput", path, "aggregate.request_throughput");
  point.completed = optional_number(aggregate, "completed", path, "aggregate.completed");
  point.failed = optional_number(aggregate, "failed", path, "aggregate.failed");
  if (summary.contains("machine") && summary["machine"].is_object()) {
    const Json& machine = summary["machine"];
    if (machine.contains("gpu") && machine["gpu"].is_string()) {
      point.gpu_name = machine["gpu"].get<std::string>();
    }
  }
  return point;
}

RunPoint read_run_point(const std::string& summary_path) {
  std::ifstream in(summary_path);
  if (!in) throw UsageError(summary_path + ": cannot be read (check its permissions)");
  Json summary = Json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (summary.is_discarded()) {
    throw UsageError(summary_path +
                     ": is not valid JSON (a bench run cut short? re-run that point or remove it)");
  }
  return run_point_from_summary(summary, summary_path);
}

std::vector<RunPoint> find_run_points(const std::vector<std::string>& paths) {
  if (paths.empty())
    throw UsageError("give at least one RESULT_DIR (a gpufrac bench --out directory)");
  std::set<fs::path> seen;
  std::vector<RunPoint> points;
  for (const std::string& given : paths) {
    std::error_code ec;
    fs::path root(given);
    if (!fs::exists(root, ec)) throw UsageError("RESULT_DIR '" + given + "' does not exist");
    std::vector<fs::path> found;
    if (fs::is_regular_file(root, ec)) {
      found.push_back(root);
    } else {
      for (fs::recursive_directory_iterator it(root, ec), end; !ec && it != end; it.increment(ec)) {
        if (it->is_regular_file(ec) && it->path().filename() == kSummaryName) {
          found.push_back(it->path());
        }
      }
      if (ec) throw UsageError("RESULT_DIR '" + given + "' cannot be read: " + ec.message());
    }
    if (found.empty()) {
      throw UsageError("RESULT_DIR '" + given +
                       "' holds no summary.json (give the --out directory of gpufrac bench)");
    }
    std::sort(found.begin(), found.end());
    for (const fs::path& file : found) {
      if (!seen.insert(fs::weakly_canonical(file, ec)).second) continue;
      points.push_back(read_run_point(file.string()));
    }
  }
  return points;
}

}  // namespace gpufrac
