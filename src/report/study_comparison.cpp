#include "report/study_comparison.h"

#include <algorithm>

#include "common/run_label.h"
#include "report/reference_study.h"

namespace gpufrac {
namespace {

// One of our shared groups at the study's models per GPU, or a placeholder (group == nullptr)
// for an arm we did not run there.
struct SharedColumn {
  std::string arm;
  const ArmGroup* group = nullptr;
  std::string label;
  std::string key;
};

std::vector<SharedColumn> shared_columns(const ResultSet& set, int models_per_gpu) {
  std::vector<SharedColumn> columns;
  for (const char* arm : {"timeslice", "fractions"}) {
    size_t before = columns.size();
    for (const ArmGroup* g : set.shared()) {
      if (g->arm == arm && g->models_per_gpu == models_per_gpu && !g->closed.empty())
        columns.push_back({arm, g, g->label, g->key});
    }
    if (columns.size() == before) {
      columns.push_back({arm, nullptr, arm, run_key(arm, models_per_gpu)});
    }
  }
  return columns;
}

// Whether column i is the last of its arm: the study's column for that arm follows it (once per
// arm, so CSV keys stay unique when an arm ran on several GPU counts).
bool last_of_arm(const std::vector<SharedColumn>& columns, size_t i) {
  return i + 1 == columns.size() || columns[i + 1].arm != columns[i].arm;
}

Cell percent(const Cell& numerator, const Cell& denominator) {
  if (!numerator || !denominator || *denominator == 0) return std::nullopt;
  return 100.0 * *numerator / *denominator;
}

Cell tok_s_per_gpu(const RunPoint* p) {
  return p ? p->tok_s_per_gpu() : std::nullopt;
}

const RunPoint* at_requests(const ArmGroup* g, int requests_per_gpu) {
  return g ? g->at_requests_per_gpu(requests_per_gpu) : nullptr;
}

const RunPoint* at_concurrency(const ArmGroup* g, int concurrency) {
  return g ? g->at_concurrency(concurrency) : nullptr;
}

// The study's run of `arm` in the row of this many requests per GPU.
const StudyRun* study_run(const StudyArm& arm, int requests_per_gpu) {
  if (requests_per_gpu % arm.models_per_gpu != 0) return nullptr;
  return arm.at_concurrency(requests_per_gpu / arm.models_per_gpu);
}

std::string gpu_names(const ArmGroup& dedicated, const std::vector<SharedColumn>& shared) {
  std::vector<std::string> names;
  std::vector<const ArmGroup*> groups = {&dedicated};
  for (const SharedColumn& c : shared) {
    if (c.group) groups.push_back(c.group);
  }
  for (const ArmGroup* g : groups) {
    for (const auto* points : {&g->closed, &g->open}) {
      for (const RunPoint& p : *points) {
        if (!p.gpu_name.empty() && std::find(names.begin(), names.end(), p.gpu_name) == names.end())
          names.push_back(p.gpu_name);
      }
    }
  }
  std::string text;
  for (size_t i = 0; i < names.size(); ++i) text += (i ? ", " : "") + names[i];
  return text;
}

Table percent_of_baseline_table(const ReferenceStudy& study, const ArmGroup& base,
                                const std::vector<SharedColumn>& shared) {
  Table t;
  t.id = "vs-study-throughput";
  t.title = "vs reference study: tok/s per GPU, % of baseline";
  t.note = "Ours: a shared arm's tok/s per GPU at c per model / " + base.label +
           " tok/s per GPU at 2 x c (rows matched on requests resident per GPU, as in the "
           "study). Study: its printed HAMi % and fractions % (vs its baseline). timeslice is our "
           "HAMi-equivalent (time-sliced compute, capped memory).";
  t.columns = {{"req/GPU", "requests_per_gpu"}};
  for (size_t i = 0; i < shared.size(); ++i) {
    const SharedColumn& c = shared[i];
    t.columns.push_back({c.label + " %", c.key + "_pct_of_dedicated", CellFormat::kPercent, 1});
    if (last_of_arm(shared, i)) {
      t.columns.push_back({"study " + study.arm(c.arm).name + " %",
                           "study_" + c.arm + "_pct_of_baseline", CellFormat::kPercent, 1});
    }
  }
  for (const StudyMatchedRow& row : study.matched_rows) {
    const int r = row.requests_per_gpu;
    std::vector<Cell> cells = {double(r)};
    for (size_t i = 0; i < shared.size(); ++i) {
      cells.push_back(percent(tok_s_per_gpu(at_requests(shared[i].group, r)),
                              tok_s_per_gpu(base.at_requests_per_gpu(r))));
      if (last_of_arm(shared, i)) cells.push_back(study.percent_of_baseline(shared[i].arm, r));
    }
    t.rows.push_back(std::move(cells));
  }
  return t;
}

Table latency_table(const ReferenceStudy& study, const ArmGroup& base,
                    const std::vector<SharedColumn>& shared) {
  // Ours, then the study's after the last of each arm's groups.
  struct ArmColumn {
    const ArmGroup* group;
    std::string label, key;
    const StudyArm* study_arm;
    bool study_follows;
  };
  std::vector<ArmColumn> arms = {{&base, base.label, base.key, &study.arm("dedicated"), true}};
  for (size_t i = 0; i < shared.size(); ++i) {
    const SharedColumn& c = shared[i];
    arms.push_back({c.group, c.label, c.key, &study.arm(c.arm), last_of_arm(shared, i)});
  }

  Table t;
  t.id = "vs-study-latency";
  t.title = "vs reference study: TTFT p50 (ms) and ITL p50 (ms)";
  t.note =
      "Same rows as the % of baseline table: each arm at the concurrency that puts this many "
      "requests on a GPU. Both sides report a shared arm's latency as the mean of its models' "
      "p50s.";
  t.columns = {{"req/GPU", "requests_per_gpu"}};
  for (const char* metric : {"TTFT", "ITL"}) {
    bool ttft = std::string(metric) == "TTFT";
    std::string key = ttft ? "_ttft_p50_ms" : "_itl_p50_ms";
    int decimals = ttft ? 1 : 2;
    for (const ArmColumn& a : arms) {
      t.columns.push_back(
          {std::string(metric) + " " + a.label, a.key + key, CellFormat::kFixed, decimals});
      if (!a.study_follows) continue;
      t.columns.push_back({"study " + std::string(metric) + " " + a.study_arm->name,
                           "study_" + a.study_arm->arm + key, CellFormat::kFixed, decimals});
    }
  }
  for (const StudyMatchedRow& row : study.matched_rows) {
    const int r = row.requests_per_gpu;
    std::vector<Cell> cells = {double(r)};
    for (bool ttft : {true, false}) {
      for (const ArmColumn& a : arms) {
        const RunPoint* ours = at_requests(a.group, r);
        cells.push_back(ours ? (ttft ? ours->ttft_p50_ms : ours->itl_p50_ms) : std::nullopt);
        if (!a.study_follows) continue;
        const StudyRun* theirs = study_run(*a.study_arm, r);
        cells.push_back(theirs ? Cell(ttft ? theirs->ttft_p50_ms : theirs->itl_p50_ms)
                               : std::nullopt);
      }
    }
    t.rows.push_back(std::move(cells));
  }
  return t;
}

Table equal_concurrency_table(const ReferenceStudy& study, const ArmGroup& base,
                              const std::vector<SharedColumn>& shared) {
  Table t;
  t.id = "vs-study-equal-concurrency";
  t.title = "vs reference study: equal concurrency per model, shared / " + base.label;
  t.note = "The study's appendix view: at the same c per model, a shared arm's tok/s per GPU / " +
           base.label +
           " tok/s per GPU (100% = packing costs nothing). Study: its node tok/s ratio (every "
           "arm ran on 8 GPUs), from the appendix's numbers.";
  t.columns = {{"c/model", "concurrency"}};
  for (size_t i = 0; i < shared.size(); ++i) {
    const SharedColumn& c = shared[i];
    t.columns.push_back(
        {c.label + " %", c.key + "_pct_of_dedicated_equal_c", CellFormat::kPercent, 1});
    if (last_of_arm(shared, i)) {
      t.columns.push_back({"study " + study.arm(c.arm).name + " %",
                           "study_" + c.arm + "_pct_of_baseline_equal_c", CellFormat::kPercent, 1});
    }
  }
  for (const StudyRun& run : study.arm("dedicated").runs) {
    const int c = run.concurrency;
    std::vector<Cell> cells = {double(c)};
    for (size_t i = 0; i < shared.size(); ++i) {
      cells.push_back(percent(tok_s_per_gpu(at_concurrency(shared[i].group, c)),
                              tok_s_per_gpu(base.at_concurrency(c))));
      if (last_of_arm(shared, i))
        cells.push_back(study.equal_concurrency_percent(shared[i].arm, c));
    }
    t.rows.push_back(std::move(cells));
  }
  return t;
}

}  // namespace

StudyComparison compare_with_reference_study(const ResultSet& set) {
  const ReferenceStudy& study = reference_study();
  const ArmGroup* base = set.dedicated();
  if (!base || base->closed.empty()) return {};
  std::vector<SharedColumn> shared = shared_columns(set, study.shared_models_per_gpu);
  if (std::none_of(shared.begin(), shared.end(), [](const SharedColumn& c) { return c.group; }))
    return {};

  StudyComparison comparison;
  std::string gpus = gpu_names(*base, shared);
  comparison.note =
      "The reference study (NVIDIA Dynamo, \"GPU Sharing\") ran " + study.setup + ". Ours ran on " +
      (gpus.empty() ? std::string("a GPU the summaries do not name (no machine.gpu)")
                    : gpus + " (machine.gpu of the summaries)") +
      ". Only shared arms at the study's " + std::to_string(study.shared_models_per_gpu) +
      " models per GPU are compared; rows are the study's, and a row or arm we did not run "
      "prints \"—\". Report does not read the model or ISL/OSL: compare runs of the study's "
      "workload. tok/s per GPU and % make different GPU counts comparable; absolute latencies "
      "also reflect the GPU and the engine.";
  comparison.tables = {percent_of_baseline_table(study, *base, shared),
                       latency_table(study, *base, shared),
                       equal_concurrency_table(study, *base, shared)};
  return comparison;
}

}  // namespace gpufrac
