#include "report/report_command.h"

#include <iostream>

#include "common/cli_args.h"
#include "common/error.h"
#include "common/log.h"
#include "common/strings.h"
#include "report/report.h"

namespace gpufrac {
namespace {

CliArgs report_args() {
  CliArgs args("gpufrac report RESULT_DIR... [OPTIONS]",
               "Tables of the reference study (tok/s per GPU and % of baseline, TTFT and ITL p50,\n"
               "cost per 1M output tokens, node tok/s), our numbers beside the study's, open-loop\n"
               "latency vs offered rate with the largest rate meeting an SLO, and SVG plots from\n"
               "the run points that gpufrac bench wrote. Reads summary.json files only. Writes\n"
               "report.md, one CSV per table and the plots into --out, and prints the Markdown\n"
               "to stdout.");
  args.positional("RESULT_DIR...",
                  "Directories searched recursively for summary.json (a bench --out directory, "
                  "an arm's directory, one run point, or a summary.json itself). Points are "
                  "grouped by config.arm (dedicated = the baseline; timeslice and fractions are "
                  "the shared arms), config.models_per_gpu and config.gpus.")
      .option("out", "DIR", "Where report.md, the CSV files and the SVG plots go.",
              "gpufrac-report")
      .option("price", "PRICE", "Price of one node-hour, any currency, for the cost tables.",
              "1.00")
      .option("gpus-per-node", "N",
              "GPUs in one node: an arm with m models per GPU fits N x m models on a node.", "8")
      .option("models", "N[,N...]",
              "Number of models to serve in a cost table; one table per N. Default: the model "
              "count of the largest run (models per GPU x GPUs).",
              std::nullopt, /*repeated=*/true)
      .option("label", "ARM=TEXT",
              "Print an arm under another name in tables and plots, e.g. dedicated=baseline, "
              "timeslice=HAMi (CSV keys keep the arm names).",
              std::nullopt, /*repeated=*/true)
      .option("slo-ttft-p90-ms", "MS",
              "SLO for open-loop points: TTFT p90 at most MS milliseconds (with --slo-itl-p50-ms "
              "and no failed request).",
              "1000")
      .option("slo-itl-p50-ms", "MS", "SLO for open-loop points: ITL p50 at most MS milliseconds.",
              "30")
      .section(
          "How rows are matched",
          "  Throughput, TTFT and ITL rows are matched on requests resident per GPU\n"
          "  (models per GPU x concurrency per model): a 2-models-per-GPU arm at c = 4 sits\n"
          "  in the row of 8 req/GPU with the dedicated arm at c = 8. A row needs a dedicated\n"
          "  point and at least one shared point; a shared arm missing there prints \"—\".\n"
          "  Cost and appendix rows are matched on concurrency per model.")
      .section("How the cost is computed",
               "  nodes = ceil(N / (gpus-per-node x models per GPU))\n"
               "  tok/s = the run's output tok/s x N / (models in the run)\n"
               "  $/1M  = price x nodes / (tok/s x 3600) x 1e6\n"
               "  change = shared $/1M / dedicated $/1M - 1")
      .section(
          "vs reference study",
          "  Printed when the inputs hold a dedicated arm and a shared arm at 2 models per GPU\n"
          "  (the study's setup): our % of baseline (timeslice is the HAMi-equivalent, and\n"
          "  fractions), TTFT and ITL p50 per arm, and shared / dedicated tok/s per GPU at equal\n"
          "  c per model, each beside the study's number (8x A100-SXM4-40GB, vLLM). Rows are\n"
          "  the study's (2..32 req/GPU, c = 1..32); one we did not run prints \"—\".")
      .section(
          "Open loop and the SLO",
          "  For each arm with open-loop points: TTFT p50/p90/p99, ITL p50/p90, served req/s,\n"
          "  output tok/s and failed requests per offered rate (req/s per model). p90/p99 are\n"
          "  the mean of the models' own percentiles, as the study does for p50. A rate meets\n"
          "  the SLO when TTFT p90 <= --slo-ttft-p90-ms, ITL p50 <= --slo-itl-p50-ms and no\n"
          "  request failed; the report names the largest such rate per arm, or says \"none of\n"
          "  the measured rates\". Example:\n"
          "\n"
          "    gpufrac report results/ --slo-ttft-p90-ms 1000 --slo-itl-p50-ms 30\n"
          "\n"
          "  If fractions-m8 (8 models per GPU) measured TTFT p90 640 ms and ITL p50 21.5 ms\n"
          "  at 0.1 req/s per model and TTFT p90 1850 ms at 0.2, the report says: largest\n"
          "  offered rate meeting the SLO: 0.1 req/s per model.")
      .section(
          "Files written to --out",
          "  report.md                 everything printed to stdout, with the plots linked\n"
          "  throughput-mM.csv         tok/s per GPU and % of baseline, shared arms at M per GPU\n"
          "  latency-mM.csv            TTFT and ITL p50 and their % of baseline, same rows\n"
          "  cost-N-models.csv         one per --models N\n"
          "  appendix.csv              each run's total tok/s at equal concurrency per model\n"
          "  points-ARM_mM.csv         every point of one arm (points-open-... for open loop)\n"
          "  vs-study-throughput.csv, vs-study-latency.csv, vs-study-equal-concurrency.csv\n"
          "  open-loop-ARM_mM.csv      latency vs offered rate of one arm\n"
          "  tok-s-per-gpu-vs-requests-per-gpu.svg, itl-p50-vs-tok-s-per-gpu.svg\n"
          "  itl-vs-tok-s-per-gpu-ARM_mM.svg  ITL p50/p90 vs tok/s per GPU of one arm\n"
          "  CSV numbers are unrounded; a missing value is an empty field (\"—\" in Markdown).")
      .section(
          "Example",
          "  gpufrac report tests/data/reference-study --out /tmp/study --models 16 \\\n"
          "      --price 1.00 --gpus-per-node 8 --label dedicated=baseline --label timeslice=HAMi\n"
          "\n"
          "  reproduces the study's tables. Its dedicated run served 8 models (1 per GPU, 8\n"
          "  GPUs) at 891 tok/s at c = 1: 111.4 tok/s per GPU. Serving 16 models that way\n"
          "  needs ceil(16 / (8 x 1)) = 2 nodes making 891 x 16/8 = 1782 tok/s, so\n"
          "  1.00 x 2 / (1782 x 3600) x 1e6 = 0.3118 per 1M tokens. Fractions (2 per GPU,\n"
          "  16 models, 1155 tok/s) needs 1 node: 0.2405, a change of -22.9%. Its c = 1 point\n"
          "  (2 req/GPU) sits in the row of the dedicated c = 2 point (227.5 tok/s per GPU):\n"
          "  144.4 / 227.5 = 63.5% of baseline.\n"
          "\n"
          "  gpufrac report results/ --out results/report --models 16,64 --price 98.32\n"
          "\n"
          "  prices 16 and 64 models at 98.32 per node-hour from a gpufrac bench --out\n"
          "  directory holding dedicated-m1/, timeslice-m2/ and fractions-m2/.");
  return args;
}

}  // namespace

int report_command(int argc, char** argv) {
  CliArgs args = report_args();
  if (!args.parse(argc, argv)) return 0;

  ReportOptions options;
  options.cost.price_per_node_hour = parse_double(args.get("price"), "--price");
  if (options.cost.price_per_node_hour <= 0) {
    throw UsageError("--price must be positive: the price of one node-hour, e.g. --price 1.00");
  }
  int64_t gpus_per_node = parse_int(args.get("gpus-per-node"), "--gpus-per-node");
  if (gpus_per_node < 1 || gpus_per_node > 1024) {
    throw UsageError("--gpus-per-node must be between 1 and 1024, e.g. --gpus-per-node 8");
  }
  options.cost.gpus_per_node = int(gpus_per_node);
  for (const std::string& list : args.get_all("models")) {
    for (int n : parse_int_list(list, "--models")) {
      if (n < 1) throw UsageError("--models takes positive counts, e.g. --models 16,64");
      options.cost_models.push_back(n);
    }
  }
  options.slo.ttft_p90_ms = parse_double(args.get("slo-ttft-p90-ms"), "--slo-ttft-p90-ms");
  options.slo.itl_p50_ms = parse_double(args.get("slo-itl-p50-ms"), "--slo-itl-p50-ms");
  if (!(options.slo.ttft_p90_ms > 0) || !(options.slo.itl_p50_ms > 0)) {
    throw UsageError(
        "--slo-ttft-p90-ms and --slo-itl-p50-ms must be positive milliseconds, e.g. "
        "--slo-ttft-p90-ms 1000 --slo-itl-p50-ms 30");
  }

  ResultSet set = group_run_points(find_run_points(args.positionals()),
                                   parse_arm_labels(args.get_all("label")));
  Report report = build_report(set, options);
  std::vector<std::string> written = write_report(report, args.get("out"));
  std::cout << report.markdown;
  log_info("report: wrote ", written.size(), " files (report.md, ", report.tables.size(), " CSV, ",
           report.plots.size(), " SVG) to ", args.get("out"));
  return 0;
}

}  // namespace gpufrac
