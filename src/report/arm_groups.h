// Run points grouped into arms: one ArmGroup per (arm, models per GPU, GPU count), each holding
// its closed-loop points by concurrency and its open-loop points by request rate.
//
// At most one dedicated group may be present: it is the baseline every shared group is compared
// with. Two points of one group at the same concurrency (or rate) are a UsageError naming both
// files — report never averages or picks silently. Labels are what tables and plots print
// ("dedicated", or what --label dedicated=baseline says); keys are what CSV columns use and never
// change with labels. Plain values, no shared state.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "report/run_point.h"

namespace gpufrac {

struct ArmGroup {
  std::string arm;
  int models_per_gpu = 1;
  int gpus = 1;
  std::string label;  // e.g. "fractions", "fractions-m4" (arm ran at several models per GPU),
                      // "fractions (1 GPU)" (arm ran at one models per GPU on several GPU counts)
  std::string key;    // e.g. "fractions_m2", "fractions_m2_g1"
  std::vector<RunPoint> closed;  // ascending concurrency, one point each
  std::vector<RunPoint> open;    // ascending request rate, one point each

  bool dedicated() const { return arm == "dedicated"; }
  int models() const { return models_per_gpu * gpus; }
  const RunPoint* at_concurrency(int concurrency) const;
  const RunPoint* at_requests_per_gpu(int requests_per_gpu) const;
};

struct ResultSet {
  std::vector<ArmGroup> groups;  // dedicated first, then timeslice, then fractions

  const ArmGroup* dedicated() const;  // nullptr when no dedicated arm was given
  std::vector<const ArmGroup*> shared() const;
};

// arm name -> printed label, from "--label timeslice=HAMi" style specs.
using ArmLabels = std::map<std::string, std::string>;
ArmLabels parse_arm_labels(const std::vector<std::string>& specs);

ResultSet group_run_points(const std::vector<RunPoint>& points, const ArmLabels& labels);

}  // namespace gpufrac
