#include "report/cost_model.h"

namespace gpufrac {

int CostModel::nodes_needed(int models, int models_per_gpu) const {
  int models_per_node = gpus_per_node * models_per_gpu;
  return (models + models_per_node - 1) / models_per_node;
}

double CostModel::tok_s_for(int models, double measured_tok_s, int measured_models) {
  return measured_tok_s * models / measured_models;
}

std::optional<double> CostModel::cost_per_million_tokens(int nodes,
                                                         std::optional<double> tok_s) const {
  if (!tok_s || *tok_s <= 0) return std::nullopt;
  return price_per_node_hour * nodes / (*tok_s * 3600.0) * 1e6;
}

}  // namespace gpufrac
