#include "node/engine_metrics_relay.h"

#include <map>
#include <sstream>

namespace gpufrac {
namespace {

struct Family {
  std::string help, type;  // the full "# HELP ..." / "# TYPE ..." lines
  std::vector<std::string> samples;
};

// "# HELP name text" -> name.
std::string comment_subject(const std::string& line) {
  const size_t start = line.find(' ', 2);
  if (start == std::string::npos) return {};
  const size_t end = line.find(' ', start + 1);
  return line.substr(start + 1, end == std::string::npos ? std::string::npos : end - start - 1);
}

std::string with_replica(const std::string& sample, const std::string& name,
                         const std::string& replica) {
  const std::string label = "replica=\"" + replica + "\"";
  if (sample.size() > name.size() && sample[name.size()] == '{') {
    const bool empty = sample.size() > name.size() + 1 && sample[name.size() + 1] == '}';
    return name + "{" + label + (empty ? "" : ",") + sample.substr(name.size() + 1);
  }
  return name + "{" + label + "}" + sample.substr(name.size());
}

}  // namespace

std::string merge_engine_expositions(const std::vector<EngineExposition>& engines) {
  std::vector<std::string> order;
  std::map<std::string, Family> families;
  auto family = [&](const std::string& name) -> Family& {
    auto [it, added] = families.try_emplace(name);
    if (added) order.push_back(name);
    return it->second;
  };
  for (const EngineExposition& engine : engines) {
    std::istringstream lines(engine.text);
    std::string current;  // the family of the last HELP/TYPE line
    for (std::string line; std::getline(lines, line);) {
      if (line.empty()) continue;
      if (line.rfind("# HELP ", 0) == 0 || line.rfind("# TYPE ", 0) == 0) {
        current = comment_subject(line);
        if (current.empty()) continue;
        Family& f = family(current);
        std::string& slot = line[2] == 'H' ? f.help : f.type;
        if (slot.empty()) slot = line;
        continue;
      }
      if (line[0] == '#') continue;
      const std::string name = line.substr(0, line.find_first_of("{ "));
      // A histogram's name_bucket / name_sum / name_count belong to the family above them.
      const bool in_current =
          !current.empty() && (name == current || name == current + "_bucket" ||
                               name == current + "_sum" || name == current + "_count");
      family(in_current ? current : name).samples.push_back(with_replica(line, name, engine.replica));
    }
  }
  std::string out;
  for (const std::string& name : order) {
    const Family& f = families[name];
    if (f.samples.empty()) continue;
    if (!f.help.empty()) out += f.help + "\n";
    if (!f.type.empty()) out += f.type + "\n";
    for (const std::string& s : f.samples) out += s + "\n";
  }
  return out;
}

}  // namespace gpufrac
