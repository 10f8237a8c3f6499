// scripted_sse_server: ScriptedSseServer as a process, for scripts (scripts/bench-accuracy) and for
// trying `gpufrac bench` by hand. Prints "listening on http://HOST:PORT" once ready, serves until
// SIGINT/SIGTERM, then prints how many requests it answered.
#include <sys/resource.h>

#include <csignal>
#include <iostream>

#include "common/cli_args.h"
#include "common/error.h"
#include "common/strings.h"
#include "fakes/scripted_sse_server.h"

using namespace gpufrac;

int main(int argc, char** argv) {
  CliArgs args("scripted_sse_server [OPTIONS]",
               "A fake OpenAI streaming server with scripted timing and failures (bench tests).");
  args.option("host", "HOST", "Address to listen on.", "127.0.0.1")
      .option("port", "PORT", "Port (0: any free port, printed at start).", "0")
      .option("ttft-ms", "MS", "Time from request arrival to the first token.", "50")
      .option("itl-ms", "MS", "Time between tokens.", "10")
      .option("tokens-per-chunk", "N", "Tokens per SSE chunk (chunks are N * itl apart).", "1")
      .option("output-tokens", "N", "Tokens per reply (0: the request's max_tokens).", "0")
      .option("model", "NAME", "A model name to serve (repeatable).", "scripted", true)
      .option("fail", "RULE",
              "Failure rule KIND[,every=N][,offset=K][,after=T][,status=S], KIND one of "
              "http_error, error_event, drop, stall, short, no_done (repeatable).",
              std::nullopt, true)
      .flag("comments", "Send a ': keep-alive' comment line before every chunk.")
      .option("trace", "FILE",
              "At exit, write per stream its X-Request-Id, arrival and every chunk's due and "
              "hand-off time (JSON lines, CLOCK_MONOTONIC ns).")
      .flag("no-usage", "Never send a usage chunk (clients must count tokens themselves).")
      .flag("no-tokenize", "Answer POST /tokenize with 404, as a server without it does.")
      .flag("finish-chunk",
            "Send finish_reason in a chunk of its own (no text), one chunk interval after the "
            "last token.")
      .section("Example",
               "  scripted_sse_server --port 8001 --ttft-ms 40 --itl-ms 8 "
               "--fail drop,every=20,after=5");
  try {
    if (!args.parse(argc, argv)) return 0;
    ScriptedSseOptions options;
    options.host = args.get("host");
    options.port = int(parse_int(args.get("port"), "--port"));
    options.ttft_ms = parse_double(args.get("ttft-ms"), "--ttft-ms");
    options.itl_ms = parse_double(args.get("itl-ms"), "--itl-ms");
    options.tokens_per_chunk = int(parse_int(args.get("tokens-per-chunk"), "--tokens-per-chunk"));
    options.output_tokens = int(parse_int(args.get("output-tokens"), "--output-tokens"));
    options.models = args.get_all("model");
    options.comments = args.flag_set("comments");
    options.usage = !args.flag_set("no-usage");
    options.tokenize = !args.flag_set("no-tokenize");
    options.finish_chunk = args.flag_set("finish-chunk");
    if (args.given("trace")) options.trace_path = args.get("trace");
    for (const std::string& rule : args.get_all("fail")) {
      options.failures.push_back(parse_failure_rule(rule));
    }
    sigset_t signals;
    sigemptyset(&signals);
    sigaddset(&signals, SIGINT);
    sigaddset(&signals, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &signals, nullptr);  // before any thread starts: all inherit it
    rlimit files{};                                 // a thousand streams need a thousand sockets
    if (::getrlimit(RLIMIT_NOFILE, &files) == 0 && files.rlim_cur < files.rlim_max) {
      files.rlim_cur = files.rlim_max;
      ::setrlimit(RLIMIT_NOFILE, &files);
    }
    ScriptedSseServer server(options);
    server.start();
    std::cout << "listening on " << server.url() << std::endl;
    int signal = 0;
    sigwait(&signals, &signal);
    server.stop();
    std::cout << "answered " << server.requests_received() << " requests" << std::endl;
    return 0;
  } catch (const UsageError& e) {
    std::cerr << "scripted_sse_server: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "scripted_sse_server: " << e.what() << "\n";
    return 1;
  }
}
