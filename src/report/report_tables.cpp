#include "report/report_tables.h"

#include <algorithm>
#include <set>

#include "common/run_label.h"
#include "report/fractions_trail_note.h"

namespace gpufrac {
namespace {

// Shared groups with one models-per-GPU value, and the rows where they meet the dedicated arm.
struct MatchedRows {
  int models_per_gpu = 1;
  const ArmGroup* dedicated = nullptr;
  std::vector<const ArmGroup*> shared;
  std::vector<int> requests_per_gpu;
  std::string unmatched;  // footnote naming the points left out
};

Cell ratio_percent(const Cell& numerator, const Cell& denominator) {
  if (!numerator || !denominator || *denominator == 0) return std::nullopt;
  return 100.0 * *numerator / *denominator;
}

Cell total_tok_s(const RunPoint* p) {
  return p ? p->output_tok_s : std::nullopt;
}
Cell tok_s_per_gpu(const RunPoint* p) {
  return p ? p->tok_s_per_gpu() : std::nullopt;
}
Cell ttft(const RunPoint* p) {
  return p ? p->ttft_p50_ms : std::nullopt;
}
Cell itl(const RunPoint* p) {
  return p ? p->itl_p50_ms : std::nullopt;
}

std::string plural(int n, const char* one, const char* many) {
  return std::to_string(n) + " " + (n == 1 ? one : many);
}

std::vector<MatchedRows> match_by_requests_per_gpu(const ResultSet& set) {
  std::vector<MatchedRows> tables;
  const ArmGroup* dedicated = set.dedicated();
  std::vector<const ArmGroup*> shared;
  for (const ArmGroup* g : set.shared()) {
    if (!g->closed.empty()) shared.push_back(g);
  }
  if (!dedicated || dedicated->closed.empty() || shared.empty()) return tables;
  std::set<int> shared_models_per_gpu;
  for (const ArmGroup* g : shared) shared_models_per_gpu.insert(g->models_per_gpu);

  for (int m : shared_models_per_gpu) {
    MatchedRows rows;
    rows.models_per_gpu = m;
    rows.dedicated = dedicated;
    for (const ArmGroup* g : shared) {
      if (g->models_per_gpu == m) rows.shared.push_back(g);
    }
    std::set<int> shared_requests;
    for (const ArmGroup* g : rows.shared) {
      for (const RunPoint& p : g->closed) shared_requests.insert(p.requests_per_gpu());
    }
    std::vector<std::string> left_out;
    for (const RunPoint& p : dedicated->closed) {
      if (shared_requests.count(p.requests_per_gpu())) {
        rows.requests_per_gpu.push_back(p.requests_per_gpu());
      } else {
        left_out.push_back(dedicated->label + " c" + std::to_string(*p.concurrency) + " (" +
                           std::to_string(p.requests_per_gpu()) + " req/GPU)");
      }
    }
    for (const ArmGroup* g : rows.shared) {
      for (const RunPoint& p : g->closed) {
        if (!dedicated->at_requests_per_gpu(p.requests_per_gpu())) {
          left_out.push_back(g->label + " c" + std::to_string(*p.concurrency) + " (" +
                             std::to_string(p.requests_per_gpu()) + " req/GPU)");
        }
      }
    }
    if (!left_out.empty()) {
      rows.unmatched =
          "Not in this table (no point of the other side at the same requests per "
          "GPU; see the per-arm rows): ";
      for (size_t i = 0; i < left_out.size(); ++i) rows.unmatched += (i ? ", " : "") + left_out[i];
      rows.unmatched += ".";
    }
    tables.push_back(std::move(rows));
  }
  return tables;
}

// "-m2": CSV file names stay distinct when shared arms ran at several models per GPU.
std::string matched_suffix(const MatchedRows& rows) {
  return models_per_gpu_suffix(rows.models_per_gpu);
}

std::vector<int> concurrencies(const ResultSet& set) {
  std::set<int> all;
  for (const ArmGroup& g : set.groups) {
    for (const RunPoint& p : g.closed) all.insert(*p.concurrency);
  }
  return {all.begin(), all.end()};
}

// Under a throughput table whose points all ran without a GPU (no machine.gpu in any summary).
constexpr const char* kCpuAnalogueNote =
    "CPU run: the arms share the CPU's cores as they would a GPU's SMs (dedicated: one engine on "
    "all cores; timeslice: the models take turns, one step at a time, on all cores; fractions: "
    "each model on its own cores), so the rows show what taking turns costs against running side "
    "by side; they do not show a GPU's memory bandwidth, MPS or memory caps, and their numbers do "
    "not predict a GPU's.";

bool ran_on_cpu(const MatchedRows& rows) {
  auto on_cpu = [](const ArmGroup& g) {
    return std::all_of(g.closed.begin(), g.closed.end(),
                       [](const RunPoint& p) { return p.gpu_name.empty(); });
  };
  return on_cpu(*rows.dedicated) &&
         std::all_of(rows.shared.begin(), rows.shared.end(),
                     [&](const ArmGroup* g) { return on_cpu(*g); });
}

}  // namespace

std::vector<Table> throughput_tables(const ResultSet& set) {
  std::vector<Table> tables;
  for (const MatchedRows& rows : match_by_requests_per_gpu(set)) {
    const ArmGroup& base = *rows.dedicated;
    const int m = rows.models_per_gpu;
    Table t;
    t.id = "throughput" + matched_suffix(rows);
    t.title = "Output tok/s per GPU: " + plural(m, "model", "models") + " per GPU vs " + base.label;
    t.note = "Rows matched on requests resident per GPU: a shared arm at c per model vs " +
             base.label + " at " + std::to_string(m) + " x c. % = shared tok/s per GPU / " +
             base.label + " tok/s per GPU.";
    t.columns = {{"req/GPU", "requests_per_gpu"},
                 {"base c", "dedicated_concurrency"},
                 {"shared c", "shared_concurrency"},
                 {base.label, base.key + "_tok_s_per_gpu", CellFormat::kFixed, 1}};
    for (const ArmGroup* g : rows.shared) {
      t.columns.push_back({g->label, g->key + "_tok_s_per_gpu", CellFormat::kFixed, 1});
    }
    for (const ArmGroup* g : rows.shared) {
      t.columns.push_back({g->label + " %", g->key + "_pct_of_dedicated", CellFormat::kPercent, 1});
    }
    for (int r : rows.requests_per_gpu) {
      const RunPoint* b = base.at_requests_per_gpu(r);
      std::vector<Cell> cells = {double(r), double(*b->concurrency), double(r) / m,
                                 tok_s_per_gpu(b)};
      for (const ArmGroup* g : rows.shared)
        cells.push_back(tok_s_per_gpu(g->at_requests_per_gpu(r)));
      for (const ArmGroup* g : rows.shared) {
        cells.push_back(ratio_percent(tok_s_per_gpu(g->at_requests_per_gpu(r)), tok_s_per_gpu(b)));
      }
      t.rows.push_back(std::move(cells));
    }
    t.footnote = rows.unmatched;
    for (const ArmGroup* f : rows.shared) {
      if (f->arm != "fractions") continue;
      for (const ArmGroup* ts : rows.shared) {
        if (ts->arm != "timeslice" || ts->gpus != f->gpus) continue;
        std::string why = fractions_trail_note(base, *ts, *f, rows.requests_per_gpu);
        if (!why.empty()) t.footnote += (t.footnote.empty() ? "" : "\n\n") + why;
      }
    }
    if (ran_on_cpu(rows)) t.footnote += std::string(t.footnote.empty() ? "" : "\n\n") + kCpuAnalogueNote;
    tables.push_back(std::move(t));
  }
  return tables;
}

std::vector<Table> latency_tables(const ResultSet& set) {
  std::vector<Table> tables;
  for (const MatchedRows& rows : match_by_requests_per_gpu(set)) {
    const ArmGroup& base = *rows.dedicated;
    Table t;
    t.id = "latency" + matched_suffix(rows);
    t.title = "TTFT p50 (ms) and ITL p50 (ms): " + plural(rows.models_per_gpu, "model", "models") +
              " per GPU vs " + base.label;
    t.note =
        "Same rows as the throughput table. A shared arm's latency is the mean of its "
        "models' p50s; % = shared / " +
        base.label + " (above 100% is slower).";
    t.columns = {{"req/GPU", "requests_per_gpu"},
                 {"TTFT base", base.key + "_ttft_p50_ms", CellFormat::kFixed, 1}};
    for (const ArmGroup* g : rows.shared) {
      t.columns.push_back({"TTFT " + g->label, g->key + "_ttft_p50_ms", CellFormat::kFixed, 1});
    }
    t.columns.push_back({"ITL base", base.key + "_itl_p50_ms", CellFormat::kFixed, 2});
    for (const ArmGroup* g : rows.shared) {
      t.columns.push_back({"ITL " + g->label, g->key + "_itl_p50_ms", CellFormat::kFixed, 2});
    }
    for (const ArmGroup* g : rows.shared) {
      t.columns.push_back(
          {"TTFT " + g->label + " %", g->key + "_ttft_pct_of_dedicated", CellFormat::kPercent, 1});
    }
    for (const ArmGroup* g : rows.shared) {
      t.columns.push_back(
          {"ITL " + g->label + " %", g->key + "_itl_pct_of_dedicated", CellFormat::kPercent, 1});
    }
    for (int r : rows.requests_per_gpu) {
      const RunPoint* b = base.at_requests_per_gpu(r);
      std::vector<Cell> cells = {double(r), ttft(b)};
      for (const ArmGroup* g : rows.shared) cells.push_back(ttft(g->at_requests_per_gpu(r)));
      cells.push_back(itl(b));
      for (const ArmGroup* g : rows.shared) cells.push_back(itl(g->at_requests_per_gpu(r)));
      for (const ArmGroup* g : rows.shared) {
        cells.push_back(ratio_percent(ttft(g->at_requests_per_gpu(r)), ttft(b)));
      }
      for (const ArmGroup* g : rows.shared) {
        cells.push_back(ratio_percent(itl(g->at_requests_per_gpu(r)), itl(b)));
      }
      t.rows.push_back(std::move(cells));
    }
    t.footnote = rows.unmatched;
    tables.push_back(std::move(t));
  }
  return tables;
}

Table cost_table(const ResultSet& set, int models, const CostModel& cost) {
  const ArmGroup* base = set.dedicated();
  std::vector<const ArmGroup*> shared = set.shared();
  char price[32];
  std::snprintf(price, sizeof price, "%.2f", cost.price_per_node_hour);

  Table t;
  t.id = "cost-" + std::to_string(models) + "-models";
  t.title =
      "Cost of serving " + plural(models, "model", "models") + " (rows matched on c per model)";
  t.note = "$/1M output tokens = node-hour price x nodes / (output tok/s x 3600) x 1e6, at " +
           std::string(price) + " per node-hour and " + plural(cost.gpus_per_node, "GPU", "GPUs") +
           " per node. Each arm needs ceil(" + std::to_string(models) + " / (" +
           std::to_string(cost.gpus_per_node) +
           " x models per GPU)) nodes; its tok/s is the measured run's x " +
           std::to_string(models) + " / models in that run.";
  t.columns = {{"c/model", "concurrency"}};
  std::vector<const ArmGroup*> groups;
  if (base) groups.push_back(base);
  groups.insert(groups.end(), shared.begin(), shared.end());
  for (const ArmGroup* g : groups) {
    int nodes = cost.nodes_needed(models, g->models_per_gpu);
    t.columns.push_back({g->label + " tok/s (" + plural(nodes, "node", "nodes") + ")",
                         g->key + "_tok_s", CellFormat::kFixed, 0});
    t.columns.push_back(
        {g->label + " $/1M", g->key + "_cost_per_million_tokens", CellFormat::kFixed, 4});
    if (base && g != base) {
      t.columns.push_back({shared.size() == 1 ? "change" : g->label + " change",
                           g->key + "_change_pct", CellFormat::kSignedPercent, 1});
    }
  }
  for (int c : concurrencies(set)) {
    std::vector<Cell> cells = {double(c)};
    Cell base_cost;
    for (const ArmGroup* g : groups) {
      const RunPoint* p = g->at_concurrency(c);
      Cell tok_s;
      if (p && p->output_tok_s) tok_s = CostModel::tok_s_for(models, *p->output_tok_s, g->models());
      Cell usd = cost.cost_per_million_tokens(cost.nodes_needed(models, g->models_per_gpu), tok_s);
      cells.push_back(tok_s);
      cells.push_back(usd);
      if (g == base) {
        base_cost = usd;
      } else if (base) {
        Cell ratio = ratio_percent(usd, base_cost);
        cells.push_back(ratio ? Cell(*ratio - 100.0) : std::nullopt);
      }
    }
    t.rows.push_back(std::move(cells));
  }
  std::vector<std::string> basis;
  for (const ArmGroup* g : groups) {
    int nodes = cost.nodes_needed(models, g->models_per_gpu);
    basis.push_back(g->label + ": " + plural(models, "model", "models") + " at " +
                    std::to_string(g->models_per_gpu) + " per GPU on " +
                    plural(nodes, "node", "nodes") + ", tok/s = its " +
                    std::to_string(g->models()) + "-model run x " + std::to_string(models) + "/" +
                    std::to_string(g->models()));
  }
  for (size_t i = 0; i < basis.size(); ++i) t.footnote += (i ? "; " : "") + basis[i];
  t.footnote += ".";
  return t;
}

Table appendix_table(const ResultSet& set) {
  Table t;
  t.id = "appendix";
  t.title = "Appendix: output tok/s of each run at equal concurrency per model";
  t.note = "Total over the run's GPUs (the study's \"node tok/s\").";
  t.columns = {{"c/model", "concurrency"}};
  for (const ArmGroup& g : set.groups) {
    t.columns.push_back({g.label + " (" + plural(g.models(), "model", "models") + ")",
                         g.key + "_tok_s", CellFormat::kFixed, 0});
  }
  for (int c : concurrencies(set)) {
    std::vector<Cell> cells = {double(c)};
    for (const ArmGroup& g : set.groups) cells.push_back(total_tok_s(g.at_concurrency(c)));
    t.rows.push_back(std::move(cells));
  }
  return t;
}

namespace {

std::string group_title(const ArmGroup& g) {
  std::string title = g.label;
  if (g.label != g.arm) title += " (" + g.arm + ")";
  return title + ": " + plural(g.models_per_gpu, "model", "models") + " per GPU on " +
         plural(g.gpus, "GPU", "GPUs") + ", " + plural(g.models(), "model", "models");
}

void add_metric_columns(Table& t) {
  t.columns.insert(t.columns.end(),
                   {{"TTFT p50 (ms)", "ttft_p50_ms", CellFormat::kFixed, 1},
                    {"ITL p50 (ms)", "itl_p50_ms", CellFormat::kFixed, 2},
                    {"tok/s per GPU", "tok_s_per_gpu", CellFormat::kFixed, 1},
                    {"tok/s total", "tok_s", CellFormat::kFixed, 0},
                    {"TTFT p50 pooled", "pooled_ttft_p50_ms", CellFormat::kFixed, 1},
                    {"ITL p50 pooled", "pooled_itl_p50_ms", CellFormat::kFixed, 2},
                    {"completed", "completed", CellFormat::kFixed, 0},
                    {"failed", "failed", CellFormat::kFixed, 0}});
}

void add_metric_cells(std::vector<Cell>& cells, const RunPoint& p) {
  cells.insert(cells.end(), {p.ttft_p50_ms, p.itl_p50_ms, p.tok_s_per_gpu(), p.output_tok_s,
                             p.pooled_ttft_p50_ms, p.pooled_itl_p50_ms, p.completed, p.failed});
}

}  // namespace

Table closed_loop_rows_table(const ArmGroup& group) {
  Table t;
  t.id = "points-" + group.key;
  t.title = group_title(group);
  t.note =
      "Closed loop. TTFT and ITL p50: mean of the models' p50s; pooled: p50 over all "
      "models' requests together.";
  t.columns = {{"c/model", "concurrency"}, {"req/GPU", "requests_per_gpu"}};
  add_metric_columns(t);
  for (const RunPoint& p : group.closed) {
    std::vector<Cell> cells = {double(*p.concurrency), double(p.requests_per_gpu())};
    add_metric_cells(cells, p);
    t.rows.push_back(std::move(cells));
  }
  return t;
}

Table open_loop_rows_table(const ArmGroup& group) {
  Table t;
  t.id = "points-open-" + group.key;
  t.title = group_title(group) + ", open loop";
  t.note =
      "Open loop: requests arrive at a fixed rate per model; \"cap\" is the concurrency "
      "limit per model, if any.";
  t.columns = {{"req/s per model", "request_rate", CellFormat::kFixed, 2}, {"cap", "concurrency"}};
  add_metric_columns(t);
  for (const RunPoint& p : group.open) {
    std::vector<Cell> cells = {p.request_rate,
                               p.concurrency ? Cell(double(*p.concurrency)) : std::nullopt};
    add_metric_cells(cells, p);
    t.rows.push_back(std::move(cells));
  }
  return t;
}

}  // namespace gpufrac
