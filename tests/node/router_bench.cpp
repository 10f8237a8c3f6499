// The router's own cost per request, without an engine's noise: a streamed completion of N SSE
// chunks from an in-process upstream that answers at once, fetched directly and through the
// router, one request at a time. The difference of the two timings is what the router adds to a
// request's round trip (the TTFT overhead of docs/results/router-overhead.md, minus the queueing
// of a loaded machine); a built-in engine's stream costs its per-event reading on top
// (BM_Router64ChunksResumable). Not run by CI:  build-*/tests/node/router_bench
#include <benchmark/benchmark.h>

#include "common/http_server.h"
#include "common/json.h"
#include "node/request_model.h"
#include "node/router.h"
#include "common/raw_http_exchange.h"

namespace gpufrac {
namespace {

class Upstream {
 public:
  Upstream() : server_({}) {
    server_.route("POST", "/v1/completions", [](const HttpRequest& q, std::shared_ptr<HttpResponse> r) {
      int chunks = q.body.find("\"many\"") != std::string::npos ? 64 : 1;
      r->start_stream(200, "text/event-stream");
      for (int i = 0; i < chunks; ++i) {
        std::string finish = i + 1 == chunks ? "\"length\"" : "null";
        r->write("data: {\"id\":\"cmpl-1\",\"choices\":[{\"text\":\" t\",\"token_ids\":[7],"
                 "\"finish_reason\":" + finish + "}]}\n\n");
      }
      r->write("data: [DONE]\n\n");
      r->end();
    });
    server_.start();
  }
  int port() const { return server_.port(); }

 private:
  HttpServer server_;
};

struct Setup {
  Upstream upstream;
  // m: relayed event by event; r: a built-in engine's model, whose events are also read (token
  // ids, finish) so that a cut stream could be resumed.
  Router router{{}, {{"m", 1}, {"r", 1, /*resumable=*/true}}};
  Setup() {
    ReplicaState ready;
    ready.port = upstream.port();
    ready.ready = true;
    router.set_replica("m", 0, ready);
    router.set_replica("r", 0, ready);
    router.start();
  }
};

Setup& setup() {
  static Setup s;
  return s;
}

void run(benchmark::State& state, bool through_router, const char* body) {
  int port = through_router ? setup().router.port() : setup().upstream.port();
  for (auto _ : state) {
    testing::RawReply r = testing::stream_request(port, "/v1/completions", body, 5);
    if (!r.complete) state.SkipWithError("request failed");
  }
}

// A completions body with a 2048-token prompt, the reference study's input length.
const std::string& long_body() {
  static const std::string body = [] {
    std::string b = R"({"max_tokens":256,"min_tokens":256,"model":"m","prompt":[)";
    for (int i = 0; i < 2048; ++i) b += (i ? "," : "") + std::to_string(100000 + i * 37);
    return b + R"(],"stream":true})";
  }();
  return body;
}

void BM_FindModel2048(benchmark::State& s) {
  for (auto _ : s) benchmark::DoNotOptimize(find_request_model(long_body(), nullptr));
}
void BM_FullJsonParse2048(benchmark::State& s) {
  for (auto _ : s) benchmark::DoNotOptimize(Json::parse(long_body(), nullptr, false));
}
BENCHMARK(BM_FindModel2048);
BENCHMARK(BM_FullJsonParse2048);

void BM_Direct2048Prompt(benchmark::State& s) { run(s, false, long_body().c_str()); }
void BM_Router2048Prompt(benchmark::State& s) { run(s, true, long_body().c_str()); }
BENCHMARK(BM_Direct2048Prompt)->UseRealTime();
BENCHMARK(BM_Router2048Prompt)->UseRealTime();

void BM_DirectOneChunk(benchmark::State& s) { run(s, false, R"({"model":"m","prompt":[1,2,3]})"); }
void BM_RouterOneChunk(benchmark::State& s) { run(s, true, R"({"model":"m","prompt":[1,2,3]})"); }
void BM_Direct64Chunks(benchmark::State& s) { run(s, false, R"({"model":"m","prompt":"many"})"); }
void BM_Router64Chunks(benchmark::State& s) { run(s, true, R"({"model":"m","prompt":"many"})"); }
BENCHMARK(BM_DirectOneChunk)->UseRealTime();
BENCHMARK(BM_RouterOneChunk)->UseRealTime();
BENCHMARK(BM_Direct64Chunks)->UseRealTime();
BENCHMARK(BM_Router64Chunks)->UseRealTime();
void BM_Router64ChunksResumable(benchmark::State& s) { run(s, true, R"({"model":"r","prompt":"many"})"); }
BENCHMARK(BM_Router64ChunksResumable)->UseRealTime();

}  // namespace
}  // namespace gpufrac

BENCHMARK_MAIN();
