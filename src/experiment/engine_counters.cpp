#include "experiment/engine_counters.h"

#include <fstream>
#include <sstream>

#include "common/http_client.h"
#include "common/json.h"

namespace gpufrac {

EngineCounters parse_engine_counters(const std::string& metrics_text) {
  EngineCounters counters;
  std::istringstream lines(metrics_text);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.empty() || line[0] == '#') continue;
    const size_t name_end = line.find_first_of("{ ");
    const size_t value_at = line.rfind(' ');
    if (name_end == std::string::npos || value_at == std::string::npos) continue;
    const std::string name = line.substr(0, name_end);
    double value = 0;
    try {
      value = std::stod(line.substr(value_at + 1));
    } catch (const std::exception&) {
      continue;
    }
    if (name == "vllm:num_preemptions_total") counters.preemptions += value;
    if (name == "gpufrac:kv_cache_backing_refusals_total") counters.backing_refusals += value;
  }
  counters.engines = 1;
  return counters;
}

EngineCounters scrape_engine_counters(const std::vector<InstanceStatus>& instances) {
  EngineCounters total;
  for (const InstanceStatus& instance : instances) {
    if (instance.url.empty()) continue;
    HttpReply reply = http_get(instance.url + "/metrics", 5);
    if (!reply.ok()) continue;
    EngineCounters one = parse_engine_counters(reply.body);
    total.preemptions += one.preemptions;
    total.backing_refusals += one.backing_refusals;
    total.engines += 1;
  }
  return total;
}

EngineCounters operator-(const EngineCounters& after, const EngineCounters& before) {
  return {after.preemptions - before.preemptions, after.backing_refusals - before.backing_refusals,
          after.engines};
}

void write_engine_counters(const std::string& point_dir, const EngineCounters& counters) {
  Json record = {{"preemptions", counters.preemptions},
                 {"backing_refusals", counters.backing_refusals},
                 {"engines", counters.engines}};
  std::ofstream(point_dir + "/engine-counters.json") << record.dump(2) << "\n";
}

bool read_engine_counters(const std::string& point_dir, EngineCounters& counters) {
  std::ifstream file(point_dir + "/engine-counters.json");
  if (!file) return false;
  Json record = Json::parse(file, nullptr, false);
  if (record.is_discarded() || !record.is_object()) return false;
  counters.preemptions = record.value("preemptions", 0.0);
  counters.backing_refusals = record.value("backing_refusals", 0.0);
  counters.engines = record.value("engines", 0);
  return true;
}

}  // namespace gpufrac
