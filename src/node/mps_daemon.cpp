#include "node/mps_daemon.h"

#include <signal.h>
#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "common/clock.h"
#include "common/error.h"
#include "common/log.h"

namespace gpufrac {
namespace {

// Unix socket paths (the daemon's pipe directory plus a file name) must fit sun_path (108 bytes).
constexpr size_t kMaxPipeDirLength = 90;

std::string tail_of_file(const std::string& path, size_t bytes) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  std::string all = text.str();
  std::string tail = all.size() > bytes ? all.substr(all.size() - bytes) : all;
  std::replace(tail.begin(), tail.end(), '\n', ' ');
  return tail;
}

void make_private_dir(const std::string& path) {
  std::error_code ec;
  std::filesystem::create_directories(path, ec);
  if (ec) throw RuntimeFailure("cannot create " + path + ": " + ec.message());
  ::chmod(path.c_str(), 0700);
}

std::vector<std::string> control_env(const MpsDaemonConfig& config) {
  std::vector<std::string> env = current_environment();
  remove_env_prefix(env, "CUDA_MPS_");
  set_env(env, "CUDA_MPS_PIPE_DIRECTORY", config.pipe_dir);
  set_env(env, "CUDA_MPS_LOG_DIRECTORY", config.log_dir);
  return env;
}

void sleep_ms(int ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); }

}  // namespace

std::string find_mps_control(const std::string& from_spec) {
  std::string wanted = from_spec;
  if (wanted.empty()) {
    const char* env = std::getenv("GPUFRAC_MPS_CONTROL");
    wanted = env && *env ? env : "nvidia-cuda-mps-control";
  }
  std::string path = find_executable(wanted);
  if (path.empty()) {
    throw UsageError("mps_control: '" + wanted + "' not found; fractions mode needs NVIDIA's MPS " +
                     "control program (it ships beside nvidia-smi), or set mps_control: PATH");
  }
  return path;
}

std::vector<pid_t> parse_mps_pids(const std::string& output) {
  std::vector<pid_t> pids;
  std::string token;
  auto flush = [&] {
    // get_device_client_list prints clients as "PID.N" (seen on driver 580): the PID is the part
    // before the dot.
    std::string number = token.substr(0, token.find('.'));
    bool suffix_ok = number.size() == token.size() ||
                     std::all_of(token.begin() + long(number.size()) + 1, token.end(),
                                 [](char c) { return std::isdigit(static_cast<unsigned char>(c)); });
    bool digits = !number.empty() && suffix_ok && std::all_of(number.begin(), number.end(), [](char c) {
      return std::isdigit(static_cast<unsigned char>(c));
    });
    if (digits && number.size() < 10) {
      pid_t pid = pid_t(std::stol(number));
      if (pid > 0 && std::find(pids.begin(), pids.end(), pid) == pids.end()) pids.push_back(pid);
    }
    token.clear();
  };
  for (char c : output) {
    if (std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.') {
      token += c;
    } else {
      flush();
    }
  }
  flush();
  return pids;
}

std::unique_ptr<MpsDaemon> MpsDaemon::start(const MpsDaemonConfig& config, double timeout_s) {
  if (config.pipe_dir.size() > kMaxPipeDirLength) {
    throw UsageError("run_dir: the MPS pipe directory " + config.pipe_dir + " is longer than " +
                     std::to_string(kMaxPipeDirLength) + " characters (a Unix socket limit); use a shorter run_dir");
  }
  make_private_dir(config.pipe_dir);
  make_private_dir(config.log_dir);
  // A daemon already serving this pipe directory is not ours to take over.
  CommandOutput probe = run_command({config.control_program}, control_env(config), "get_server_list\n", 5);
  if (probe.ok()) {
    throw RuntimeFailure("an MPS control daemon already serves " + config.pipe_dir +
                         "; stop it (gpufrac down, or echo quit | nvidia-cuda-mps-control) first");
  }
  SpawnOptions options;
  options.argv = {config.control_program, "-f"};
  options.env = control_env(config);
  set_env(options.env, "CUDA_VISIBLE_DEVICES", config.gpu_uuid);
  options.log_path = config.log_dir + "/control-foreground.log";
  ProcessId process = spawn_process(options);
  auto daemon = std::make_unique<MpsDaemon>(config, process);
  int64_t deadline = monotonic_ns() + int64_t(timeout_s * 1e9);
  while (true) {
    if (auto status = reap_child(process.pid)) {
      throw RuntimeFailure("the MPS control daemon for " + config.gpu_uuid + " exited (" +
                           describe_wait_status(*status) + "): " +
                           tail_of_file(options.log_path, 400));
    }
    CommandOutput answer = run_command({config.control_program}, control_env(config), "get_server_list\n", 5);
    if (answer.ok()) break;
    if (monotonic_ns() > deadline) {
      stop_process_group(process, 2, true);
      throw RuntimeFailure("the MPS control daemon for " + config.gpu_uuid + " did not answer within " +
                           std::to_string(int(timeout_s)) + " s: " + tail_of_file(options.log_path, 400));
    }
    sleep_ms(50);
  }
  log_info("MPS control daemon pid ", process.pid, " for ", config.gpu_uuid, " (pipe ", config.pipe_dir, ")");
  return daemon;
}

std::string MpsDaemon::command(const std::string& line, double timeout_s) const {
  CommandOutput answer = run_command({config_.control_program}, control_env(config_), line + "\n", timeout_s);
  if (!answer.ok()) {
    std::string why = answer.timed_out ? "no answer within " + std::to_string(int(timeout_s)) + " s"
                                       : describe_wait_status(answer.wait_status);
    std::string err(answer.err.substr(0, 300));
    throw RuntimeFailure("MPS control (" + config_.pipe_dir + ") '" + line + "': " + why +
                         (err.empty() ? "" : ": " + err));
  }
  return answer.out;
}

std::vector<pid_t> MpsDaemon::server_pids(double timeout_s) const {
  return parse_mps_pids(command("get_server_list", timeout_s));
}

std::vector<pid_t> MpsDaemon::client_pids() const {
  std::vector<pid_t> clients;
  for (pid_t server : server_pids()) {
    for (const char* query : {"get_client_list ", "get_device_client_list "}) {
      for (pid_t pid : parse_mps_pids(command(query + std::to_string(server)))) {
        if (pid != server && std::find(clients.begin(), clients.end(), pid) == clients.end()) {
          clients.push_back(pid);
        }
      }
    }
  }
  return clients;
}

bool MpsDaemon::attached(pid_t root) const {
  std::vector<pid_t> clients = client_pids();
  for (pid_t pid : process_tree(root)) {
    if (std::find(clients.begin(), clients.end(), pid) != clients.end()) return true;
  }
  return false;
}

std::vector<std::pair<std::string, std::string>> MpsDaemon::client_env() const {
  return {{"CUDA_MPS_PIPE_DIRECTORY", config_.pipe_dir}, {"CUDA_MPS_LOG_DIRECTORY", config_.log_dir}};
}

bool MpsDaemon::quit(double timeout_s) {
  std::vector<ProcessId> servers;
  if (alive()) {
    try {
      for (pid_t pid : server_pids(timeout_s)) servers.push_back(process_identity(pid));
      command("quit", timeout_s);
    } catch (const RuntimeFailure& e) {
      log_warn("MPS quit: ", e.what());
    }
  }
  int64_t deadline = monotonic_ns() + int64_t(timeout_s * 1e9);
  auto everything_gone = [&] {
    reap_child(process_.pid);  // ours when this process started it; harmless otherwise
    if (process_alive(process_)) return false;
    return std::none_of(servers.begin(), servers.end(), [](const ProcessId& s) { return process_alive(s); });
  };
  while (!everything_gone() && monotonic_ns() < deadline) sleep_ms(20);
  if (everything_gone()) return true;
  log_warn("MPS daemon for ", config_.gpu_uuid, " did not exit after quit; killing it");
  stop_process_group(process_, 2, true);
  for (const ProcessId& server : servers) {
    if (process_alive(server)) ::kill(server.pid, SIGKILL);
  }
  return false;
}

}  // namespace gpufrac
