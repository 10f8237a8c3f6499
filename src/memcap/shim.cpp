#include "memcap/shim.h"

#include <stdarg.h>
#include <stdio.h>
#include <unistd.h>

#include <atomic>

#include "memcap/hook_table.h"
#include "memcap/tenant_ledger.h"

namespace gpufrac::memcap {
namespace {

// Storage that is never destroyed: threads may still call into the shim while the process exits.
template <typename T>
union Immortal {
  constexpr Immortal() : value() {}
  ~Immortal() {}
  T value;
};

enum State { kUnopened, kReady, kRefusing };

constinit MemcapConfig g_config = {};
constinit Immortal<TenantLedger> g_ledger;
constinit Immortal<GuardedTable> g_pointers;
constinit Immortal<GuardedTable> g_handles;
constinit Immortal<GuardedTable> g_mappings;
constinit Immortal<GuardedTable> g_pools;
constinit pthread_mutex_t g_ready_lock = PTHREAD_MUTEX_INITIALIZER;
constinit pthread_once_t g_config_once = PTHREAD_ONCE_INIT;
constinit std::atomic<int> g_state{kUnopened};
constinit std::atomic<bool> g_refusal_said{false};
constinit std::atomic<bool> g_denial_said{false};
constinit std::atomic<bool> g_no_slot_said{false};
constinit std::atomic<bool> g_bookkeeping_said{false};
char g_refusal[1024];

GuardedTable* const kTables[] = {&g_pointers.value, &g_handles.value, &g_mappings.value,
                                 &g_pools.value};

void format_size(uint64_t bytes, char* out, size_t size) {
  static const char* const kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double value = double(bytes);
  int unit = 0;
  while (value >= 1024 && unit < 4) {
    value /= 1024;
    ++unit;
  }
  snprintf(out, size, unit == 0 ? "%.0f %s" : "%.2f %s", value, kUnits[unit]);
}

void before_fork() {
  pthread_mutex_lock(&g_ready_lock);
  for (GuardedTable* table : kTables) pthread_mutex_lock(&table->lock);
}

void after_fork_in_parent() {
  for (GuardedTable* table : kTables) pthread_mutex_unlock(&table->lock);
  pthread_mutex_unlock(&g_ready_lock);
}

// The child owns none of its parent's device memory (and CUDA gives it no use of the parent's
// contexts): it starts with empty tables and takes its own ledger slot when it first allocates.
void after_fork_in_child() {
  for (GuardedTable* table : kTables) {
    table->table.clear();
    pthread_mutex_unlock(&table->lock);  // locked by this thread in before_fork()
  }
  g_ledger.value.forget_slot_after_fork();
  pthread_mutex_unlock(&g_ready_lock);
}

void load_config() {
  char error[sizeof g_refusal];
  if (!read_memcap_config(&g_config, error, sizeof error) && g_config.enabled) {
    snprintf(g_refusal, sizeof g_refusal, "%s", error);
    g_state.store(kRefusing);
  }
}

// The tables' mutexes are zero-initialized (PTHREAD_MUTEX_INITIALIZER on glibc), and config() loads
// the configuration on first use, so hooks called before this constructor (from another
// library's constructor) are capped too.
__attribute__((constructor)) void load_memcap() {
  pthread_once(&g_config_once, load_config);
  pthread_atfork(before_fork, after_fork_in_parent, after_fork_in_child);
}

// A process that exits normally leaves its slot to be reclaimed like a dead process's, and the
// ledger file to be removed if no other process of the tenant has it open.
__attribute__((destructor)) void leave_memcap() {
  if (g_state.load() == kReady) g_ledger.value.remove_if_last_user();
}

}  // namespace

const MemcapConfig& config() {
  pthread_once(&g_config_once, load_config);
  return g_config;
}

bool device_capped(int device) {
  return config().enabled && device >= 0 && device < kMaxDevices && g_config.device_capped[device];
}

void say(const char* format, ...) {
  char line[1536];
  int prefix = snprintf(line, sizeof line, "gpufrac memcap: ");
  va_list args;
  va_start(args, format);
  int length = vsnprintf(line + prefix, sizeof line - size_t(prefix) - 1, format, args);
  va_end(args);
  size_t total = size_t(prefix) + (length < 0 ? 0 : size_t(length));
  if (total > sizeof line - 2) total = sizeof line - 2;
  line[total++] = '\n';
  ssize_t ignored = write(STDERR_FILENO, line, total);  // one write: lines do not interleave
  (void)ignored;
}

CUresult ensure_ready() {
  if (!config().enabled) return CUDA_SUCCESS;
  int state = g_state.load(std::memory_order_acquire);
  if (state == kUnopened) {
    pthread_mutex_lock(&g_ready_lock);
    if (g_state.load() == kUnopened) {
      char error[sizeof g_refusal];
      if (g_ledger.value.open(g_config.state_dir, g_config.tenant, error, sizeof error)) {
        g_state.store(kReady, std::memory_order_release);
      } else {
        snprintf(g_refusal, sizeof g_refusal, "%s", error);
        g_state.store(kRefusing, std::memory_order_release);
      }
    }
    pthread_mutex_unlock(&g_ready_lock);
    state = g_state.load(std::memory_order_acquire);
  }
  if (state == kReady) return CUDA_SUCCESS;
  if (!g_refusal_said.exchange(true)) {
    say("%s; refusing CUDA memory calls rather than running without the cap (fix it, or unset "
        "%s to run uncapped)",
        g_refusal, kEnvBytes);
  }
  return CUDA_ERROR_NOT_PERMITTED;
}

int current_device() {
  auto get_device = REAL(cuCtxGetDevice);
  CUdevice device = -1;
  if (get_device == nullptr || get_device(&device) != CUDA_SUCCESS) return -1;
  return device;
}

uint64_t current_context() {
  auto get_current = REAL(cuCtxGetCurrent);
  CUcontext context = nullptr;
  if (get_current == nullptr || get_current(&context) != CUDA_SUCCESS) return 0;
  return uint64_t(reinterpret_cast<uintptr_t>(context));
}

int stream_device(CUstream stream) {
  auto get_device = REAL(cuStreamGetDevice);  // CUDA 12.8+; before that, the current device
  CUdevice device = -1;
  if (get_device != nullptr && get_device(stream, &device) == CUDA_SUCCESS) return device;
  return current_device();
}

bool reserve_bytes(int device, uint64_t bytes) {
  uint64_t cap = g_config.cap_bytes[device];
  switch (g_ledger.value.reserve(device, bytes, cap)) {
    case TenantLedger::Reservation::kReserved:
      return true;
    case TenantLedger::Reservation::kNoSlot:
      if (!g_no_slot_said.exchange(true)) {
        say("no free slot in %s (%d live processes of tenant '%s', or /proc unreadable); "
            "refusing device memory",
            g_ledger.value.path(), kMaxTenantProcesses, g_config.tenant);
      }
      return false;
    case TenantLedger::Reservation::kOverCap:
      break;
  }
  if (g_config.verbose || !g_denial_said.exchange(true)) {
    char asked[32], used[32], limit[32];
    format_size(bytes, asked, sizeof asked);
    format_size(g_ledger.value.used(device), used, sizeof used);
    format_size(cap, limit, sizeof limit);
    say("out of memory on device %d: %s asked, tenant '%s' holds %s of its %s cap%s", device, asked,
        g_config.tenant, used, limit,
        g_config.verbose ? "" : " (GPUFRAC_MEMCAP_VERBOSE=1 logs every refusal)");
  }
  return false;
}

void release_bytes(int device, uint64_t bytes) {
  g_ledger.value.release(device, bytes);
}

void clamp_report(int device, uint64_t* free_bytes, uint64_t* total_bytes) {
  uint64_t cap = 0;
  uint64_t used = 0;
  if (device_capped(device) && g_state.load() == kReady) {
    g_ledger.value.reclaim_dead_processes();
    cap = g_config.cap_bytes[device];
    used = g_ledger.value.used(device);
  } else if (device == -1 && g_config.enabled && g_config.one_cap_for_all) {
    cap = g_config.cap_bytes[0];
  } else {
    return;
  }
  uint64_t total = *total_bytes < cap ? *total_bytes : cap;
  uint64_t room = cap > used ? cap - used : 0;
  uint64_t free = *free_bytes < room ? *free_bytes : room;
  *total_bytes = total;
  *free_bytes = free < total ? free : total;
}

GuardedTable& pointer_table() {
  return g_pointers.value;
}
GuardedTable& handle_table() {
  return g_handles.value;
}
GuardedTable& mapping_table() {
  return g_mappings.value;
}
GuardedTable& pool_table() {
  return g_pools.value;
}

AllocationRecord* insert_record(TableLock& locked, uint64_t key, bool* existed) {
  if (!locked.table().reserve_one()) {
    AllocationRecord* found = locked.table().find(key);
    if (found != nullptr) {
      *existed = true;
      return found;
    }
    if (!g_bookkeeping_said.exchange(true)) {
      say("out of host memory for bookkeeping; memory allocated now stays counted until exit");
    }
    return nullptr;
  }
  return locked.table().insert(key, existed);
}

}  // namespace gpufrac::memcap
