#include "memcap/shim.h"

#include <stdarg.h>
#include <stdio.h>
#include <unistd.h>

#include <atomic>

#include "memcap/hook_table.h"
#include "memcap/pool_ledger.h"
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
constinit Immortal<PoolLedger> g_pool_ledgers[kMaxDevices];
constinit std::atomic<bool> g_pool_joined[kMaxDevices] = {};
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
constinit std::atomic<bool> g_pool_failure_said{false};
char g_refusal[1024];
constexpr const char* kVerboseHint = " (GPUFRAC_MEMCAP_VERBOSE=1 logs every refusal)";

GuardedTable* const kTables[] = {&g_pointers.value, &g_handles.value, &g_mappings.value,
                                 &g_pools.value};

void before_fork() {
  pthread_mutex_lock(&g_ready_lock);
  for (GuardedTable* table : kTables) pthread_mutex_lock(&table->lock);
  PoolLedger::before_fork();
}

void after_fork_in_parent() {
  PoolLedger::after_fork_in_parent();
  for (GuardedTable* table : kTables) pthread_mutex_unlock(&table->lock);
  pthread_mutex_unlock(&g_ready_lock);
}

// The child owns none of its parent's device memory (and CUDA gives it no use of the parent's
// contexts): it starts with empty tables and takes its own ledger slot when it first allocates.
void after_fork_in_child() {
  PoolLedger::after_fork_in_child();
  for (int d = 0; d < kMaxDevices; ++d) {
    if (g_pool_joined[d].load()) g_pool_ledgers[d].value.forget_after_fork();
  }
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
  for (int d = 0; d < kMaxDevices; ++d) {
    if (g_pool_joined[d].load()) g_pool_ledgers[d].value.remove_if_last_user();
  }
  if (g_state.load() == kReady) g_ledger.value.remove_if_last_user();
}

bool device_uuid(int device, char* out, size_t size, char* error, size_t error_size) {
  auto get_device = REAL(cuDeviceGet);
  auto get_uuid = REAL(cuDeviceGetUuid_v2);
  if (get_uuid == nullptr) get_uuid = REAL(cuDeviceGetUuid);
  CUdevice handle = -1;
  CUuuid uuid;
  if (get_device == nullptr || get_uuid == nullptr || get_device(&handle, device) != CUDA_SUCCESS ||
      get_uuid(&uuid, handle) != CUDA_SUCCESS) {
    snprintf(error, error_size, "cannot read the UUID of device %d, which names its memory pool",
             device);
    return false;
  }
  format_uuid(uuid, out, size);
  return true;
}

// The pool of a pooled device, opened and joined at the first call; nullptr with the reason.
PoolLedger* joined_pool(int device, char* error, size_t error_size) {
  PoolLedger& pool = g_pool_ledgers[device].value;
  if (g_pool_joined[device].load(std::memory_order_acquire)) return &pool;
  pthread_mutex_lock(&g_ready_lock);
  bool joined = g_pool_joined[device].load();
  if (!joined) {
    char uuid[48];
    joined = device_uuid(device, uuid, sizeof uuid, error, error_size) &&
             pool.open(g_config.state_dir, g_config.pool, uuid, error, error_size) &&
             pool.join(g_config.tenant, g_config.floor_bytes[device], g_config.pool_bytes[device],
                       error, error_size);
    if (!joined) pool.close();
    g_pool_joined[device].store(joined, std::memory_order_release);
  }
  pthread_mutex_unlock(&g_ready_lock);
  return joined ? &pool : nullptr;
}

bool device_pooled(int device) {
  return device_capped(device) && g_config.device_pooled[device];
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

CUresult join_pools() {
  if (CUresult refused = ensure_ready(); refused != CUDA_SUCCESS) return refused;
  auto count_devices = REAL(cuDeviceGetCount);
  int count = 0;
  if (count_devices == nullptr || count_devices(&count) != CUDA_SUCCESS) return CUDA_SUCCESS;
  for (int device = 0; device < count && device < kMaxDevices; ++device) {
    char error[sizeof g_refusal];
    if (device_pooled(device) && joined_pool(device, error, sizeof error) == nullptr) {
      pthread_mutex_lock(&g_ready_lock);
      snprintf(g_refusal, sizeof g_refusal, "%s", error);
      g_state.store(kRefusing, std::memory_order_release);
      pthread_mutex_unlock(&g_ready_lock);
      return ensure_ready();
    }
  }
  return CUDA_SUCCESS;
}

void format_uuid(const CUuuid& uuid, char* out, size_t size) {
  const auto* b = reinterpret_cast<const unsigned char*>(uuid.bytes);
  snprintf(out, size, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0],
           b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14],
           b[15]);
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

namespace {

void say_over_cap(int device, uint64_t bytes) {
  if (!g_config.verbose && g_denial_said.exchange(true)) return;
  char asked[32], used[32], limit[32];
  format_size(bytes, asked, sizeof asked);
  format_size(g_ledger.value.used(device), used, sizeof used);
  format_size(g_config.cap_bytes[device], limit, sizeof limit);
  say("out of memory on device %d: %s asked, tenant '%s' holds %s of its %s cap%s", device, asked,
      g_config.tenant, used, limit, g_config.verbose ? "" : kVerboseHint);
}

void say_over_pool(int device, uint64_t bytes, const PoolLedger& pool) {
  if (!g_config.verbose && g_denial_said.exchange(true)) return;
  char asked[32], used[32], floor[32], ceiling[32], shared[32], room[32];
  format_size(bytes, asked, sizeof asked);
  format_size(g_ledger.value.used(device), used, sizeof used);
  format_size(g_config.floor_bytes[device], floor, sizeof floor);
  format_size(g_config.cap_bytes[device], ceiling, sizeof ceiling);
  format_size(g_config.pool_bytes[device], shared, sizeof shared);
  format_size(pool.room(g_ledger.value, device), room, sizeof room);
  say("out of memory on device %d: %s asked, tenant '%s' holds %s (floor %s, ceiling %s) and the "
      "other tenants of its %s pool leave it %s more%s",
      device, asked, g_config.tenant, used, floor, ceiling, shared, room,
      g_config.verbose ? "" : kVerboseHint);
}

void say_no_slot() {
  if (g_no_slot_said.exchange(true)) return;
  say("no free slot in %s (%d live processes of tenant '%s', or /proc unreadable); refusing "
      "device memory",
      g_ledger.value.path(), kMaxTenantProcesses, g_config.tenant);
}

bool reserve_pooled(int device, uint64_t bytes) {
  char why[sizeof g_refusal];
  PoolLedger* pool = joined_pool(device, why, sizeof why);
  if (pool == nullptr) {
    if (!g_pool_failure_said.exchange(true)) say("%s; refusing device memory", why);
    return false;
  }
  switch (
      pool->reserve(g_ledger.value, device, bytes, g_config.cap_bytes[device], why, sizeof why)) {
    case PoolLedger::Reservation::kReserved:
      return true;
    case PoolLedger::Reservation::kNoSlot:
      if (!g_pool_failure_said.exchange(true)) say("%s; refusing device memory", why);
      return false;
    case PoolLedger::Reservation::kOverCeiling:
      say_over_cap(device, bytes);
      return false;
    case PoolLedger::Reservation::kOverPool:
      say_over_pool(device, bytes, *pool);
      return false;
  }
  return false;
}

}  // namespace

bool reserve_bytes(int device, uint64_t bytes) {
  if (device_pooled(device)) return reserve_pooled(device, bytes);
  switch (g_ledger.value.reserve(device, bytes, g_config.cap_bytes[device])) {
    case TenantLedger::Reservation::kReserved:
      return true;
    case TenantLedger::Reservation::kNoSlot:
      say_no_slot();
      return false;
    case TenantLedger::Reservation::kOverCap:
      break;
  }
  say_over_cap(device, bytes);
  return false;
}

void release_bytes(int device, uint64_t bytes) {
  if (device >= 0 && device < kMaxDevices && g_pool_joined[device].load()) {
    g_pool_ledgers[device].value.release(g_ledger.value, device, bytes);
  } else {
    g_ledger.value.release(device, bytes);
  }
}

void clamp_report(int device, uint64_t* free_bytes, uint64_t* total_bytes) {
  uint64_t cap = 0;
  uint64_t room = 0;
  if (device_capped(device) && g_state.load() == kReady) {
    g_ledger.value.reclaim_dead_processes();
    cap = g_config.cap_bytes[device];
    uint64_t used = g_ledger.value.used(device);
    room = cap > used ? cap - used : 0;
    if (g_pool_joined[device].load()) {
      PoolLedger& pool = g_pool_ledgers[device].value;
      pool.reclaim_gone_tenants();
      uint64_t pooled = pool.room(g_ledger.value, device);
      if (pooled < room) room = pooled;
    }
  } else if (device == -1 && g_config.enabled && g_config.one_cap_for_all) {
    cap = g_config.cap_bytes[0];
    room = cap;
  } else {
    return;
  }
  uint64_t total = *total_bytes < cap ? *total_bytes : cap;
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
