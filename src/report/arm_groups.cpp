#include "report/arm_groups.h"

#include <algorithm>
#include <set>
#include <tuple>

#include "common/error.h"
#include "common/run_label.h"

namespace gpufrac {
namespace {

constexpr const char* kArms[] = {"dedicated", "timeslice", "fractions"};

int arm_order(const std::string& arm) {
  for (int i = 0; i < 3; ++i) {
    if (arm == kArms[i]) return i;
  }
  return 3;
}

std::string describe(const RunPoint& p) {
  std::string what = run_label(p.arm, p.models_per_gpu) + " on " +
                     std::to_string(p.gpus) + " GPU(s) at ";
  if (p.closed_loop) return what + "c" + std::to_string(*p.concurrency);
  char rate[32];
  std::snprintf(rate, sizeof rate, "%g", *p.request_rate);
  return what + "rate " + rate;
}

}  // namespace

const RunPoint* ArmGroup::at_concurrency(int concurrency) const {
  for (const RunPoint& p : closed) {
    if (p.concurrency == concurrency) return &p;
  }
  return nullptr;
}

const RunPoint* ArmGroup::at_requests_per_gpu(int requests_per_gpu) const {
  for (const RunPoint& p : closed) {
    if (p.requests_per_gpu() == requests_per_gpu) return &p;
  }
  return nullptr;
}

const ArmGroup* ResultSet::dedicated() const {
  for (const ArmGroup& g : groups) {
    if (g.dedicated()) return &g;
  }
  return nullptr;
}

std::vector<const ArmGroup*> ResultSet::shared() const {
  std::vector<const ArmGroup*> out;
  for (const ArmGroup& g : groups) {
    if (!g.dedicated()) out.push_back(&g);
  }
  return out;
}

ArmLabels parse_arm_labels(const std::vector<std::string>& specs) {
  ArmLabels labels;
  for (const std::string& spec : specs) {
    size_t eq = spec.find('=');
    std::string arm = spec.substr(0, eq);
    if (eq == std::string::npos || eq + 1 == spec.size() || arm_order(arm) == 3) {
      throw UsageError("--label '" + spec +
                       "': write ARM=TEXT with ARM one of dedicated, timeslice, fractions "
                       "(e.g. --label timeslice=HAMi)");
    }
    labels[arm] = spec.substr(eq + 1);
  }
  return labels;
}

ResultSet group_run_points(const std::vector<RunPoint>& points, const ArmLabels& labels) {
  ResultSet set;
  for (const RunPoint& p : points) {
    auto it = std::find_if(set.groups.begin(), set.groups.end(), [&](const ArmGroup& g) {
      return g.arm == p.arm && g.models_per_gpu == p.models_per_gpu && g.gpus == p.gpus;
    });
    if (it == set.groups.end()) {
      set.groups.push_back({p.arm, p.models_per_gpu, p.gpus, "", "", {}, {}});
      it = std::prev(set.groups.end());
    }
    std::vector<RunPoint>& same_load = p.closed_loop ? it->closed : it->open;
    for (const RunPoint& q : same_load) {
      if (q.concurrency == p.concurrency && q.request_rate == p.request_rate) {
        throw UsageError("two run points for " + describe(p) + ": " + q.path + " and " + p.path +
                         " (give only one of them to report)");
      }
    }
    same_load.push_back(p);
  }

  std::sort(set.groups.begin(), set.groups.end(), [](const ArmGroup& a, const ArmGroup& b) {
    return std::make_tuple(arm_order(a.arm), a.models_per_gpu, a.gpus) <
           std::make_tuple(arm_order(b.arm), b.models_per_gpu, b.gpus);
  });
  int dedicated_groups = 0;
  std::string dedicated_names;
  for (ArmGroup& g : set.groups) {
    std::sort(g.closed.begin(), g.closed.end(),
              [](const RunPoint& a, const RunPoint& b) { return *a.concurrency < *b.concurrency; });
    std::sort(g.open.begin(), g.open.end(), [](const RunPoint& a, const RunPoint& b) {
      return *a.request_rate < *b.request_rate;
    });
    if (g.dedicated()) {
      ++dedicated_groups;
      dedicated_names += (dedicated_names.empty() ? "" : " and ") + std::string("m") +
                         std::to_string(g.models_per_gpu) + " on " + std::to_string(g.gpus) +
                         " GPU(s)";
    }
  }
  if (dedicated_groups > 1) {
    throw UsageError("the inputs hold more than one dedicated arm (" + dedicated_names +
                     "); report compares against one baseline: give the result directories of one");
  }

  // Labels and keys name models per GPU where the arm ran with several, and the GPU count where
  // the arm ran with several at the same models per GPU.
  for (ArmGroup& g : set.groups) {
    std::set<int> models_per_gpu;
    int same_models_per_gpu = 0;
    for (const ArmGroup& other : set.groups) {
      if (other.arm != g.arm) continue;
      models_per_gpu.insert(other.models_per_gpu);
      if (other.models_per_gpu == g.models_per_gpu) ++same_models_per_gpu;
    }
    auto label = labels.find(g.arm);
    g.label = label == labels.end() ? g.arm : label->second;
    g.key = run_key(g.arm, g.models_per_gpu);
    if (models_per_gpu.size() > 1) g.label += models_per_gpu_suffix(g.models_per_gpu);
    if (same_models_per_gpu > 1) {
      g.label += " (" + std::to_string(g.gpus) + (g.gpus == 1 ? " GPU)" : " GPUs)");
      g.key += "_g" + std::to_string(g.gpus);
    }
  }
  return set;
}

}  // namespace gpufrac
