#include "report/reference_study.h"

#include <stdexcept>

namespace gpufrac {

const StudyRun* StudyArm::at_concurrency(int concurrency) const {
  for (const StudyRun& run : runs) {
    if (run.concurrency == concurrency) return &run;
  }
  return nullptr;
}

const StudyArm& ReferenceStudy::arm(const std::string& name) const {
  for (const StudyArm& a : arms) {
    if (a.arm == name) return a;
  }
  throw std::logic_error("reference study has no arm '" + name + "'");
}

const StudyMatchedRow* ReferenceStudy::at_requests_per_gpu(int requests_per_gpu) const {
  for (const StudyMatchedRow& row : matched_rows) {
    if (row.requests_per_gpu == requests_per_gpu) return &row;
  }
  return nullptr;
}

std::optional<double> ReferenceStudy::percent_of_baseline(const std::string& arm_name,
                                                          int requests_per_gpu) const {
  const StudyMatchedRow* row = at_requests_per_gpu(requests_per_gpu);
  if (!row) return std::nullopt;
  if (arm_name == "timeslice") return row->timeslice_pct_of_baseline;
  if (arm_name == "fractions") return row->fractions_pct_of_baseline;
  return std::nullopt;
}

std::optional<double> ReferenceStudy::equal_concurrency_percent(const std::string& arm_name,
                                                                int concurrency) const {
  const StudyRun* shared = arm(arm_name).at_concurrency(concurrency);
  const StudyRun* base = arm("dedicated").at_concurrency(concurrency);
  if (!shared || !base) return std::nullopt;
  return 100.0 * shared->node_tok_s / base->node_tok_s;
}

const ReferenceStudy& reference_study() {
  // Typed from docs/reference-study.md: "Per arm" (TTFT p50 / ITL p50 / tok/s per GPU),
  // "Node tok/s at equal c per model" and "Throughput" (HAMi % and fractions %).
  static const ReferenceStudy study{
      "8x A100-SXM4-40GB, vLLM 0.23 through Dynamo 1.3, Qwen3-4B bf16, ISL 2048 / OSL 256, "
      "closed loop at c = 1..32 per model",
      8,
      2,
      {{"dedicated",
        "baseline",
        1,
        {{1, 103.6, 8.58, 111.4, 891},
         {2, 48.6, 8.61, 227.5, 1820},
         {4, 49.0, 9.13, 429.1, 3433},
         {8, 331.5, 11.00, 671.2, 5370},
         {16, 431.0, 15.56, 929.2, 7434},
         {32, 481.8, 26.20, 1141.8, 9134}}},
       {"timeslice",
        "HAMi",
        2,
        {{1, 216, 19.0, 101.1, 809},
         {2, 374, 19.3, 193.0, 1544},
         {4, 571, 21.1, 343.9, 2751},
         {8, 731, 25.2, 572.0, 4576},
         {16, 777, 35.6, 831.4, 6651},
         {32, 1702, 55.9, 943.0, 7544}}},
       {"fractions",
        "fractions",
        2,
        {{1, 185, 13.2, 144.4, 1155},
         {2, 347, 14.1, 259.2, 2074},
         {4, 549, 15.4, 456.1, 3649},
         {8, 739, 19.3, 722.8, 5782},
         {16, 786, 28.9, 1003.4, 8027},
         {32, 2159, 39.2, 1132.4, 9059}}}},
      {{2, 44.5, 63.5}, {4, 45.0, 60.4}, {8, 51.2, 68.0}, {16, 61.6, 77.8}, {32, 72.8, 87.9}}};
  return study;
}

}  // namespace gpufrac
