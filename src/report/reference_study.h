// The reference study's published numbers (NVIDIA Dynamo "GPU Sharing", summarised in
// docs/reference-study.md): the one copy of them in code, used by the
// "vs reference study" section of `gpufrac report`.
//
// Each run is stored as printed: TTFT p50 and ITL p50 (ms), tok/s per GPU (1 decimal) and node
// tok/s (the appendix integer, all 8 GPUs). The throughput table's "% of baseline" columns are
// stored as printed too (the study computed them from unrounded totals). The equal-concurrency
// ratios (appendix view) are derived from the node tok/s integers. tests/report/
// reference_study_test.cpp checks every number here against tests/data/reference-study/ (the
// summaries the golden test feeds report), so the two copies cannot drift. Immutable data.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace gpufrac {

struct StudyRun {
  int concurrency = 1;  // per model
  double ttft_p50_ms = 0;
  double itl_p50_ms = 0;
  double tok_s_per_gpu = 0;  // as printed, 1 decimal
  double node_tok_s = 0;     // the appendix's integer: all 8 GPUs
};

struct StudyArm {
  std::string arm;   // our arm: "dedicated" | "timeslice" | "fractions"
  std::string name;  // the study's: "baseline" | "HAMi" | "fractions"
  int models_per_gpu = 1;
  std::vector<StudyRun> runs;  // c = 1, 2, 4, ..., 32 per model

  const StudyRun* at_concurrency(int concurrency) const;  // nullptr when not run
};

// One row of the study's throughput table (shared arms at c vs baseline at 2c).
struct StudyMatchedRow {
  int requests_per_gpu = 0;
  double timeslice_pct_of_baseline = 0;  // "HAMi %", as printed
  double fractions_pct_of_baseline = 0;  // "fractions %", as printed
};

struct ReferenceStudy {
  std::string setup;  // one line: hardware, engine, model, workload
  int gpus = 8;
  int shared_models_per_gpu = 2;
  std::vector<StudyArm> arms;                 // dedicated, timeslice, fractions
  std::vector<StudyMatchedRow> matched_rows;  // 2, 4, 8, 16, 32 requests per GPU

  const StudyArm& arm(const std::string& arm) const;  // one of the three arms
  const StudyMatchedRow* at_requests_per_gpu(int requests_per_gpu) const;
  // The printed "% of baseline" of a shared arm at this many requests per GPU; missing for a
  // row the study did not print.
  std::optional<double> percent_of_baseline(const std::string& arm, int requests_per_gpu) const;
  // Appendix view: a shared arm's node tok/s at c per model / the baseline's at c, in percent
  // (both ran on 8 GPUs, so this is also the ratio of tok/s per GPU); missing for a c not run.
  std::optional<double> equal_concurrency_percent(const std::string& arm, int concurrency) const;
};

const ReferenceStudy& reference_study();

}  // namespace gpufrac
