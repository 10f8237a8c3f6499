#include "engine/metrics.h"

#include <algorithm>
#include <charconv>
#include <cmath>

namespace gpufrac::engine {

namespace {

// vLLM's bounds (vllm/v1/metrics/loggers.py).
const std::vector<double> kFirstTokenBuckets = {0.001, 0.005, 0.01, 0.02,  0.04,  0.06,  0.08, 0.1,
                                                0.25,  0.5,   0.75, 1.0,   2.5,   5.0,   7.5,  10.0,
                                                20.0,  40.0,  80.0, 160.0, 640.0, 2560.0};
const std::vector<double> kTokenLatencyBuckets = {0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2,
                                                  0.3,  0.4,   0.5,  0.75,  1.0, 2.5,  5.0,
                                                  7.5,  10.0,  20.0, 40.0,  80.0};
const std::vector<double> kRequestLatencyBuckets = {
    0.3,  0.5,  0.8,  1.0,  1.5,   2.0,   2.5,   5.0,   10.0,   15.0,  20.0,
    30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0};

// A decode step is ~3 ms on an H200 and tens of ms on a CPU: dense from 0.5 ms to 100 ms.
const std::vector<double> kFineTokenLatencyBuckets = {
    0.0005, 0.001,  0.0015, 0.002, 0.0025, 0.003, 0.0035, 0.004, 0.005, 0.006, 0.0075,
    0.01,   0.0125, 0.015,  0.02,  0.025,  0.03,  0.04,   0.05,  0.075, 0.1,   0.15,
    0.2,    0.3,    0.5,    0.75,  1.0,    2.5,   5.0,    10.0,  80.0};

// vLLM's token-count bounds: 1, 2, 5, 10, 20, 50, ... up to max_model_len.
std::vector<double> one_two_five_buckets(int max_value) {
  std::vector<double> bounds;
  for (double decade = 1; decade <= max_value; decade *= 10) {
    for (double mantissa : {1.0, 2.0, 5.0}) {
      if (mantissa * decade <= max_value) bounds.push_back(mantissa * decade);
    }
  }
  return bounds;
}

double seconds(int64_t ns) {
  return double(ns) / 1e9;
}

// A sample value or bound as prometheus_client prints it: the shortest decimal that reads back
// as the same double, with ".0" on whole numbers ("0.005", "1.0", "2560.0", "+Inf").
std::string prometheus_float(double v) {
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  if (std::isnan(v)) return "NaN";
  char buf[400];  // the widest fixed-notation double
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::fixed);
  std::string text(buf, end);
  if (text.find('.') == std::string::npos) text += ".0";
  return text;
}

void append_header(std::string& out, std::string_view name, std::string_view type,
                   std::string_view help) {
  out.append("# HELP ").append(name).append(" ").append(help).append("\n");
  out.append("# TYPE ").append(name).append(" ").append(type).append("\n");
}

void append_sample(std::string& out, std::string_view name, std::string_view labels,
                   std::string_view value) {
  out.append(name).append("{").append(labels).append("} ").append(value).append("\n");
}

template <typename T>
void append_scalar(std::string& out, std::string_view name, std::string_view type,
                   std::string_view help, std::string_view labels, const std::atomic<T>& value) {
  append_header(out, name, type, help);
  append_sample(out, name, labels, std::to_string(value.load(std::memory_order_relaxed)));
}

// Prometheus label values escape backslash, double quote and newline.
std::string label_value(std::string_view text) {
  std::string out;
  for (char c : text) {
    if (c == '\\' || c == '"') out.push_back('\\');
    if (c == '\n') {
      out.append("\\n");
      continue;
    }
    out.push_back(c);
  }
  return out;
}

}  // namespace

Histogram::Histogram(std::vector<double> upper_bounds)
    : bounds_(std::move(upper_bounds)),
      buckets_(std::make_unique<std::atomic<uint64_t>[]>(bounds_.size() + 1)) {}

void Histogram::observe(double value) {
  // A value equal to a bound belongs to that bound's bucket (le = "less or equal").
  size_t b = std::lower_bound(bounds_.begin(), bounds_.end(), value) - bounds_.begin();
  buckets_[b].fetch_add(1, std::memory_order_relaxed);
  sum_.fetch_add(value, std::memory_order_relaxed);
  count_.fetch_add(1, std::memory_order_relaxed);
}

void Histogram::render(std::string& out, std::string_view name, std::string_view help,
                       std::string_view labels) const {
  append_header(out, name, "histogram", help);
  std::string bucket_name = std::string(name) + "_bucket";
  uint64_t cumulative = 0;
  for (size_t i = 0; i <= bounds_.size(); ++i) {
    cumulative += buckets_[i].load(std::memory_order_relaxed);
    double bound = i < bounds_.size() ? bounds_[i] : INFINITY;
    append_sample(out, bucket_name, std::string(labels) + ",le=\"" + prometheus_float(bound) + "\"",
                  std::to_string(cumulative));
  }
  append_sample(out, std::string(name) + "_sum", labels, prometheus_float(sum()));
  // _count equals the +Inf bucket in the same scrape, even while observe() runs concurrently.
  append_sample(out, std::string(name) + "_count", labels, std::to_string(cumulative));
}

EngineMetrics::EngineMetrics(EngineMetricsShape shape)
    : shape(shape),
      time_to_first_token(kFirstTokenBuckets),
      inter_token_latency(kTokenLatencyBuckets),
      e2e_request_latency(kRequestLatencyBuckets),
      request_queue_time(kRequestLatencyBuckets),
      request_prefill_time(kRequestLatencyBuckets),
      request_decode_time(kRequestLatencyBuckets),
      request_inference_time(kRequestLatencyBuckets),
      request_time_per_output_token(kTokenLatencyBuckets),
      request_prompt_tokens(one_two_five_buckets(shape.max_model_len)),
      request_generation_tokens(one_two_five_buckets(shape.max_model_len)),
      request_max_num_generation_tokens(one_two_five_buckets(shape.max_model_len)),
      request_params_max_tokens(one_two_five_buckets(shape.max_model_len)),
      fine_inter_token_latency(kFineTokenLatencyBuckets),
      fine_request_time_per_output_token(kFineTokenLatencyBuckets) {}

void EngineMetrics::observe_scheduled(RequestTimes& times, int64_t now_ns) {
  if (times.scheduled_ns == 0) times.scheduled_ns = now_ns;
}

void EngineMetrics::observe_token(RequestTimes& times, int64_t prompt_tokens, int64_t now_ns) {
  if (times.first_token_ns == 0) {
    times.first_token_ns = now_ns;
    time_to_first_token.observe(seconds(now_ns - times.arrival_ns));
    prompt_tokens_total += prompt_tokens;
  } else {
    double gap = seconds(now_ns - times.last_token_ns);
    inter_token_latency.observe(gap);
    fine_inter_token_latency.observe(gap);
  }
  times.last_token_ns = now_ns;
  ++generation_tokens_total;
}

void EngineMetrics::observe_finish(const RequestTimes& times, const FinishedRequest& request,
                                   int64_t now_ns) {
  e2e_request_latency.observe(seconds(now_ns - times.arrival_ns));
  request_prompt_tokens.observe(double(request.prompt_tokens));
  request_generation_tokens.observe(double(request.generation_tokens));
  request_max_num_generation_tokens.observe(double(request.generation_tokens));
  request_params_max_tokens.observe(double(request.max_tokens));
  // As vLLM: each interval only once the request got that far.
  if (times.scheduled_ns != 0) {
    request_queue_time.observe(seconds(times.scheduled_ns - times.arrival_ns));
  }
  if (times.scheduled_ns != 0 && times.first_token_ns != 0) {
    double decode_s = seconds(times.last_token_ns - times.first_token_ns);
    request_prefill_time.observe(seconds(times.first_token_ns - times.scheduled_ns));
    request_decode_time.observe(decode_s);
    request_inference_time.observe(seconds(times.last_token_ns - times.scheduled_ns));
    // The first token came from the prefill: it is not a decode step.
    double per_token =
        request.generation_tokens > 1 ? decode_s / double(request.generation_tokens - 1) : 0;
    request_time_per_output_token.observe(per_token);
    fine_request_time_per_output_token.observe(per_token);
  }
  switch (request.reason) {
    case FinishReason::kStop:
      ++requests_finished_stop;
      break;
    case FinishReason::kLength:
      ++requests_finished_length;
      break;
    case FinishReason::kCancelled:
      ++requests_finished_abort;
      break;
    case FinishReason::kError:
      ++requests_finished_error;
      break;
    case FinishReason::kNone:
      break;
  }
}

std::string EngineMetrics::render_prometheus(std::string_view model_name) const {
  // One engine per process: vLLM's engine index is always 0.
  const std::string labels = "model_name=\"" + label_value(model_name) + "\",engine=\"0\"";
  std::string out;
  out.reserve(32768);

  append_scalar(out, "vllm:num_requests_running", "gauge",
                "Requests in the running batch (prefilling or decoding).", labels,
                num_requests_running);
  append_scalar(out, "vllm:num_requests_waiting", "gauge",
                "Requests waiting for a sequence slot or KV blocks (preempted ones included).",
                labels, num_requests_waiting);
  int64_t used = kv_cache_blocks_used.load(std::memory_order_relaxed);
  double usage = shape.num_kv_blocks > 0 ? double(used) / double(shape.num_kv_blocks) : 0.0;
  append_header(out, "vllm:kv_cache_usage_perc", "gauge",
                "Fraction of the KV cache blocks held by requests (1 = full).");
  append_sample(out, "vllm:kv_cache_usage_perc", labels, prometheus_float(usage));
  append_header(out, "vllm:cache_config_info", "gauge",
                "The KV cache's configuration, in the labels (value always 1).");
  append_sample(out, "vllm:cache_config_info",
                labels + ",block_size=\"" + std::to_string(shape.block_size) +
                    "\",num_gpu_blocks=\"" + std::to_string(shape.num_kv_blocks) + "\"",
                "1");
  append_scalar(out, "vllm:num_preemptions_total", "counter",
                "Preemptions by recompute (a running request's KV blocks freed to make room).",
                labels, num_preemptions_total);
  append_scalar(out, "vllm:prompt_tokens_total", "counter",
                "Prompt tokens of requests that got their first token.", labels,
                prompt_tokens_total);
  append_scalar(out, "vllm:generation_tokens_total", "counter", "Generated tokens.", labels,
                generation_tokens_total);
  append_header(out, "vllm:request_success_total", "counter",
                "Finished requests, by finish reason.");
  const std::pair<FinishReason, const std::atomic<uint64_t>*> reasons[] = {
      {FinishReason::kStop, &requests_finished_stop},
      {FinishReason::kLength, &requests_finished_length},
      {FinishReason::kCancelled, &requests_finished_abort},
      {FinishReason::kError, &requests_finished_error}};
  for (const auto& [reason, counter] : reasons) {
    append_sample(out, "vllm:request_success_total",
                  labels + ",finished_reason=\"" + std::string(finish_reason_name(reason)) + "\"",
                  std::to_string(counter->load(std::memory_order_relaxed)));
  }

  time_to_first_token.render(out, "vllm:time_to_first_token_seconds",
                             "Time from arrival to the first generated token.", labels);
  inter_token_latency.render(out, "vllm:inter_token_latency_seconds",
                             "Time between consecutive generated tokens of a request.", labels);
  e2e_request_latency.render(out, "vllm:e2e_request_latency_seconds",
                             "Time from arrival to finish.", labels);
  request_queue_time.render(out, "vllm:request_queue_time_seconds",
                            "Time from arrival to the first step that fed the request.", labels);
  request_prefill_time.render(out, "vllm:request_prefill_time_seconds",
                              "Time from the first step that fed the request to its first token.",
                              labels);
  request_decode_time.render(out, "vllm:request_decode_time_seconds",
                             "Time from the first to the last generated token.", labels);
  request_inference_time.render(out, "vllm:request_inference_time_seconds",
                                "Time from the first step that fed the request to its last token.",
                                labels);
  request_time_per_output_token.render(
      out, "vllm:request_time_per_output_token_seconds",
      "A request's decode time over its generated tokens after the first.", labels);
  request_prompt_tokens.render(out, "vllm:request_prompt_tokens", "Prompt tokens per request.",
                               labels);
  request_generation_tokens.render(out, "vllm:request_generation_tokens",
                                   "Generated tokens per request.", labels);
  request_max_num_generation_tokens.render(out, "vllm:request_max_num_generation_tokens",
                                           "Generated tokens per request (one sequence each).",
                                           labels);
  request_params_max_tokens.render(out, "vllm:request_params_max_tokens",
                                   "The max_tokens of each request.", labels);

  append_scalar(out, "gpufrac:kv_cache_blocks_used", "gauge", "KV cache blocks held by requests.",
                labels, kv_cache_blocks_used);
  append_header(out, "gpufrac:kv_cache_blocks_capacity", "gauge", "KV cache blocks in the pool.");
  append_sample(out, "gpufrac:kv_cache_blocks_capacity", labels,
                std::to_string(shape.num_kv_blocks));
  append_header(out, "gpufrac:kv_cache_mapped_bytes", "gauge",
                "Bytes of KV cache memory the engine holds (an elastic pool maps it on demand).");
  append_sample(out, "gpufrac:kv_cache_mapped_bytes", labels,
                std::to_string(uint64_t(kv_cache_blocks_backed.load(std::memory_order_relaxed)) *
                               shape.kv_block_bytes));
  append_header(out, "gpufrac:kv_cache_used_bytes", "gauge",
                "Bytes of KV cache memory in blocks held by requests.");
  append_sample(out, "gpufrac:kv_cache_used_bytes", labels,
                std::to_string(uint64_t(kv_cache_blocks_used.load(std::memory_order_relaxed)) *
                               shape.kv_block_bytes));
  append_scalar(out, "gpufrac:kv_cache_backing_refusals_total", "counter",
                "Times an elastic KV pool asked the device for memory and got less (or found "
                "another engine on its --kv-map-lock mapping).", labels,
                kv_backing_refusals_total);
  append_scalar(out, "gpufrac:num_requests_rejected_total", "counter",
                "Requests turned away because the waiting queue was full (HTTP 429).", labels,
                requests_rejected_total);
  fine_inter_token_latency.render(out, "gpufrac:inter_token_latency_seconds",
                                  "vllm:inter_token_latency_seconds with buckets from 0.5 ms.",
                                  labels);
  fine_request_time_per_output_token.render(
      out, "gpufrac:request_time_per_output_token_seconds",
      "vllm:request_time_per_output_token_seconds with buckets from 0.5 ms.", labels);
  return out;
}

}  // namespace gpufrac::engine
