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
inline constexpr const char* kDefaultTenant = "default";

struct MemcapConfig {
  bool enabled;          // a cap was asked for
  bool one_cap_for_all;  // GPUFRAC_MEMCAP_BYTES was a single size
  bool device_capped[kMaxDevices];
  uint64_t cap_bytes[kMaxDevices];  // meaningful where device_capped
  char tenant[kMaxTenantLength + 1];
  char state_dir[kMaxStateDirLength];
  bool verbose;
};

// Fills `config` from the four values (nullptr = unset). On a bad value returns false and writes
// one line to `error` naming the variable, what is wrong and an example of a good value.
bool parse_memcap_config(const char* bytes, const char* tenant, const char* state_dir,
                         const char* verbose, MemcapConfig* config, char* error, size_t error_size);

// parse_memcap_config() on this process's environment.
bool read_memcap_config(MemcapConfig* config, char* error, size_t error_size);

// "10G", "512M", "1.5GiB", "1073741824" -> bytes (the same forms gpufrac's other flags take).
bool parse_byte_size(const char* text, size_t length, uint64_t* bytes);

// "/dev/shm/gpufrac-memcap-<uid>".
void default_state_dir(char* out, size_t size);

}  // namespace gpufrac::memcap
