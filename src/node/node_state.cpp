#include "node/node_state.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/error.h"
#include "common/strings.h"
#include "node/gpus.h"
#include "node/node_spec.h"
#include "node/process.h"

namespace gpufrac {
namespace {

ProcessId process_of(const Json& entry) {
  if (!entry.is_object() || !entry.contains("pid") || !entry["pid"].is_number_integer()) return {};
  return {pid_t(entry["pid"].get<int64_t>()), entry.value("start_time", uint64_t(0))};
}

std::string cell(const Json& value) {
  if (value.is_string()) return value.get<std::string>();
  if (value.is_null()) return "-";
  return value.dump();
}

}  // namespace

std::string node_state_path(const std::string& run_dir) { return run_dir + "/state.json"; }

std::string find_run_dir(const std::string& spec_path, const std::string& name, const std::string& run_dir) {
  if (!run_dir.empty()) return run_dir;
  if (!spec_path.empty()) return resolve_run_dir(load_node_spec(spec_path));
  return default_run_dir(name.empty() ? "default" : name);
}

Json read_node_state(const std::string& run_dir) {
  std::ifstream in(node_state_path(run_dir));
  if (!in) return nullptr;
  std::stringstream text;
  text << in.rdbuf();
  Json state = Json::parse(text.str(), nullptr, false);
  if (state.is_discarded() || !state.is_object()) {
    throw RuntimeFailure(node_state_path(run_dir) + " is not a node state file; remove it if no node runs there");
  }
  return state;
}

void write_node_state(const std::string& run_dir, const Json& state) {
  std::string path = node_state_path(run_dir);
  std::string temporary = path + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(temporary);
    out << state.dump(2) << "\n";
    if (!out) throw RuntimeFailure("cannot write " + temporary);
  }
  if (std::rename(temporary.c_str(), path.c_str()) != 0) {
    throw RuntimeFailure("cannot write " + path + ": " + std::strerror(errno));
  }
}

int lock_run_dir(const std::string& run_dir, const std::string& node_name) {
  std::filesystem::create_directories(run_dir);
  std::string path = run_dir + "/lock";
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) throw RuntimeFailure("cannot open " + path + ": " + std::strerror(errno));
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    ::close(fd);
    throw RuntimeFailure("a node named '" + node_name + "' is already running in " + run_dir +
                         "; stop it with gpufrac down --run-dir " + run_dir + " or use another name");
  }
  return fd;
}

bool node_process_alive(const Json& state) {
  return state.contains("node") && process_alive(process_of(state["node"]));
}

Json with_live_usage(Json state) {
  bool alive = node_process_alive(state);
  state["node_alive"] = alive;
  if (!state.contains("models")) return state;
  for (Json& model : state["models"]) {
    model["memory_used_bytes"] = nullptr;
    ProcessId process = process_of(model);
    if (!alive || !process_alive(process)) continue;
    std::string uuid = model.value("gpu_uuid", "");
    if (uuid.empty()) {
      model["memory_used_bytes"] = process_tree_rss_bytes(process.pid);
      continue;
    }
    // NVML lists MPS clients' memory under the server on some drivers: no entry means unknown.
    std::vector<pid_t> tree = process_tree(process.pid);
    uint64_t used = 0;
    bool seen = false;
    for (const GpuProcess& p : gpu_processes(uuid)) {
      if (std::find(tree.begin(), tree.end(), pid_t(p.pid)) == tree.end()) continue;
      used += p.used_bytes;
      seen = true;
    }
    if (seen) model["memory_used_bytes"] = used;
  }
  return state;
}

std::string format_node_status(const Json& state) {
  std::ostringstream out;
  std::string node_state = state.value("state", "?");
  bool alive = state.value("node_alive", false);
  if (!alive && node_state != "stopped" && node_state != "failed") node_state += " (node process gone)";
  out << "node '" << state.value("name", "?") << "': " << node_state << ", " << state.value("url", "")
      << "  (run dir " << state.value("run_dir", "") << ")\n";
  if (!state.value("error", "").empty()) out << "error: " << state["error"].get<std::string>() << "\n";
  out << "\n";
  char line[512];
  const char* format = "%-20s %-5s %-10s %5s %19s %11s %-11s %8s %7s  %s\n";
  std::snprintf(line, sizeof line, format, "MODEL", "GPU", "MODE", "SM%", "MEM CAP", "MEM USED",
                "STATE", "RESTARTS", "BACKOFF", "URL");
  out << line;
  std::string failed;
  for (const Json& m : state.value("models", Json::array())) {
    // The wait before the restart that is pending (or was the last): it doubles while the
    // engine keeps failing.
    std::string backoff = "-";
    if (m.value("restarts", 0) > 0 && m.contains("backoff_s")) {
      char text[32];
      std::snprintf(text, sizeof text, "%gs", m["backoff_s"].get<double>());
      backoff = text;
    }
    if (m.value("state", "") == "failed") {
      failed += "model " + m.value("name", "?") + " failed: " + m.value("reason", "") + "\n";
    }
    std::string sm = m.value("mode", "") == "fractions" ? std::to_string(m.value("sm_percent", 0)) : "-";
    if (m.contains("cpus") && !m["cpus"].empty()) sm += "/" + std::to_string(m["cpus"].size()) + "c";
    // Elastic memory: floor..ceiling.
    std::string cap = format_bytes(m.value("memory_cap_bytes", uint64_t(0)));
    if (m.contains("memory_floor_bytes")) {
      cap = format_bytes(m["memory_floor_bytes"].get<uint64_t>()) + ".." + cap;
    }
    std::string used = m.contains("memory_used_bytes") && m["memory_used_bytes"].is_number()
                           ? format_bytes(m["memory_used_bytes"].get<uint64_t>())
                           : "-";
    std::snprintf(line, sizeof line, format, cell(m.value("name", Json())).c_str(),
                  cell(m.value("gpu", Json())).c_str(), cell(m.value("mode", Json())).c_str(),
                  sm.c_str(), cap.c_str(), used.c_str(), cell(m.value("state", Json())).c_str(),
                  std::to_string(m.value("restarts", 0)).c_str(), backoff.c_str(),
                  cell(m.value("url", Json())).c_str());
    out << line;
  }
  if (!failed.empty()) out << "\n" << failed;
  return out.str();
}

}  // namespace gpufrac
