#include "common/cli_args.h"

#include <iostream>
#include <sstream>

#include "common/error.h"

namespace gpufrac {

CliArgs::CliArgs(std::string usage, std::string summary)
    : usage_(std::move(usage)), summary_(std::move(summary)) {}

CliArgs& CliArgs::option(std::string name, std::string value_name, std::string help,
                         std::optional<std::string> default_value, bool repeated) {
  options_.push_back({std::move(name), std::move(value_name), std::move(help),
                      std::move(default_value), repeated, {}});
  return *this;
}

CliArgs& CliArgs::flag(std::string name, std::string help) {
  options_.push_back({std::move(name), "", std::move(help), std::nullopt, false, {}});
  return *this;
}

CliArgs& CliArgs::section(std::string title, std::string text) {
  sections_.emplace_back(std::move(title), std::move(text));
  return *this;
}

CliArgs& CliArgs::positional(std::string name, std::string help) {
  positional_help_.emplace_back(std::move(name), std::move(help));
  return *this;
}

CliArgs& CliArgs::allow_passthrough(std::string help) {
  passthrough_help_ = std::move(help);
  return *this;
}

CliArgs::Option* CliArgs::find(const std::string& name) {
  for (Option& o : options_) {
    if (o.name == name) return &o;
  }
  return nullptr;
}

const CliArgs::Option* CliArgs::find(const std::string& name) const {
  return const_cast<CliArgs*>(this)->find(name);
}

bool CliArgs::parse(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      std::cout << help();
      return false;
    }
    if (arg == "--") {
      if (!passthrough_help_) throw UsageError("'--' is not accepted here (see --help)");
      passthrough_.assign(argv + i + 1, argv + argc);
      break;
    }
    if (arg.size() > 2 && arg.starts_with("--")) {
      std::string name = arg.substr(2);
      std::optional<std::string> inline_value;
      if (size_t eq = name.find('='); eq != std::string::npos) {
        inline_value = name.substr(eq + 1);
        name.resize(eq);
      }
      Option* opt = find(name);
      if (!opt) throw UsageError("unknown option --" + name + " (see --help)");
      if (opt->value_name.empty()) {
        if (inline_value) throw UsageError("--" + name + " takes no value");
        opt->values = {"true"};
        continue;
      }
      std::string value;
      if (inline_value) {
        value = *inline_value;
      } else if (i + 1 < argc) {
        value = argv[++i];
      } else {
        throw UsageError("--" + name + " needs a value: --" + name + " " + opt->value_name);
      }
      if (!opt->repeated && !opt->values.empty()) {
        throw UsageError("--" + name + " was given twice; give it once");
      }
      opt->values.push_back(std::move(value));
      continue;
    }
    if (positional_help_.empty()) {
      throw UsageError("unexpected argument '" + arg + "' (see --help)");
    }
    positionals_.push_back(std::move(arg));
  }
  return true;
}

std::string CliArgs::help() const {
  std::ostringstream out;
  out << "Usage: " << usage_ << "\n\n" << summary_ << "\n";
  if (!positional_help_.empty()) {
    out << "\nArguments:\n";
    for (const auto& [name, text] : positional_help_) out << "  " << name << "\n      " << text << "\n";
  }
  if (!options_.empty()) {
    out << "\nOptions:\n";
    for (const Option& o : options_) {
      out << "  --" << o.name;
      if (!o.value_name.empty()) out << " " << o.value_name;
      if (o.repeated) out << "  (repeatable)";
      out << "\n      " << o.help;
      if (o.default_value) out << " [default: " << *o.default_value << "]";
      out << "\n";
    }
    out << "  --help\n      Show this help.\n";
  }
  if (passthrough_help_) out << "\n  -- COMMAND...\n      " << *passthrough_help_ << "\n";
  for (const auto& [title, text] : sections_) out << "\n" << title << ":\n" << text << "\n";
  return out.str();
}

bool CliArgs::has(const std::string& name) const {
  const Option* o = find(name);
  return o && (!o->values.empty() || o->default_value);
}

bool CliArgs::given(const std::string& name) const {
  const Option* o = find(name);
  return o && !o->values.empty();
}

std::string CliArgs::get(const std::string& name) const {
  const Option* o = find(name);
  if (!o) throw std::logic_error("CliArgs: undeclared option " + name);
  if (!o->values.empty()) return o->values.back();
  if (o->default_value) return *o->default_value;
  throw UsageError("--" + name + " is required: --" + name + " " + o->value_name);
}

std::vector<std::string> CliArgs::get_all(const std::string& name) const {
  const Option* o = find(name);
  if (!o) throw std::logic_error("CliArgs: undeclared option " + name);
  if (!o->values.empty()) return o->values;
  if (o->default_value) return {*o->default_value};
  return {};
}

bool CliArgs::flag_set(const std::string& name) const {
  const Option* o = find(name);
  if (!o) throw std::logic_error("CliArgs: undeclared flag " + name);
  return !o->values.empty();
}

}  // namespace gpufrac
