// The memory cap's configuration, read from the environment of the capped process:
//
//   GPUFRAC_MEMCAP_BYTES      the cap: one size for every visible device ("10G"), or per device
//                             ordinal as CUDA numbers them in the process ("0=10G,1=20G"; devices
//                             not listed are not capped). Sizes: bytes or K/M/G/T (powers of
//                             1024, "GiB"/"GB" read the same), like
//                             CUDA_MPS_PINNED_DEVICE_MEM_LIMIT. Unset or empty: no cap, the shim
//                             passes every call through.
//   GPUFRAC_MEMCAP_TENANT     processes with the same tenant (and state dir) share one cap
//                             [default: "default"]; letters, digits, '.', '_' and '-'.
//   GPUFRAC_MEMCAP_STATE_DIR  where the tenants' shared ledgers live
//                             [default: /dev/shm/gpufrac-memcap-<uid>]; created (0700) if missing.
//   GPUFRAC_MEMCAP_VERBOSE    1: log every refused allocation to stderr (default: the first only).
//
// Elastic memory (pool_ledger.h): tenants with a floor and a ceiling share a device's remainder.
//   GPUFRAC_MEMCAP_POOL_BYTES   the bytes that all pooled tenants of a device may hold together,
//                               with the syntax of GPUFRAC_MEMCAP_BYTES; a device is pooled where
//                               it has both a ceiling (GPUFRAC_MEMCAP_BYTES, which stays the
//                               tenant's ceiling) and a pool (a per-device entry for a device
//                               without a ceiling is an error; one size applies to the capped
//                               devices). Unset: no pool, the cap alone as before.
//   GPUFRAC_MEMCAP_FLOOR_BYTES  the tenant's floor on its pooled devices, same syntax [0]; at most
//                               its ceiling and its pool.
//   GPUFRAC_MEMCAP_POOL         the pool's name [gpu]; the pool of a device is the file
//                               <state dir>/<name>.<device UUID>.pool, so that tenants meet in one
//                               pool only on the same GPU, with the same state dir and name.
// Every tenant counts max(used, floor) against its device's pool: a reservation succeeds only
// while used + n <= ceiling and the pool's total stays within its bytes. Setting a floor or a pool
// without its partners is an error (and, fail closed, refuses CUDA).
//
// Plain C++ without exceptions or allocation: the parser runs inside the LD_PRELOAD shim. The
// gpufrac memcap command links the same code, so what it accepts is exactly what the shim accepts.
#pragma once

#include <stddef.h>
#include <stdint.h>

namespace gpufrac::memcap {

inline constexpr int kMaxDevices = 32;  // device ordinals 0..31
inline constexpr int kMaxTenantLength = 64;
inline constexpr int kMaxStateDirLength = 1024;
inline constexpr uint64_t kMaxCapBytes = uint64_t(1) << 44;  // 16 TiB, the ledger's field width

inline constexpr const char* kEnvBytes = "GPUFRAC_MEMCAP_BYTES";
inline constexpr const char* kEnvTenant = "GPUFRAC_MEMCAP_TENANT";
inline constexpr const char* kEnvStateDir = "GPUFRAC_MEMCAP_STATE_DIR";
inline constexpr const char* kEnvVerbose = "GPUFRAC_MEMCAP_VERBOSE";
inline constexpr const char* kEnvPoolBytes = "GPUFRAC_MEMCAP_POOL_BYTES";
inline constexpr const char* kEnvFloorBytes = "GPUFRAC_MEMCAP_FLOOR_BYTES";
inline constexpr const char* kEnvPool = "GPUFRAC_MEMCAP_POOL";
inline constexpr const char* kDefaultTenant = "default";
inline constexpr const char* kDefaultPool = "gpu";

struct MemcapConfig {
  bool enabled;          // a cap (or a pool) was asked for
  bool one_cap_for_all;  // GPUFRAC_MEMCAP_BYTES was a single size
  bool device_capped[kMaxDevices];
  uint64_t cap_bytes[kMaxDevices];  // meaningful where device_capped
  char tenant[kMaxTenantLength + 1];
  char state_dir[kMaxStateDirLength];
  bool verbose;
  bool device_pooled[kMaxDevices];   // capped and pooled
  uint64_t pool_bytes[kMaxDevices];  // meaningful where device_pooled
  uint64_t floor_bytes[kMaxDevices];
  char pool[kMaxTenantLength + 1];
};

// Fills `config` from the four values (nullptr = unset), without a pool. On a bad value returns
// false and writes one line to `error` naming the variable, what is wrong and an example of a good
// value.
bool parse_memcap_config(const char* bytes, const char* tenant, const char* state_dir,
                         const char* verbose, MemcapConfig* config, char* error, size_t error_size);

// Adds the pool variables (nullptr = unset) to a config that parse_memcap_config() filled; on a
// bad value (or a pool without a ceiling, a floor without a pool, a floor above its ceiling or
// its pool) returns false with one line in `error`, as above.
bool parse_memcap_pool(const char* floor, const char* pool_bytes, const char* pool,
                       MemcapConfig* config, char* error, size_t error_size);

// parse_memcap_config() and parse_memcap_pool() on this process's environment.
bool read_memcap_config(MemcapConfig* config, char* error, size_t error_size);

// "10G", "512M", "1.5GiB", "1073741824" -> bytes (the same forms gpufrac's other flags take).
bool parse_byte_size(const char* text, size_t length, uint64_t* bytes);

// 1536 -> "1.50 KiB", 100 -> "100 B": sizes in messages.
void format_size(uint64_t bytes, char* out, size_t size);

// "/dev/shm/gpufrac-memcap-<uid>".
void default_state_dir(char* out, size_t size);

}  // namespace gpufrac::memcap
