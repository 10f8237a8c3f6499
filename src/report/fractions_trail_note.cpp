#include "report/fractions_trail_note.h"

#include <cstdio>

namespace gpufrac {
namespace {

std::string percent(double fraction) {
  char text[16];
  std::snprintf(text, sizeof text, "%.0f%%", 100.0 * fraction);
  return text;
}

std::string joined(const std::vector<std::string>& items) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) out += (i ? ", " : "") + items[i];
  return out;
}

}  // namespace

std::string fractions_trail_note(const ArmGroup& dedicated, const ArmGroup& timeslice,
                                 const ArmGroup& fractions,
                                 const std::vector<int>& requests_per_gpu) {
  const int m = fractions.models_per_gpu;
  std::vector<std::string> explained_rows, unexplained_rows, kept, kept_together, taking_turns;
  for (int r : requests_per_gpu) {
    const RunPoint* f = fractions.at_requests_per_gpu(r);
    const RunPoint* t = timeslice.at_requests_per_gpu(r);
    if (!f || !t || !f->tok_s_per_gpu() || !t->tok_s_per_gpu()) continue;
    if (*f->tok_s_per_gpu() > *t->tok_s_per_gpu()) continue;
    const RunPoint* alone = dedicated.at_concurrency(*f->concurrency);
    if (!alone || !alone->tok_s_per_gpu() || *alone->tok_s_per_gpu() <= 0) {
      unexplained_rows.push_back(std::to_string(r));
      continue;
    }
    double share = *f->tok_s_per_gpu() / m / *alone->tok_s_per_gpu();
    explained_rows.push_back(std::to_string(r));
    kept.push_back(percent(share));
    kept_together.push_back(percent(m * share));
    taking_turns.push_back(percent(*t->tok_s_per_gpu() / *alone->tok_s_per_gpu()));
  }
  std::string line;
  if (!explained_rows.empty()) {
    std::string share = "1/" + std::to_string(m);
    line = "Why " + fractions.label + " trail " + timeslice.label + " at " +
           joined(explained_rows) + " req/GPU: on " + share + " of the device a model made " +
           joined(kept) + " of its tok/s alone on all of it (" + fractions.label + " / " +
           dedicated.label + " at the same c per model), so " + std::to_string(m) +
           " on shares made " + joined(kept_together) + " of one alone, and " + std::to_string(m) +
           " taking turns " + joined(taking_turns) +
           "; shares win where a model alone leaves much of the device idle (a small batch on a "
           "GPU's SMs keeps well above " +
           share + " of its speed on " + share + " of them), not where its step keeps it busy.";
  }
  if (!unexplained_rows.empty()) {
    line += (line.empty() ? "" : " ") + fractions.label +
            (line.empty() ? " trail " : " also trail ") + timeslice.label + " at " +
            joined(unexplained_rows) + " req/GPU, where " + dedicated.label +
            " has no point at the same c per model to say why.";
  }
  return line;
}

}  // namespace gpufrac
