// The experiment's report: `gpufrac report` over the experiment's arm directories (the reference
// study's tables, cost table and plots, with the experiment's price and GPUs per node) followed by
// `extra_markdown` (the packing search's section, or empty), written to spec.output/report/ and
// printed. Reads files only.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "experiment/experiment_spec.h"

namespace gpufrac {

void write_experiment_report(const ExperimentSpec& spec, const std::vector<std::string>& arm_dirs,
                             const std::string& extra_markdown, std::ostream& out);

}  // namespace gpufrac
