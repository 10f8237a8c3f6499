#include "bench/bench_command.h"

#include <unistd.h>

#include <cstdlib>
#include <iostream>

#include "common/api_key.h"
#include "common/cli_args.h"
#include "common/error.h"
#include "common/http_client.h"
#include "common/json.h"
#include "common/strings.h"

namespace gpufrac {
namespace {

constexpr const char* kExamples =
    R"(  One model, the reference study's sweep (c = 1..32, ISL 2048, OSL 256, token-id prompts):
    gpufrac bench --target http://127.0.0.1:8001=qwen3-4b --out results

  Two models on one GPU, driven at once, labelled for `gpufrac report`:
    gpufrac bench --target http://127.0.0.1:8001=m0 --target http://127.0.0.1:8002=m1 \
        --arm fractions --models-per-gpu 2 --gpus 1 --concurrency 1,2,4,8 --out results
    -> results/fractions-m2/c1/ ... c8/, each with records.jsonl, summary.json, summary.csv,
       profile_export_aiperf.json

  Open loop: Poisson arrivals at 0.5 and 1 request/s per model, at most 8 in flight each:
    gpufrac bench --target http://127.0.0.1:8001 --request-rate 0.5,1 --concurrency 8

  Bursty arrivals (gamma, shape 0.5), chat with text prompts of 512 +- 64 tokens (exact per request):
    gpufrac bench --target http://10.0.0.5:8000/v1=Qwen/Qwen3-4B --endpoint chat \
        --isl 512 --isl-stddev 64 --osl 128 --request-rate 2 --burstiness 0.5

  A quick check against a local server, 8 requests at c=2 after 2 warmup requests:
    gpufrac bench --target http://127.0.0.1:8001 --concurrency 2 --requests 8 --warmup 2 --osl 32)";

constexpr const char* kTextPrompts =
    R"(  --endpoint chat sends one user message of text whose token count, as the server counts it
  WITH its chat template and generation prompt, is exactly the ISL drawn for that request. Before
  each run point bench builds every request's prompt (warmup included) from seeded common English
  words: it counts a candidate with the target's POST URL/tokenize ({"model", "messages": [...],
  "add_generation_prompt": true}, as vLLM and gpufrac serve define it), searches the word count,
  tops the text up with pieces the server counts as one token each, and checks the result. Eight
  calls are in flight at a time, a progress line shows meanwhile, and none runs during the
  measurement. A server without /tokenize (HTTP 404) is a one-line error that names the fix.
    gpufrac bench --target http://127.0.0.1:8001=tiny --endpoint chat --isl 512 --isl-stddev 64 \
        --osl 64 --concurrency 1,4 --out results
    -> every line of results/dedicated-m1/c1/records.jsonl has input_tokens (the server's
       usage.prompt_tokens) = requested_input_tokens; summary.json counts any difference as
       input_token_mismatches. Records carry the stream's finish_reason.
  --endpoint completions --prompt text sends such texts as the /v1/completions prompt string,
  counted with {"model", "prompt"} (special tokens such as a BOS included, as the server adds them).
  Texts of different requests differ from their first words on; a chat template's fixed head (a
  system header, say) is the same in every request, as for any chat client.)";

constexpr const char* kMetrics =
    R"(  As AIPerf (and docs/benchmark-metrics.md) define them, from raw timestamps kept
  per request (records.jsonl); every read is stamped with CLOCK_MONOTONIC before parsing and an
  SSE message gets the time its first byte arrived.
    TTFT            first content event - request sent
    request latency last content event - request sent
    ITL             (latency - TTFT) / (output tokens - 1), per request (vLLM's TPOT)
    gap             every gap between consecutive content events, pooled (vLLM's "ITL")
    output tokens   usage.completion_tokens (events counted only when the server gives no
                    usage); lengths different from --osl are counted as mismatches
    tok/s, req/s    completed work / (last response end - first request sent), warmup excluded
    eff. conc       time-weighted mean of requests in flight over that window
  Percentiles interpolate linearly (numpy's default). With several targets the aggregate sums
  tok/s and req/s and takes the mean of the per-target p50s (the reference study's way); the
  pooled distributions are in summary.json too.)";

PromptKind parse_prompt_kind(const CliArgs& args, Endpoint endpoint) {
  if (!args.given("prompt")) {
    return endpoint == Endpoint::kChat ? PromptKind::kText : PromptKind::kTokenIds;
  }
  std::string text = args.get("prompt");
  if (text == "text") return PromptKind::kText;
  if (text != "ids") throw UsageError("--prompt: '" + text + "' is not one of ids, text");
  if (endpoint == Endpoint::kChat) {
    throw UsageError(
        "--prompt ids needs --endpoint completions: chat messages are text "
        "(--prompt text, the default for chat)");
  }
  return PromptKind::kTokenIds;
}

Endpoint parse_endpoint(const std::string& text) {
  if (text == "completions") return Endpoint::kCompletions;
  if (text == "chat") return Endpoint::kChat;
  throw UsageError("--endpoint: '" + text + "' is not one of completions, chat");
}

int positive(const CliArgs& args, const std::string& name, int minimum = 1) {
  int64_t value = parse_int(args.get(name), "--" + name);
  if (value < minimum) {
    throw UsageError("--" + name + " must be >= " + std::to_string(minimum) + " (got " +
                     std::to_string(value) + ")");
  }
  return int(value);
}

double non_negative(const CliArgs& args, const std::string& name) {
  double value = parse_double(args.get(name), "--" + name);
  if (value < 0) throw UsageError("--" + name + " must be >= 0");
  return value;
}

// The command as the result files record it, with the value of --api-key left out.
std::string command_line(int argc, char** argv) {
  std::string text = "gpufrac";
  bool key_next = false;
  for (int i = 0; i < argc; ++i) {
    std::string arg = argv[i];
    if (key_next || arg.starts_with("--api-key=")) arg = key_next ? "..." : "--api-key=...";
    key_next = arg == "--api-key";
    bool plain = arg.find_first_of(" \t\"'$\\") == std::string::npos && !arg.empty();
    text += " " + (plain ? arg : "'" + arg + "'");
  }
  return text;
}

}  // namespace

BenchTarget parse_target(const std::string& text, Endpoint endpoint) {
  BenchTarget target;
  std::string url = text;
  if (size_t eq = text.rfind('='); eq != std::string::npos && text.find('?') == std::string::npos) {
    url = text.substr(0, eq);
    target.model = text.substr(eq + 1);
    if (target.model.empty()) {
      throw UsageError("--target " + text +
                       ": the model after '=' is empty (URL=MODEL, or omit '=')");
    }
  }
  target.endpoint = parse_http_url(url, "--target");
  std::string& path = target.endpoint.path;
  while (!path.empty() && path.back() == '/') path.pop_back();
  if (path.size() >= 3 && path.compare(path.size() - 3, 3, "/v1") == 0)
    path.resize(path.size() - 3);
  target.url = "http://" + target.endpoint.host + ":" + std::to_string(target.endpoint.port) + path;
  path += endpoint_path(endpoint);
  return target;
}

void resolve_model(BenchTarget& target) {
  if (!target.model.empty()) return;
  std::string url = target.url + "/v1/models";
  std::vector<std::string> headers;
  if (!target.api_key.empty()) headers.push_back("Authorization: Bearer " + target.api_key);
  HttpReply reply = http_get(url, 10, headers);
  if (!reply.ok()) {
    throw RuntimeFailure("--target " + target.url + " has no model name and GET " + url +
                         " failed (" +
                         (reply.status ? "HTTP " + std::to_string(reply.status) : reply.error) +
                         "): give it as --target " + target.url + "=MODEL");
  }
  Json list = Json::parse(reply.body, nullptr, false);
  std::vector<std::string> ids;
  if (list.is_object() && list.contains("data") && list["data"].is_array()) {
    for (const Json& m : list["data"]) {
      if (m.is_object() && m.contains("id") && m["id"].is_string()) ids.push_back(m["id"]);
    }
  }
  if (ids.size() != 1) {
    std::string names;
    for (const std::string& id : ids) names += (names.empty() ? "" : ", ") + id;
    throw UsageError("--target " + target.url + " serves " + std::to_string(ids.size()) +
                     " models (" + names + "): name one as --target " + target.url + "=MODEL");
  }
  target.model = ids[0];
}

int bench_command(int argc, char** argv) {
  CliArgs args("gpufrac bench --target URL[=MODEL] [--target ...] [OPTIONS]",
               "Load generator for OpenAI-compatible endpoints. Streams requests of a fixed input "
               "and output length\nto one or more models at once (closed-loop concurrency sweeps "
               "or open-loop rates), measures\nTTFT, ITL, throughput and effective concurrency the "
               "way AIPerf does, and writes one result\ndirectory per run point for `gpufrac "
               "report`. A summary table goes to stdout at the end.");
  args.option("target", "URL[=MODEL]",
              "An endpoint to drive, e.g. http://127.0.0.1:8001=m0 (a trailing /v1 is fine). "
              "Without =MODEL the model is the only one GET URL/v1/models lists. Every target "
              "is driven at the same time, each with its own stream set at the full concurrency "
              "(concurrency is per model, as in the reference study).",
              std::nullopt, true)
      .option("api-key", "KEY",
              "Sent to every target as 'Authorization: Bearer KEY' (a server started with "
              "--api-key, a node with api_keys). Default: $OPENAI_API_KEY, which keeps it off the "
              "command line; the result files never record it.")
      .option("endpoint", "completions|chat",
              "completions: POST /v1/completions (token-id prompts by default). chat: POST "
              "/v1/chat/completions with one user message of text of exactly ISL tokens, chat "
              "template included (see Text prompts).",
              "completions")
      .option("prompt", "ids|text",
              "ids: an array of token ids (exact ISL without a tokenizer; completions only). "
              "text: common English words built to exactly ISL tokens with the server's POST "
              "/tokenize before each run point [default: ids for completions, text for chat].")
      .option("isl", "TOKENS", "Input length per request (mean when --isl-stddev > 0).", "2048")
      .option("osl", "TOKENS",
              "Output length per request: max_tokens = min_tokens = OSL with ignore_eos.", "256")
      .option("isl-stddev", "TOKENS",
              "Standard deviation of the input length: each request draws its own from a normal "
              "distribution, rounded, at least 1.",
              "0")
      .option("osl-stddev", "TOKENS",
              "Standard deviation of the output length, drawn the same way per request.", "0")
      .option("vocab-size", "N",
              "Prompt token ids are drawn from [0, N): use the model's count of ordinary "
              "(non-special) tokens. The default is Qwen3's. Unused by text prompts.",
              "151643")
      .option("seed", "N",
              "Seed of prompts, lengths and arrivals. Prompts differ per request, per target "
              "and per run point, so no prefix cache serves one request from another.",
              "0")
      .option("concurrency", "LIST",
              "Closed loop: requests in flight per target, one run point each (the reference "
              "study's sweep by default). With --request-rate: one number, a cap on requests in "
              "flight per target (default: none).",
              "1,2,4,8,16,32")
      .option("requests", "N",
              "Measured requests per target and run point [default: max(40, 10 x concurrency); "
              "open loop: max(40, 60 x rate), about a minute].")
      .option("warmup", "N",
              "Warmup requests per target before each run point, excluded from the metrics; "
              "every target finishes its warmup before any starts measuring [default: min(16, "
              "2 x concurrency); open loop: 0].")
      .option("request-rate", "LIST",
              "Open loop instead: arrivals per second per target, one run point each "
              "(e.g. 0.5,1,2).")
      .option("burstiness", "X",
              "Open loop: gamma shape of the gaps between arrivals; 1 = Poisson, < 1 burstier, "
              "> 1 steadier.",
              "1")
      .option("request-timeout", "SECONDS",
              "A request that has not completed this long after it started is ended and counted "
              "as a timeout (e.g. 600, 90s, 10m).",
              "600")
      .option("out", "DIR",
              "Where result directories go: DIR/<arm>-m<models-per-gpu>/c<c>/ (closed loop) or "
              "r<rate>/ (open loop).",
              "bench-results")
      .option("arm", "dedicated|timeslice|fractions",
              "How the GPUs behind the targets are shared (a label for `gpufrac report`).",
              "dedicated")
      .option("models-per-gpu", "N", "Models sharing each GPU (a label for `gpufrac report`).", "1")
      .option("gpus", "N",
              "GPUs serving all targets together (a label: report divides tok/s by it).", "1")
      .flag("no-progress", "No live progress line (it is shown only when stderr is a terminal).")
      .section("Examples", kExamples)
      .section("Text prompts", kTextPrompts)
      .section("Metrics", kMetrics)
      .section("Status of a request",
               "  ok, http_error (non-2xx reply), stream_error (error event, malformed or "
               "incomplete stream,\n  no [DONE]), timeout, connection_error (refused, reset, "
               "closed mid-stream). Every request\n  ends with one, in records.jsonl; failed "
               "requests are counted in summary.json \"errors\".");
  if (!args.parse(argc, argv)) return 0;

  BenchConfig config;
  config.workload.endpoint = parse_endpoint(args.get("endpoint"));
  config.workload.prompt = parse_prompt_kind(args, config.workload.endpoint);
  config.workload.isl = positive(args, "isl");
  config.workload.osl = positive(args, "osl");
  config.workload.isl_stddev = non_negative(args, "isl-stddev");
  config.workload.osl_stddev = non_negative(args, "osl-stddev");
  config.workload.vocab_size = positive(args, "vocab-size");
  config.workload.seed = uint64_t(parse_int(args.get("seed"), "--seed"));
  std::vector<std::string> targets = args.get_all("target");
  if (targets.empty()) {
    throw UsageError("--target is required: --target http://HOST:PORT[=MODEL] (see --help)");
  }
  for (const std::string& t : targets) {
    config.targets.push_back(parse_target(t, config.workload.endpoint));
  }
  std::string api_key = args.has("api-key") ? args.get("api-key") : "";
  if (api_key.empty()) {
    if (const char* from_env = std::getenv("OPENAI_API_KEY")) api_key = from_env;
  }
  if (std::string problem = api_key.empty() ? "" : api_key_problem(api_key); !problem.empty())
    throw UsageError((args.given("api-key") ? "--api-key: the key " : "OPENAI_API_KEY: the key ") +
                     problem);
  for (BenchTarget& t : config.targets) {
    t.api_key = api_key;
    resolve_model(t);
  }

  config.open_loop = args.given("request-rate");
  if (config.open_loop) {
    config.request_rates = parse_double_list(args.get("request-rate"), "--request-rate");
    for (double r : config.request_rates) {
      if (!(r > 0)) throw UsageError("--request-rate: every rate must be > 0 requests/s");
    }
    if (args.given("concurrency")) {
      std::vector<int> cap = parse_int_list(args.get("concurrency"), "--concurrency");
      if (cap.size() != 1 || cap[0] < 1) {
        throw UsageError("--concurrency with --request-rate is a cap: give one number >= 1");
      }
      config.concurrency_cap = cap[0];
    }
    config.burstiness = parse_double(args.get("burstiness"), "--burstiness");
    if (!(config.burstiness > 0)) throw UsageError("--burstiness must be > 0 (1 = Poisson)");
  } else {
    config.concurrencies = parse_int_list(args.get("concurrency"), "--concurrency");
    for (int c : config.concurrencies) {
      if (c < 1) throw UsageError("--concurrency: every value must be >= 1");
    }
    if (args.given("burstiness")) throw UsageError("--burstiness needs --request-rate (open loop)");
  }
  if (args.given("requests")) config.requests = positive(args, "requests");
  if (args.given("warmup")) config.warmup = positive(args, "warmup", 0);
  config.request_timeout_s = parse_seconds(args.get("request-timeout"), "--request-timeout");
  if (!(config.request_timeout_s > 0)) throw UsageError("--request-timeout must be > 0");
  config.out_dir = args.get("out");
  config.arm = args.get("arm");
  if (config.arm != "dedicated" && config.arm != "timeslice" && config.arm != "fractions") {
    throw UsageError("--arm: '" + config.arm + "' is not one of dedicated, timeslice, fractions");
  }
  config.models_per_gpu = positive(args, "models-per-gpu");
  config.gpus = positive(args, "gpus");
  config.cli_command = command_line(argc, argv);
  config.progress = !args.flag_set("no-progress") && ::isatty(STDERR_FILENO);

  std::vector<PointResult> results = run_bench(config, std::cout);
  for (const PointResult& p : results) {
    if (p.aggregate.completed == 0) {
      std::string first_error;
      for (const RequestRecord& r : p.run.records) {
        if (!r.ok()) {
          first_error = r.error;
          break;
        }
      }
      throw RuntimeFailure("no request completed in " + p.directory +
                           " (first error: " + first_error + ")");
    }
  }
  return 0;
}

}  // namespace gpufrac
