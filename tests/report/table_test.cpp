// Cell formatting and the Markdown and CSV renderings of a table.
#include "report/table.h"

#include <gtest/gtest.h>

namespace gpufrac {
namespace {

Table sample() {
  Table t;
  t.id = "sample";
  t.title = "Sample";
  t.note = "A note.";
  t.columns = {{"c", "concurrency"},
               {"tok/s", "tok_s_per_gpu", CellFormat::kFixed, 1},
               {"%", "pct", CellFormat::kPercent, 1},
               {"change", "change_pct", CellFormat::kSignedPercent, 1}};
  t.rows = {{1.0, 101.125, 44.450549450549445, -22.86}, {2.0, std::nullopt, 60.0, 0.8}};
  t.footnote = "A footnote.";
  return t;
}

TEST(FormatCell, PrecisionPercentSignAndDash) {
  Column fixed{"x", "x", CellFormat::kFixed, 4};
  Column percent{"x", "x", CellFormat::kPercent, 1};
  Column change{"x", "x", CellFormat::kSignedPercent, 1};
  EXPECT_EQ(format_cell(fixed, 0.311757), "0.3118");
  EXPECT_EQ(format_cell(fixed, std::nullopt), "—");
  EXPECT_EQ(format_cell(fixed, std::numeric_limits<double>::quiet_NaN()), "—");
  EXPECT_EQ(format_cell(percent, 44.4505), "44.5%");
  EXPECT_EQ(format_cell(change, -22.86), "-22.9%");
  EXPECT_EQ(format_cell(change, 0.8), "+0.8%");
  EXPECT_EQ(format_cell(change, -0.01), "+0.0%");  // never "-0.0%"
  EXPECT_EQ(format_cell({"x", "x", CellFormat::kFixed, 0}, 1781.6), "1782");
}

TEST(RenderMarkdown, HeadingNoteRightAlignedTableFootnote) {
  EXPECT_EQ(render_markdown(sample()),
            "### Sample\n\nA note.\n\n"
            "| c | tok/s | % | change |\n"
            "|---:|---:|---:|---:|\n"
            "| 1 | 101.1 | 44.5% | -22.9% |\n"
            "| 2 | — | 60.0% | +0.8% |\n"
            "\nA footnote.\n");
}

TEST(RenderCsv, KeysFullPrecisionAndEmptyFieldsForMissing) {
  EXPECT_EQ(render_csv(sample()),
            "concurrency,tok_s_per_gpu,pct,change_pct\n"
            "1,101.125,44.450549450549445,-22.86\n"
            "2,,60,0.8\n");
}

}  // namespace
}  // namespace gpufrac
