#include "bench/load_driver.h"

#include <algorithm>
#include <climits>
#include <cstdio>
#include <ctime>
#include <deque>
#include <random>

#include "bench/server_token_counter.h"
#include "bench/stream_client.h"
#include "common/clock.h"
#include "common/log.h"

namespace gpufrac {
namespace {

// One target's stream set within a phase.
struct TargetLoad {
  int index = 0;
  const BenchTarget* target = nullptr;
  WorkloadGenerator generator;
  int64_t next_request_id = 0;
  int64_t issued = 0, finished = 0, in_flight = 0;
  // Open loop.
  std::mt19937_64 arrival_rng;
  int64_t arrivals = 0;
  int64_t next_arrival_ns = 0;
  std::deque<int64_t> waiting;  // scheduled times of arrivals held back by the cap

  TargetLoad(int i, const BenchTarget& t, const WorkloadSpec& w, uint64_t point_key)
      : index(i),
        target(&t),
        generator(w, t.model, mix_seed(point_key, uint64_t(i))),
        arrival_rng(mix_seed(mix_seed(w.seed, point_key), 1000 + uint64_t(i))) {}
};

class PhaseRunner {
 public:
  PhaseRunner(StreamClient& client, std::vector<TargetLoad>& loads, const LoadPoint& point,
              bool warmup, std::vector<RequestRecord>& records)
      : client_(client),
        loads_(loads),
        point_(point),
        warmup_(warmup),
        records_(records),
        per_target_(warmup ? point.warmup : point.requests) {}

  void run(const std::function<void(const PointProgress&)>& on_progress, double interval_s) {
    const int64_t start = monotonic_ns();
    const int64_t interval_ns = int64_t(interval_s * 1e9);
    int64_t next_progress = start + interval_ns;
    for (TargetLoad& t : loads_) {
      t.issued = t.finished = t.in_flight = t.arrivals = 0;
      t.waiting.clear();
      t.next_arrival_ns = start;
      if (!point_.open_loop) {
        for (int i = 0; i < point_.concurrency && t.issued < per_target_; ++i) issue(t, start);
      }
    }
    std::vector<RequestRecord> finished;
    while (!all_finished()) {
      if (point_.open_loop) admit_arrivals(monotonic_ns());
      int64_t wake = on_progress ? next_progress : INT64_MAX;
      if (point_.open_loop) {
        for (const TargetLoad& t : loads_) {
          if (t.arrivals < per_target_) wake = std::min(wake, t.next_arrival_ns);
        }
      }
      finished.clear();
      client_.poll(wake, finished);
      for (RequestRecord& r : finished) {
        TargetLoad& t = loads_[size_t(r.target)];
        ++t.finished;
        --t.in_flight;
        if (!r.ok()) ++failed_;
        output_tokens_ += r.output_tokens;
        int64_t ended = r.end_ns;
        records_.push_back(std::move(r));
        if (!point_.open_loop && t.issued < per_target_) issue(t, ended);
      }
      if (point_.open_loop) admit_arrivals(monotonic_ns());
      int64_t now = monotonic_ns();
      if (on_progress && now >= next_progress) {
        on_progress(progress(now - start));
        next_progress = now + interval_ns;
      }
    }
    if (on_progress) on_progress(progress(monotonic_ns() - start));
  }

 private:
  bool all_finished() const {
    for (const TargetLoad& t : loads_) {
      if (t.finished < per_target_) return false;
    }
    return true;
  }

  void issue(TargetLoad& t, int64_t scheduled_ns) {
    PreparedRequest prepared = t.generator.make(t.next_request_id);
    StreamRequest request;
    request.target = t.index;
    request.model = t.target->model;
    request.request_id = t.next_request_id++;
    request.warmup = warmup_;
    request.body = std::move(prepared.body);
    request.input_tokens = prepared.input_tokens;
    request.requested_output_tokens = prepared.output_tokens;
    request.scheduled_ns = scheduled_ns;
    ++t.issued;
    ++t.in_flight;
    client_.start(std::move(request));
  }

  void admit_arrivals(int64_t now) {
    for (TargetLoad& t : loads_) {
      while (t.arrivals < per_target_ && t.next_arrival_ns <= now) {
        t.waiting.push_back(t.next_arrival_ns);
        ++t.arrivals;
        t.next_arrival_ns += next_gap_ns(t);
      }
      while (!t.waiting.empty() && (point_.concurrency <= 0 || t.in_flight < point_.concurrency)) {
        issue(t, t.waiting.front());
        t.waiting.pop_front();
      }
    }
  }

  int64_t next_gap_ns(TargetLoad& t) {
    double shape = point_.burstiness;
    std::gamma_distribution<double> gap(shape, 1.0 / (point_.request_rate * shape));
    return int64_t(gap(t.arrival_rng) * 1e9);
  }

  PointProgress progress(int64_t elapsed_ns) const {
    PointProgress p;
    p.warmup = warmup_;
    for (const TargetLoad& t : loads_) {
      p.finished += t.finished;
      p.in_flight += t.in_flight;
    }
    p.total = per_target_ * int64_t(loads_.size());
    p.failed = failed_;
    p.output_tokens = output_tokens_;
    p.elapsed_s = double(elapsed_ns) / 1e9;
    return p;
  }

  StreamClient& client_;
  std::vector<TargetLoad>& loads_;
  const LoadPoint& point_;
  bool warmup_;
  std::vector<RequestRecord>& records_;
  int64_t per_target_;
  int64_t failed_ = 0;
  int64_t output_tokens_ = 0;
};

// /tokenize calls in flight at once while text prompts are built: enough to hide the round trip,
// few enough not to crowd a server that may be serving other work.
constexpr int kTokenizeParallel = 8;

// Builds every text prompt of the point (requests 0 .. per_target-1 of each target).
void prepare_text_prompts(const std::vector<BenchTarget>& targets, std::vector<TargetLoad>& loads,
                          const WorkloadSpec& workload, int64_t per_target,
                          const std::function<void(const PointProgress&)>& on_progress,
                          double progress_interval_s) {
  const int64_t start = monotonic_ns();
  const int64_t total = per_target * int64_t(loads.size());
  log_info("building ", total, " text prompts of exactly ", workload.isl,
           workload.isl_stddev > 0 ? " (mean)" : "", " tokens with each target's POST /tokenize, ",
           kTokenizeParallel, " calls at a time");
  int64_t built_before = 0, calls = 0;
  for (size_t i = 0; i < loads.size(); ++i) {
    ServerTokenCounter counter(targets[i].url, targets[i].model, workload.endpoint,
                               targets[i].api_key);
    WorkloadGenerator& generator = loads[i].generator;
    std::vector<TextPromptSpec> specs(static_cast<size_t>(per_target));
    for (int64_t r = 0; r < per_target; ++r) {
      specs[size_t(r)] = {generator.input_length(r), generator.text_seed(r)};
    }
    std::function<void(int64_t, int64_t)> progress;
    if (on_progress) {
      progress = [&](int64_t done, int64_t) {
        PointProgress p;
        p.preparing = true;
        p.finished = built_before + done;
        p.total = total;
        p.elapsed_s = double(monotonic_ns() - start) / 1e9;
        on_progress(p);
      };
    }
    generator.set_texts(
        build_exact_texts(counter, specs, kTokenizeParallel, progress, progress_interval_s));
    built_before += per_target;
    calls += counter.calls();
  }
  char seconds[32];
  std::snprintf(seconds, sizeof seconds, "%.2f", double(monotonic_ns() - start) / 1e9);
  log_info("built ", total, " text prompts in ", seconds, " s with ", calls, " /tokenize calls");
}

}  // namespace

std::string utc_now_iso() {
  std::time_t now = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&now, &utc);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &utc);
  return text;
}

PointRun run_load_point(const std::vector<BenchTarget>& targets, const WorkloadSpec& workload,
                        const LoadPoint& point, uint64_t point_key, double request_timeout_s,
                        const std::function<void(const PointProgress&)>& on_progress,
                        double progress_interval_s) {
  std::vector<HttpUrl> endpoints;
  std::vector<std::string> api_keys;
  std::vector<TargetLoad> loads;
  loads.reserve(targets.size());
  for (size_t i = 0; i < targets.size(); ++i) {
    endpoints.push_back(targets[i].endpoint);
    api_keys.push_back(targets[i].api_key);
    loads.emplace_back(int(i), targets[i], workload, point_key);
  }
  if (workload.prompt == PromptKind::kText) {
    prepare_text_prompts(targets, loads, workload, int64_t(point.warmup) + point.requests,
                         on_progress, progress_interval_s);
  }
  StreamClient client(std::move(endpoints), request_timeout_s, api_keys);
  PointRun run;
  run.start_time = utc_now_iso();
  if (point.warmup > 0) {
    PhaseRunner(client, loads, point, true, run.records).run(on_progress, progress_interval_s);
  }
  PhaseRunner(client, loads, point, false, run.records).run(on_progress, progress_interval_s);
  run.end_time = utc_now_iso();
  std::sort(run.records.begin(), run.records.end(),
            [](const RequestRecord& a, const RequestRecord& b) {
              return a.target != b.target ? a.target < b.target : a.request_id < b.request_id;
            });
  return run;
}

}  // namespace gpufrac
