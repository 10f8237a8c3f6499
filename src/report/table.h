// A report table: titled numeric columns, rows of optional numbers, and its two renderings —
// Markdown (numbers rounded to each column's printed precision, a missing value as "—") and CSV
// (header of stable keys, numbers at full double precision, a missing value as an empty field).
// Percent columns hold percent units (44.45 prints "44.5%"). Plain values, no shared state.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace gpufrac {

enum class CellFormat {
  kFixed,          // decimals after the point: 227.5
  kPercent,        // 44.5%
  kSignedPercent,  // -22.9%, +0.8%
};

struct Column {
  std::string title;  // Markdown header
  std::string key;    // CSV header: lower case, no spaces
  CellFormat format = CellFormat::kFixed;
  int decimals = 0;
};

using Cell = std::optional<double>;

struct Table {
  std::string id;     // file stem of its CSV, e.g. "throughput-m2"
  std::string title;  // Markdown heading
  std::string note;   // paragraph above the table; may be empty
  std::vector<Column> columns;
  std::vector<std::vector<Cell>> rows;  // each row has one cell per column
  std::string footnote;                 // paragraph below the table; may be empty
};

inline constexpr const char* kMissingCell = "—";

std::string format_cell(const Column& column, const Cell& cell);
std::string render_markdown(const Table& table);
std::string render_csv(const Table& table);

}  // namespace gpufrac
