// The tables of `gpufrac report`, built from grouped run points (the layout of the reference
// study, docs/result-format.md "How report derives its columns"):
//
// - throughput and latency: one table each per models-per-GPU value m of the shared arms. A row
//   per requests-resident-per-GPU value R at which the dedicated arm and at least one shared arm
//   were measured: shared at c = R/m vs dedicated at R (m x c). A shared arm without a point at R
//   prints "—"; points with no partner are named in the footnote, and where fractions trail
//   timeslice the throughput table's footnote says why (fractions_trail_note.h). Under a
//   throughput table of points that ran without a GPU, one line says what the CPU analogue does
//   and does not show.
// - cost: serving N models at equal concurrency per model (CostModel), a row per concurrency any
//   arm was measured at; change = shared $/1M / dedicated $/1M - 1.
// - appendix: each run's total tok/s at equal concurrency per model, a row per concurrency.
// - per-arm rows: every closed-loop point of one group; open-loop points in their own table.
//
// Tables print tok/s per GPU with 1 decimal, % with 1, TTFT ms with 1, ITL ms with 2, total tok/s
// as integers, $/1M with 4: at least the precision the study printed.
#pragma once

#include <vector>

#include "report/arm_groups.h"
#include "report/cost_model.h"
#include "report/table.h"

namespace gpufrac {

// Empty when the dedicated arm or every shared arm lacks closed-loop points (nothing to match).
std::vector<Table> throughput_tables(const ResultSet& set);
std::vector<Table> latency_tables(const ResultSet& set);
Table cost_table(const ResultSet& set, int models, const CostModel& cost);
Table appendix_table(const ResultSet& set);
Table closed_loop_rows_table(const ArmGroup& group);
Table open_loop_rows_table(const ArmGroup& group);  // for a group with open-loop points

}  // namespace gpufrac
