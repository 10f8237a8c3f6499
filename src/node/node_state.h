// A node's run directory and the state file in it, so that `gpufrac down` and `gpufrac status`
// from another process find what a node started:
//
//   <run_dir>/state.json          written by the node on every change (atomically, by rename)
//   <run_dir>/lock                held (flock) by the node process for its whole life
//   <run_dir>/node.log            the node's own log when it runs detached
//   <run_dir>/logs/<model>.log    each engine's stdout and stderr
//   <run_dir>/mps/gpu<N>/{pipe,log}  each MPS control daemon's directories
//   <run_dir>/memcap/             the memcap shim's tenant ledgers
//
// state.json ("schema": "gpufrac.node/1"): name, spec, run_dir, url, state (starting | running |
// stopping | stopped | failed), error, drain_timeout_s, stop_timeout_s, node {pid, start_time},
// devices [{id, uuid, name, mode, memory_bytes, sm_count}], mps [{gpu, uuid, pid, start_time,
// control, pipe_dir, log_dir}], models [{name, model, replica, gpu, gpu_uuid, mode, sm_percent,
// compute_share, cpus, memory_cap_bytes (elastic memory: the ceiling), memory_floor_bytes (only
// for elastic memory), port, url, state (starting | ready | restarting |
// stopping | stopped | failed), restarts, failures (in a row), backoff_s (the wait before the
// pending or last restart), pid, start_time, last_exit, reason, log}]. Processes are named by pid
// AND start time (process.h).
#pragma once

#include <string>

#include "common/json.h"

namespace gpufrac {

std::string node_state_path(const std::string& run_dir);
// The run directory `down` and `status` look in: `run_dir` when given, else the one of the spec
// file when given, else the default one of node `name`.
std::string find_run_dir(const std::string& spec_path, const std::string& name, const std::string& run_dir);
// The state, or null when the directory holds none. Throws RuntimeFailure on a corrupt file.
Json read_node_state(const std::string& run_dir);
void write_node_state(const std::string& run_dir, const Json& state);

// Takes the run directory's lock for this process's life (fd kept open); throws RuntimeFailure
// naming the node when another live process holds it.
int lock_run_dir(const std::string& run_dir, const std::string& node_name);

// Is the node process of this state still alive (pid and start time)?
bool node_process_alive(const Json& state);

// Adds live numbers to a state for `gpufrac status`: per model "memory_used_bytes" (GPU memory
// NVML reports for its process tree, or resident memory on the CPU; null when unknown), and the
// node's "node_alive".
Json with_live_usage(Json state);
// The `gpufrac status` table.
std::string format_node_status(const Json& state);

}  // namespace gpufrac
