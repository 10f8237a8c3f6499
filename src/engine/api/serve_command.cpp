#include "engine/api/serve_command.h"

#include <pthread.h>
#include <signal.h>

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <string>

#include "common/api_key.h"
#include "common/cli_args.h"
#include "common/error.h"
#include "common/log.h"
#include "common/strings.h"
#include "engine/api/openai_server.h"
#include "engine/api/served_tokenizer.h"
#include "engine/engine.h"
#include "engine/kv_block_allocator.h"
#include "engine/model/presets.h"
#include "engine/runner_factory.h"

namespace gpufrac {

namespace {

CliArgs serve_args() {
  CliArgs args(
      "gpufrac serve --model PRESET|DIR [OPTIONS]",
      "Serve one model with gpufrac's own engine behind an OpenAI-compatible HTTP API:\n"
      "POST /v1/completions (prompt as text or token ids) and /v1/chat/completions\n"
      "(messages through the model's chat template), streaming and not; POST /tokenize and\n"
      "/detokenize; GET /v1/models, /health and /metrics (Prometheus). Continuous batching\n"
      "with chunked prefill and a paged KV cache sized from the memory the process may use.");
  args.option("model", "PRESET|DIR",
              "a preset with seeded random weights (qwen3-4b, qwen3-0.6b, tiny) or a Hugging Face "
              "checkpoint directory (config.json + *.safetensors)")
      .option("device", "cpu|cuda|auto", "where the model runs; auto = CUDA when usable, else CPU",
              "auto")
      .option("tokenizer", "DIR",
              "directory of the tokenizer.json (and tokenizer_config.json) to use (default: the "
              "checkpoint directory; for a preset, the Qwen3 tokenizer scripts/install-deps "
              "fetches)")
      .option("chat-template", "qwen3|chatml|llama3",
              "the chat template of /v1/chat/completions (default: recognised from "
              "tokenizer_config.json)")
      .option("host", "ADDR", "address to listen on (0.0.0.0 for every interface)", "127.0.0.1")
      .option("port", "N", "TCP port to listen on", "8000")
      .option("served-model-name", "NAME",
              "the model name clients send and /v1/models lists (default: the --model value)")
      .option("max-model-len", "TOKENS",
              "longest sequence (prompt + max_tokens) a request may ask for (default: the model's "
              "max_position_embeddings)")
      .option("max-num-seqs", "N", "most sequences in the running batch", "256")
      .option("max-num-batched-tokens", "TOKENS",
              "token budget of one step (decodes first, then prompt chunks); >= --max-num-seqs",
              "8192")
      .option(
          "max-tokens-with-decodes", "TOKENS",
          "token budget of a step that carries decodes, decodes included (>= --max-num-seqs; "
          "default: " +
              std::to_string(engine::kDefaultMaxTokensWithDecodes) +
              ", or --max-num-seqs if larger): prompts are cut into chunks of the "
              "rest, so a decode never waits behind whole prompts (a 2048-token prompt of "
              "qwen3-4b takes ~36 ms on an H200). The rest must keep up with arrivals: raise it "
              "when input/output tokens x running sequences exceeds it (2048/256 x 32 = 256 fits)")
      .option("block-size", "TOKENS", "tokens per KV cache block", "16")
      .option("kv-admission", "reserve|optimistic",
              "reserve: admit a request only when the KV blocks of its prompt + max_tokens are "
              "free beside every running request's, so nothing is ever preempted and an "
              "over-full cache queues requests instead of thrashing; optimistic: admit when its "
              "first chunk fits and preempt (recompute) the newest on shortage, at most " +
                  std::to_string(engine::kMaxPreemptions) +
                  " times per request (vLLM's rule: more requests at once while they fit)",
              "reserve")
      .option("memory-budget", "BYTES|auto|elastic",
              "bytes for the KV cache (e.g. 4G, 512MiB); auto = the memory the device reports "
              "free after the weights (under any MPS or memcap limit, never total) minus 128 MiB "
              "and 2%; elastic = map KV memory in chunks as requests need it and give idle "
              "chunks back (a request the device has no memory for waits)",
              "auto")
      .option("kv-release-delay", "DURATION",
              "elastic: how long a KV chunk stays mapped after its last use with no step "
              "running before it goes back to the device (e.g. 250ms, 2s); shorter frees memory "
              "for neighbours sooner, longer maps and unmaps less under a steady load",
              "2s")
      .option("kv-map-lock", "FILE",
              "elastic, CUDA: map KV memory only while holding an exclusive lock (flock) on "
              "FILE, so that engines sharing a GPU and FILE map one at a time and each sees the "
              "free memory settled; when another holds it, the request waits and asks again "
              "10-30 ms later (a node sets it for its elastic models, one FILE per GPU)")
      .option("max-waiting-requests", "N",
              "requests that may wait for a slot; beyond that new requests get HTTP 429", "4096")
      .option("max-request-bytes", "BYTES", "largest request body accepted (larger: HTTP 413)",
              "16M")
      .option("api-key", "KEY",
              "a key clients must send as 'Authorization: Bearer KEY' on every path but /health "
              "and /metrics (401 otherwise); repeat for several keys. Default: $GPUFRAC_API_KEY "
              "(keys separated by commas), which keeps the key off the command line",
              std::nullopt, true)
      .option("metrics-key", "KEY",
              "a key /metrics then needs as 'Authorization: Bearer KEY' (default: "
              "$GPUFRAC_METRICS_KEY; unset: /metrics is open); repeat for several keys",
              std::nullopt, true)
      .option("seed", "N",
              "seed of the preset weights and of sampling for requests that bring no seed", "0")
      .option("threads", "N", "CPU threads for the CPU runner and loading; 0 = every usable CPU",
              "0")
      .option("cpu-turn-lock", "FILE",
              "CPU runner: hold an exclusive lock (flock) on FILE for each step, so the engines "
              "given the same FILE compute one at a time on all cores, as processes time-slice a "
              "GPU without MPS (a node's timeslice mode on the CPU sets it)")
      .section("Example",
               R"(  scripts/install-deps   # once: fetches the Qwen3 tokenizer the presets speak
  gpufrac serve --model tiny --device cpu --port 8000 --max-model-len 2048 \
      --memory-budget 1G
  curl -s localhost:8000/v1/chat/completions -H 'Content-Type: application/json' \
      -d '{"model": "tiny", "messages": [{"role": "user", "content": "Hi!"}],
           "max_tokens": 8, "stream": true, "stream_options": {"include_usage": true}}'
  curl -s localhost:8000/v1/completions -H 'Content-Type: application/json' \
      -d '{"model": "tiny", "prompt": "The capital of France is", "max_tokens": 8,
           "stop": ["\n"], "temperature": 0}'
  curl -s localhost:8000/tokenize -H 'Content-Type: application/json' \
      -d '{"model": "tiny", "prompt": "Hello world"}'
  curl -s localhost:8000/metrics | grep kv_cache_blocks

Serves the tiny preset (random weights, Qwen3's vocabulary and tokenizer) on the CPU
with a 1 GiB KV cache (tiny needs 1 KiB per token: 65536 blocks are possible, capped
at --max-num-seqs x --max-model-len / --block-size = 32768); streams a chat reply of
8 tokens as server-sent events (a role chunk, content deltas, a chunk with
finish_reason, a usage chunk, [DONE]); completes a text prompt up to the first
newline; counts the tokens of a text ({"count": 2, "tokens": [9707, 1879], ...});
then shows the KV blocks in use. Random weights make the replies gibberish.)")
      .section(
          "Requests",
          "/v1/completions: prompt as text (a string) or token ids (an array, or an array\n"
          "holding one). /v1/chat/completions: messages [{role: system|user|assistant,\n"
          "content: string or [{type: text, text}]}]; generation ends at the template's\n"
          "end-of-turn token (<|im_end|>) unless ignore_eos. Fields: max_tokens (completions 16,\n"
          "chat: what the context leaves) or max_completion_tokens, min_tokens, n (choices),\n"
          "temperature (1; 0 = greedy), top_p, top_k, min_p, seed, presence_penalty,\n"
          "frequency_penalty, repetition_penalty, logit_bias, logprobs (completions: a count;\n"
          "chat: true, with top_logprobs), echo (completions), ignore_eos, stop (a string or up\n"
          "to 16), stop_token_ids, skip_special_tokens, stream, stream_options.include_usage.\n"
          "Stop strings are matched across tokens and left out of the text. Unsupported fields\n"
          "(tools, structured output) get a 400 naming them. /tokenize: {prompt} or\n"
          "{messages} -> {count, max_model_len, tokens}; /detokenize: {tokens} -> {prompt}.\n"
          "Bad requests get an OpenAI-style error body: 400 (malformed, wrong types, token ids\n"
          "outside the vocabulary, prompt + max_tokens over --max-model-len, text without a\n"
          "tokenizer), 404 (unknown model), 413 (body too large), 429 (waiting queue full). A\n"
          "client that disconnects cancels its request.")
      .section(
          "Tokenizer",
          "Loaded at start from --tokenizer, the checkpoint directory, or (presets) the Qwen3\n"
          "data of scripts/install-deps ($GPUFRAC_TOKENIZER_DIR overrides where). Without one\n"
          "the server still starts: token-id prompts work, each token's text is its id\n"
          "(\" 1234\"), and text prompts, chat, stop strings and /tokenize answer 400 naming\n"
          "the fix.")
      .section(
          "API keys",
          "With --api-key (or $GPUFRAC_API_KEY) every request but GET /health and /metrics\n"
          "needs 'Authorization: Bearer KEY' (an OpenAI client's apiKey), as vLLM's --api-key:\n"
          "without a key, or with another one, it gets 401 (an OpenAI-style body, code\n"
          "invalid_api_key). /tokenize and /detokenize need it too. --metrics-key guards\n"
          "/metrics the same way. Keys are compared in constant time and never logged.\n"
          "  GPUFRAC_API_KEY=$(cat key.txt) gpufrac serve --model tiny --device cpu\n"
          "  curl -s localhost:8000/v1/models -H \"Authorization: Bearer $(cat key.txt)\"")
      .section("Stopping", "SIGINT or SIGTERM stop the server: in-flight requests are cancelled.");
  return args;
}

// The keys of --FLAG (one per occurrence), else those of $VARIABLE (commas or whitespace between
// them; empty or unset: none).
ApiKeyTable keys_from(const CliArgs& args, const std::string& flag, const char* variable) {
  std::vector<std::string> keys;
  if (args.given(flag)) {
    keys = args.get_all(flag);
    for (size_t i = 0; i < keys.size(); ++i) check_api_key(keys[i], "--" + flag, i + 1);
  } else if (const char* text = std::getenv(variable); text && *text) {
    keys = parse_api_keys(text, variable);
    if (keys.empty()) {
      throw UsageError(std::string(variable) +
                       " is set but holds no key; give the key (several: separated by commas), "
                       "or unset it to serve without one");
    }
  }
  ApiKeyTable table;
  for (const std::string& key : keys) table.add(key);
  return table;
}

int positive_int(const CliArgs& args, const std::string& name) {
  int64_t v = parse_int(args.get(name), "--" + name);
  if (v < 1 || v > INT32_MAX) throw UsageError("--" + name + " must be a positive integer");
  return static_cast<int>(v);
}

}  // namespace

int serve_command(int argc, char** argv) {
  CliArgs args = serve_args();
  if (!args.parse(argc, argv)) return 0;
  if (!args.has("model"))
    throw UsageError("--model is required: a preset (tiny, ...) or a directory");

  // Block the stop signals before any thread starts, so that every thread inherits the mask and
  // sigwait below is the one place they arrive.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  engine::RunnerOptions runner_options;
  runner_options.model = args.get("model");
  runner_options.device = args.get("device");
  runner_options.seed = static_cast<uint64_t>(parse_int(args.get("seed"), "--seed"));
  runner_options.threads = static_cast<int>(parse_int(args.get("threads"), "--threads"));
  if (args.has("cpu-turn-lock")) runner_options.cpu_turn_lock = args.get("cpu-turn-lock");
  if (args.has("kv-map-lock")) runner_options.kv_map_lock = args.get("kv-map-lock");
  int port = static_cast<int>(parse_int(args.get("port"), "--port"));
  if (port < 0 || port > 65535) throw UsageError("--port must be in 0..65535");

  engine::EngineOptions options;
  options.block_size = positive_int(args, "block-size");
  options.scheduler.max_num_seqs = positive_int(args, "max-num-seqs");
  try {
    options.scheduler.admission = engine::parse_kv_admission(args.get("kv-admission"));
  } catch (const std::invalid_argument&) {
    throw UsageError("--kv-admission must be reserve or optimistic, got '" +
                     args.get("kv-admission") + "'");
  }
  options.scheduler.max_num_batched_tokens = positive_int(args, "max-num-batched-tokens");
  options.scheduler.max_tokens_with_decodes =
      args.has("max-tokens-with-decodes")
          ? positive_int(args, "max-tokens-with-decodes")
          : std::max(engine::kDefaultMaxTokensWithDecodes, options.scheduler.max_num_seqs);
  options.max_waiting_requests = positive_int(args, "max-waiting-requests");
  options.seed = runner_options.seed;
  auto require_room_for_every_sequence = [&](const char* flag, int value, const char* why) {
    if (value < options.scheduler.max_num_seqs) {
      throw UsageError(std::string("--") + flag + " (" + std::to_string(value) +
                       ") must be at least --max-num-seqs (" +
                       std::to_string(options.scheduler.max_num_seqs) + "): " + why);
    }
  };
  require_room_for_every_sequence("max-num-batched-tokens",
                                  options.scheduler.max_num_batched_tokens,
                                  "every running sequence needs one token per decode step");
  require_room_for_every_sequence("max-tokens-with-decodes",
                                  options.scheduler.max_tokens_with_decodes,
                                  "a step may carry one decode per running sequence");
  uint64_t max_request_bytes = parse_bytes(args.get("max-request-bytes"), "--max-request-bytes");
  std::string memory_budget = args.get("memory-budget");
  if (args.has("kv-map-lock") && memory_budget != "elastic") {
    throw UsageError("--kv-map-lock orders the mapping of elastic KV memory: give --memory-budget "
                     "elastic too, or drop --kv-map-lock");
  }
  const double release_delay_s = parse_seconds(args.get("kv-release-delay"), "--kv-release-delay");
  if (!(release_delay_s >= 0 && release_delay_s <= 3600)) {
    throw UsageError("--kv-release-delay must be between 0 and 1h, e.g. 250ms or 2s");
  }
  options.kv_release_delay_ms = int64_t(release_delay_s * 1000 + 0.5);
  // The runner sizes its step buffers and decode graphs for these limits, not for the defaults.
  runner_options.max_num_batched_tokens = options.scheduler.max_num_batched_tokens;
  runner_options.max_num_seqs = options.scheduler.max_num_seqs;
  runner_options.max_model_len =
      args.has("max-model-len") ? positive_int(args, "max-model-len") : 0;

  std::unique_ptr<engine::ModelRunner> runner = engine::create_model_runner(runner_options);
  const engine::ModelConfig& config = runner->config();
  int model_max = config.max_position_embeddings;
  options.max_model_len =
      runner_options.max_model_len > 0 ? runner_options.max_model_len : model_max;
  if (model_max > 0 && options.max_model_len > model_max) {
    throw UsageError("--max-model-len " + std::to_string(options.max_model_len) + " exceeds the " +
                     "model's max_position_embeddings (" + std::to_string(model_max) + ")");
  }
  options.elastic_kv = memory_budget == "elastic";
  uint64_t budget =
      options.elastic_kv
          ? engine::kElasticKvCeilingBytes
          : engine::resolve_kv_memory_budget(memory_budget, runner->available_memory_bytes());
  uint64_t block_bytes = runner->kv_block_bytes(options.block_size);
  options.num_kv_blocks =
      engine::kv_pool_blocks(budget, block_bytes, options.block_size, options.max_model_len,
                             options.scheduler.max_num_seqs);

  engine::ServedTokenizerOptions tokenizer_options;
  tokenizer_options.model = runner_options.model;
  tokenizer_options.model_is_preset = engine::find_preset(runner_options.model).has_value();
  tokenizer_options.tokenizer_dir = args.has("tokenizer") ? args.get("tokenizer") : "";
  tokenizer_options.chat_template = args.has("chat-template") ? args.get("chat-template") : "";
  tokenizer_options.vocab_size = config.vocab_size;
  const engine::ServedTokenizer tokenizer = engine::load_served_tokenizer(tokenizer_options);
  if (tokenizer.get()) {
    log_info(
        "serve: tokenizer from ", tokenizer.directory, ", chat template ",
        tokenizer.chat_template ? engine::chat_template_name(*tokenizer.chat_template) : "none");
  } else {
    log_warn("serve: no tokenizer, so only token-id prompts work: ", tokenizer.unavailable);
  }

  engine::Engine engine(*runner, options);
  engine::OpenAiServerOptions server_options;
  server_options.tokenizer = &tokenizer;
  server_options.served_model_name =
      args.has("served-model-name") ? args.get("served-model-name") : runner_options.model;
  server_options.http.host = args.get("host");
  server_options.http.port = port;
  server_options.http.max_body_bytes = max_request_bytes;
  server_options.api_keys = keys_from(args, "api-key", "GPUFRAC_API_KEY");
  server_options.metrics_keys = keys_from(args, "metrics-key", "GPUFRAC_METRICS_KEY");
  engine::OpenAiServer server(engine, server_options);
  engine.start();
  server.start();
  log_info("serve: ", server_options.served_model_name, " on ", runner->device_name(),
           ", KV cache ", options.num_kv_blocks, " blocks x ", options.block_size, " tokens (",
           format_bytes(uint64_t(options.num_kv_blocks) * block_bytes),
           options.elastic_kv ? " at most, mapped on demand, "
                              : (" of a " + format_bytes(budget) + " budget, "),
           engine::kv_admission_name(options.scheduler.admission),
           " admission), max-model-len ", options.max_model_len,
           ", listening on http://", server_options.http.host, ":", server.port());
  if (!server_options.api_keys.empty()) {
    log_info("serve: every path but /health",
             server_options.metrics_keys.empty() ? " and /metrics" : "", " needs one of ",
             server_options.api_keys.size(), " API key(s)",
             server_options.metrics_keys.empty() ? "" : "; /metrics needs a metrics key");
  } else if (!server_options.metrics_keys.empty()) {
    log_info("serve: /metrics needs a metrics key; no API key is required");
  }

  int signal_number = 0;
  sigwait(&stop_signals, &signal_number);
  log_info("serve: signal ", signal_number, ", stopping");
  server.stop();  // no new requests; disconnects cancel what is in flight
  engine.stop();
  return 0;
}

}  // namespace gpufrac
