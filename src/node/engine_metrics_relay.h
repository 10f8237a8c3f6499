// The engines' own metrics on the router's GET /metrics: every ready replica's /metrics (vLLM's
// names from gpufrac serve: vllm:num_requests_running, vllm:time_to_first_token_seconds, ...)
// merged into one Prometheus text exposition after the router's gpufrac:node_* series, so one
// scrape of a node gives a stock vLLM dashboard every model. Each sample gains the label
// replica="<model>/<index>" (first, before the engine's own labels, model_name included), each
// metric family is printed once (HELP and TYPE from the first engine that gave them) with the
// samples of every engine. Pure text work; the router does the fetching off its loop thread.
#pragma once

#include <string>
#include <vector>

namespace gpufrac {

struct EngineExposition {
  std::string replica;  // the label value, e.g. "qwen-a/0"
  std::string text;     // the engine's /metrics body
};

std::string merge_engine_expositions(const std::vector<EngineExposition>& engines);

}  // namespace gpufrac
