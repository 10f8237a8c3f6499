// The cost model of the reference study, made general: what serving N models costs per million
// output tokens when every model runs at the same concurrency as in a measured run.
//
// A run of arm A with m models per GPU on g GPUs measured T output tok/s for m*g models. Serving N
// models the same way needs ceil(N / (gpus_per_node * m)) whole nodes and yields T * N / (m*g)
// tok/s (each model keeps its measured share). Cost per 1M output tokens = price per node-hour x
// nodes / (tok/s x 3600 s) x 1e6. The study's 16 models: dedicated (m=1, 8 GPUs) needs 2 nodes and
// makes 2 x its 8-model tok/s; fractions (m=2, 8 GPUs) needs 1 node and makes its own tok/s.
#pragma once

#include <optional>

namespace gpufrac {

struct CostModel {
  double price_per_node_hour = 1.0;  // any currency
  int gpus_per_node = 8;

  int nodes_needed(int models, int models_per_gpu) const;
  // tok/s of N models, from a run that served measured_models models at measured_tok_s.
  static double tok_s_for(int models, double measured_tok_s, int measured_models);
  // Missing when tok/s is missing or not positive.
  std::optional<double> cost_per_million_tokens(int nodes, std::optional<double> tok_s) const;
};

}  // namespace gpufrac
