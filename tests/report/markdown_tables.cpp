#include "report/markdown_tables.h"

#include <sstream>
#include <stdexcept>

#include "common/strings.h"

namespace gpufrac::testing {

int MarkdownTable::column(const std::string& header) const {
  for (size_t i = 0; i < headers.size(); ++i) {
    if (headers[i] == header) return int(i);
  }
  return -1;
}

std::vector<std::string> split_markdown_row(const std::string& line) {
  std::vector<std::string> cells;
  std::string_view text = trim(line);
  if (text.size() < 2 || text.front() != '|' || text.back() != '|') return cells;
  for (const std::string& cell : split(text.substr(1, text.size() - 2), '|')) {
    cells.emplace_back(trim(cell));
  }
  return cells;
}

std::map<std::string, MarkdownTable> parse_markdown_tables(const std::string& markdown) {
  std::map<std::string, MarkdownTable> tables;
  std::istringstream in(markdown);
  std::string line, heading;
  MarkdownTable* current = nullptr;
  while (std::getline(in, line)) {
    if (starts_with(line, "### ")) {
      heading = line.substr(4);
      current = nullptr;
      continue;
    }
    if (!starts_with(line, "|")) {
      if (current) heading.clear();
      current = nullptr;
      continue;
    }
    if (heading.empty()) continue;
    if (!current) {
      current = &tables[heading];
      current->headers = split_markdown_row(line);
    } else if (!starts_with(line, "|---")) {
      current->rows.push_back(split_markdown_row(line));
    }
  }
  return tables;
}

const MarkdownTable& table_starting_with(const std::map<std::string, MarkdownTable>& tables,
                                         const std::string& prefix) {
  const MarkdownTable* found = nullptr;
  for (const auto& [title, table] : tables) {
    if (!starts_with(title, prefix)) continue;
    if (found) throw std::runtime_error("two tables start with '" + prefix + "'");
    found = &table;
  }
  if (!found) throw std::runtime_error("no table starts with '" + prefix + "'");
  return *found;
}

}  // namespace gpufrac::testing
