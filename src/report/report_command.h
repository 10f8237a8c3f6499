// `gpufrac report`: reads the summary.json files under result directories and writes the
// reference study's tables (Markdown and CSV) and two SVG plots; prints the Markdown to stdout.
#pragma once

namespace gpufrac {

int report_command(int argc, char** argv);  // argv[0] is "report"

}  // namespace gpufrac
