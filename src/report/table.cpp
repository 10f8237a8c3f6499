#include "report/table.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <sstream>

namespace gpufrac {

std::string format_cell(const Column& column, const Cell& cell) {
  if (!cell || !std::isfinite(*cell)) return kMissingCell;
  char text[64];
  switch (column.format) {
    case CellFormat::kFixed:
      std::snprintf(text, sizeof text, "%.*f", column.decimals, *cell);
      break;
    case CellFormat::kPercent:
      std::snprintf(text, sizeof text, "%.*f%%", column.decimals, *cell);
      break;
    case CellFormat::kSignedPercent:
      std::snprintf(text, sizeof text, "%+.*f%%", column.decimals, *cell);
      if (text[0] == '-' && std::strtod(text + 1, nullptr) == 0) text[0] = '+';  // no "-0.0%"
      break;
  }
  return text;
}

std::string render_markdown(const Table& table) {
  std::ostringstream out;
  out << "### " << table.title << "\n\n";
  if (!table.note.empty()) out << table.note << "\n\n";
  out << "|";
  for (const Column& c : table.columns) out << " " << c.title << " |";
  out << "\n|";
  for (size_t i = 0; i < table.columns.size(); ++i) out << "---:|";
  out << "\n";
  for (const std::vector<Cell>& row : table.rows) {
    out << "|";
    for (size_t i = 0; i < table.columns.size(); ++i) {
      out << " " << format_cell(table.columns[i], i < row.size() ? row[i] : std::nullopt) << " |";
    }
    out << "\n";
  }
  if (!table.footnote.empty()) out << "\n" << table.footnote << "\n";
  return out.str();
}

std::string render_csv(const Table& table) {
  std::string out;
  for (size_t i = 0; i < table.columns.size(); ++i) {
    out += (i ? "," : "") + table.columns[i].key;
  }
  out += "\n";
  for (const std::vector<Cell>& row : table.rows) {
    for (size_t i = 0; i < table.columns.size(); ++i) {
      if (i) out += ",";
      if (i < row.size() && row[i] && std::isfinite(*row[i])) {
        char number[32];
        auto [end, ec] = std::to_chars(number, number + sizeof number, *row[i]);
        out.append(number, end);
      }
    }
    out += "\n";
  }
  return out;
}

}  // namespace gpufrac
