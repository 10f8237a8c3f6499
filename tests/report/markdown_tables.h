// Test helper: the Markdown tables of a report, parsed back into cells, found by their "### "
// heading. Lets tests compare what a user reads, cell by cell.
#pragma once

#include <map>
#include <string>
#include <vector>

namespace gpufrac::testing {

struct MarkdownTable {
  std::vector<std::string> headers;
  std::vector<std::vector<std::string>> rows;

  // Index of the column with this header; -1 when absent.
  int column(const std::string& header) const;
};

// "| a | b |" -> {"a", "b"}
std::vector<std::string> split_markdown_row(const std::string& line);

// Heading text (without "### ") -> the table that follows it.
std::map<std::string, MarkdownTable> parse_markdown_tables(const std::string& markdown);

// The one table whose heading starts with `prefix`; fails the test (throws) when there is none
// or several.
const MarkdownTable& table_starting_with(const std::map<std::string, MarkdownTable>& tables,
                                         const std::string& prefix);

}  // namespace gpufrac::testing
