// Command-line parsing for gpufrac's subcommands, with help that teaches.
//
// A command declares its options (each with a help line and an optional default), positional
// arguments and worked examples; parse() reads "--name VALUE", "--name=VALUE", flags and
// positionals, and everything after "--" as a passthrough command. "--help" / "-h" prints the
// generated help to stdout and parse() returns false (the caller exits 0). Unknown options, a
// missing value or a missing required option throw UsageError with one line that says which.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace gpufrac {

class CliArgs {
 public:
  CliArgs(std::string usage, std::string summary);

  // An option taking a value. A default makes it optional; `repeated` lets it appear many times.
  CliArgs& option(std::string name, std::string value_name, std::string help,
                  std::optional<std::string> default_value = std::nullopt, bool repeated = false);
  CliArgs& flag(std::string name, std::string help);
  // Free-form help sections printed after the options (examples, notes).
  CliArgs& section(std::string title, std::string text);
  // Positional arguments are accepted (and listed under this heading in help).
  CliArgs& positional(std::string name, std::string help);
  CliArgs& allow_passthrough(std::string help);

  bool parse(int argc, char** argv);  // argv[0] is the command name
  std::string help() const;

  bool has(const std::string& name) const;            // given on the command line or defaulted
  bool given(const std::string& name) const;          // given on the command line
  std::string get(const std::string& name) const;     // throws UsageError if absent
  std::vector<std::string> get_all(const std::string& name) const;
  bool flag_set(const std::string& name) const;
  const std::vector<std::string>& positionals() const { return positionals_; }
  const std::vector<std::string>& passthrough() const { return passthrough_; }

 private:
  struct Option {
    std::string name;
    std::string value_name;  // empty for flags
    std::string help;
    std::optional<std::string> default_value;
    bool repeated = false;
    std::vector<std::string> values;
  };
  Option* find(const std::string& name);
  const Option* find(const std::string& name) const;

  std::string usage_;
  std::string summary_;
  std::vector<Option> options_;
  std::vector<std::pair<std::string, std::string>> positional_help_;
  std::vector<std::pair<std::string, std::string>> sections_;
  std::optional<std::string> passthrough_help_;
  std::vector<std::string> positionals_;
  std::vector<std::string> passthrough_;
};

}  // namespace gpufrac
