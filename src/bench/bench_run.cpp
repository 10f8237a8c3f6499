#include "bench/bench_run.h"

#include <sys/resource.h>

#include <cmath>
#include <cstdio>

#include "bench/metrics.h"
#include "bench/stream_client.h"
#include "common/log.h"
#include "common/run_label.h"

namespace gpufrac {
namespace {

std::string rate_text(double rate) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", rate);
  return text;
}

std::string point_label(const BenchConfig& config, int concurrency, double rate) {
  return config.open_loop ? "r" + rate_text(rate) : "c" + std::to_string(concurrency);
}

double thread_cpu_seconds() {
  rusage usage{};
  ::getrusage(RUSAGE_THREAD, &usage);
  return double(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
         double(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6;
}

Json point_config(const BenchConfig& c, int concurrency, double rate, int requests, int warmup) {
  Json j;
  j["arm"] = c.arm;
  j["models_per_gpu"] = c.models_per_gpu;
  j["gpus"] = c.gpus;
  j["load"] = c.open_loop ? "open" : "closed";
  j["concurrency"] = c.open_loop ? (c.concurrency_cap > 0 ? Json(c.concurrency_cap) : Json(nullptr))
                                 : Json(concurrency);
  j["request_rate"] = c.open_loop ? Json(rate) : Json(nullptr);
  j["burstiness"] = c.open_loop ? Json(c.burstiness) : Json(nullptr);
  j["isl"] = c.workload.isl;
  j["osl"] = c.workload.osl;
  j["isl_stddev"] = c.workload.isl_stddev;
  j["osl_stddev"] = c.workload.osl_stddev;
  j["requests"] = requests;
  j["warmup"] = warmup;
  j["endpoint"] = endpoint_name(c.workload.endpoint);
  j["prompt"] = prompt_kind_name(c.workload.prompt);
  j["seed"] = c.workload.seed;
  j["vocab_size"] = c.workload.vocab_size;
  j["request_timeout_s"] = c.request_timeout_s;
  j["cli_command"] = c.cli_command;
  return j;
}

// "[c4] measured  37/80 · 8 in flight · 0 failed · 1234 tok/s · 3.2 s", redrawn in place.
void draw_progress(const std::string& label, const PointProgress& p) {
  char line[200];
  if (p.preparing) {  // its own line once done: log lines about the prompts follow
    std::snprintf(line, sizeof line, "\r[%s] prompts  %lld/%lld built, %.1f s\033[K%s",
                  label.c_str(), (long long)p.finished, (long long)p.total, p.elapsed_s,
                  p.finished == p.total ? "\n" : "");
    std::fputs(line, stderr);
    std::fflush(stderr);
    return;
  }
  std::snprintf(line, sizeof line,
                "\r[%s] %s %lld/%lld done, %lld in flight, %lld failed, %.0f tok/s, %.1f s\033[K",
                label.c_str(), p.warmup ? "warmup  " : "measured", (long long)p.finished,
                (long long)p.total, (long long)p.in_flight, (long long)p.failed,
                p.elapsed_s > 0 ? double(p.output_tokens) / p.elapsed_s : 0.0, p.elapsed_s);
  std::fputs(line, stderr);
  std::fflush(stderr);
}

std::string fixed(double value, int decimals) {
  char text[32];
  std::snprintf(text, sizeof text, "%.*f", decimals, value);
  return text;
}

}  // namespace

int default_requests(const BenchConfig& config, int concurrency, double rate) {
  if (config.requests) return *config.requests;
  if (config.open_loop) return std::max(40, int(std::ceil(60 * rate)));
  return std::max(40, 10 * concurrency);
}

int default_warmup(const BenchConfig& config, int concurrency, double rate) {
  if (config.warmup) return *config.warmup;
  if (config.open_loop) return 0;
  return std::min(16, 2 * concurrency);
}

std::string point_directory(const BenchConfig& config, int concurrency, double rate) {
  return config.out_dir + "/" + run_label(config.arm, config.models_per_gpu) + "/" +
         point_label(config, concurrency, rate);
}

std::vector<PointResult> run_bench(const BenchConfig& config, std::ostream& table) {
  raise_open_file_limit();
  std::vector<std::pair<int, double>> points;  // (concurrency, rate)
  if (config.open_loop) {
    for (double rate : config.request_rates) points.emplace_back(config.concurrency_cap, rate);
  } else {
    for (int c : config.concurrencies) points.emplace_back(c, 0.0);
  }
  std::vector<PointResult> results;
  for (size_t i = 0; i < points.size(); ++i) {
    auto [concurrency, rate] = points[i];
    LoadPoint load;
    load.open_loop = config.open_loop;
    load.concurrency = concurrency;
    load.request_rate = rate;
    load.burstiness = config.burstiness;
    load.requests = default_requests(config, concurrency, rate);
    load.warmup = default_warmup(config, concurrency, rate);
    std::string label = point_label(config, concurrency, rate);
    std::string dir = point_directory(config, concurrency, rate);

    PointResult result;
    result.directory = dir;
    result.config = point_config(config, concurrency, rate, load.requests, load.warmup);
    result.machine = describe_machine();
    result.targets = config.targets;
    double cpu_before = thread_cpu_seconds();
    std::function<void(const PointProgress&)> progress;
    if (config.progress || config.cancel) {
      progress = [&config, &label](const PointProgress& p) {
        if (config.cancel && config.cancel()) throw BenchCancelled();
        if (config.progress) draw_progress(label, p);
      };
    }
    // Each point gets its own prompts and arrivals: a server's prefix cache can't carry over.
    uint64_t point_key = uint64_t(i) * 1'000'003 + uint64_t(concurrency) * 7919 +
                         uint64_t(std::llround(rate * 1000));
    result.run = run_load_point(config.targets, config.workload, load, point_key,
                                config.request_timeout_s, progress);
    if (config.progress) std::fputs("\n", stderr);
    double cpu_s = thread_cpu_seconds() - cpu_before;

    std::vector<std::vector<RequestRecord>> per_target(config.targets.size());
    for (const RequestRecord& r : result.run.records) per_target[size_t(r.target)].push_back(r);
    for (const auto& records : per_target) {
      result.target_metrics.push_back(compute_target_metrics(records));
    }
    result.aggregate = aggregate_metrics(result.target_metrics, result.run.records);
    int64_t streamed_tokens = 0;  // warmup included: the client did that work too
    for (const RequestRecord& r : result.run.records) streamed_tokens += r.output_tokens;
    result.client = {
        {"cpu_s", cpu_s},
        {"streamed_tokens", streamed_tokens},
        {"cpu_us_per_token",
         streamed_tokens ? Json(cpu_s * 1e6 / double(streamed_tokens)) : Json(nullptr)}};
    write_point_files(dir, result);
    if (result.aggregate.failed > 0) {
      log_warn(label, ": ", result.aggregate.failed, " of ",
               result.aggregate.failed + result.aggregate.completed,
               " measured requests failed (see ", dir, "/records.jsonl)");
    }
    if (result.aggregate.output_token_mismatches > 0) {
      log_warn(label, ": ", result.aggregate.output_token_mismatches,
               " requests returned a different number of tokens than the ", config.workload.osl,
               " asked for (output_token_mismatches)");
    }
    if (result.aggregate.input_token_mismatches > 0) {
      log_warn(label, ": the server counted ", result.aggregate.input_token_mismatches,
               " prompts (usage.prompt_tokens) differently from the length bench built them to "
               "(input_token_mismatches)");
    }
    results.push_back(std::move(result));
  }
  table << summary_table(results);
  return results;
}

std::string summary_table(const std::vector<PointResult>& points) {
  std::vector<std::string> header = {"point",   "target",  "model",     "ok",
                                     "failed",  "tok/s",   "req/s",     "TTFT p50",
                                     "ITL p50", "gap p50", "eff. conc", "len mismatch"};
  std::vector<std::vector<std::string>> rows;
  auto ms = [](const Stats& s) { return s.count ? fixed(s.p50(), 2) : std::string("-"); };
  for (const PointResult& p : points) {
    std::string label = p.config["load"] == "open"
                            ? "r" + rate_text(p.config["request_rate"].get<double>())
                            : "c" + std::to_string(p.config["concurrency"].get<int>());
    for (size_t i = 0; i < p.targets.size(); ++i) {
      const TargetMetrics& m = p.target_metrics[i];
      rows.push_back({label, std::to_string(i), p.targets[i].model, std::to_string(m.completed),
                      std::to_string(m.failed), fixed(m.output_token_throughput, 1),
                      fixed(m.request_throughput, 2), ms(m.ttft_ms), ms(m.itl_ms),
                      ms(m.inter_chunk_gap_ms), fixed(m.effective_concurrency, 2),
                      std::to_string(m.output_token_mismatches)});
    }
    if (p.targets.size() > 1) {
      const AggregateMetrics& a = p.aggregate;
      rows.push_back(
          {label, "all", "(p50: mean of targets)", std::to_string(a.completed),
           std::to_string(a.failed), fixed(a.output_token_throughput, 1),
           fixed(a.request_throughput, 2), a.ttft_ms.count ? fixed(a.ttft_ms_p50, 2) : "-",
           a.itl_ms.count ? fixed(a.itl_ms_p50, 2) : "-", ms(a.inter_chunk_gap_ms),
           fixed(a.effective_concurrency, 2), std::to_string(a.output_token_mismatches)});
    }
  }
  std::vector<size_t> width(header.size());
  for (size_t c = 0; c < header.size(); ++c) {
    width[c] = header[c].size();
    for (const auto& row : rows) width[c] = std::max(width[c], row[c].size());
  }
  std::string out;
  auto emit = [&](const std::vector<std::string>& cells) {
    for (size_t c = 0; c < cells.size(); ++c) {
      std::string pad(width[c] - cells[c].size(), ' ');
      out += c < 3 ? cells[c] + pad : pad + cells[c];  // text left, numbers right
      out += c + 1 < cells.size() ? "  " : "\n";
    }
  };
  emit(header);
  for (const auto& row : rows) emit(row);
  out +=
      "(times in ms; TTFT/ITL p50 per request as docs/benchmark-metrics.md defines them; gap = "
      "inter-chunk gap)\n";
  return out;
}

}  // namespace gpufrac
