#include "memcap/memcap_config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

namespace gpufrac::memcap {
namespace {

constexpr const char* kSizeHelp = "a size like 10G, 512M or 1073741824";

bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

char lower(char c) {
  return (c >= 'A' && c <= 'Z') ? char(c - 'A' + 'a') : c;
}

void trim(const char** begin, const char** end) {
  while (*begin < *end && is_space(**begin)) ++*begin;
  while (*end > *begin && is_space((*end)[-1])) --*end;
}

bool parse_ordinal(const char* begin, const char* end, int* ordinal) {
  trim(&begin, &end);
  if (begin == end || end - begin > 3) return false;
  int value = 0;
  for (const char* p = begin; p < end; ++p) {
    if (*p < '0' || *p > '9') return false;
    value = value * 10 + (*p - '0');
  }
  *ordinal = value;
  return true;
}

// One size for every device ("10G"), or per device ordinal ("0=10G,1=20G"), from `variable`.
bool parse_device_sizes(const char* variable, const char* text, bool listed[kMaxDevices],
                        uint64_t bytes_of[kMaxDevices], bool* one_for_all, char* error,
                        size_t error_size) {
  const char* end = text + strlen(text);
  const bool per_device = memchr(text, '=', size_t(end - text)) != nullptr;
  *one_for_all = !per_device;
  if (!per_device) {
    uint64_t bytes = 0;
    if (!parse_byte_size(text, size_t(end - text), &bytes)) {
      snprintf(error, error_size, "%s='%s' is not %s, nor a per-device list like 0=10G,1=20G",
               variable, text, kSizeHelp);
      return false;
    }
    if (bytes > kMaxCapBytes) {
      snprintf(error, error_size, "%s='%s' is larger than the 16 TiB the ledger can count",
               variable, text);
      return false;
    }
    for (int d = 0; d < kMaxDevices; ++d) {
      listed[d] = true;
      bytes_of[d] = bytes;
    }
    return true;
  }
  const char* item = text;
  while (item <= end) {
    const char* comma = static_cast<const char*>(memchr(item, ',', size_t(end - item)));
    const char* item_end = comma ? comma : end;
    const char* eq = static_cast<const char*>(memchr(item, '=', size_t(item_end - item)));
    int ordinal = -1;
    uint64_t bytes = 0;
    if (!eq || !parse_ordinal(item, eq, &ordinal) || ordinal >= kMaxDevices) {
      snprintf(error, error_size,
               "%s='%s': '%.*s' is not DEVICE=SIZE with DEVICE 0..%d (e.g. 0=10G,1=20G)", variable,
               text, int(item_end - item), item, kMaxDevices - 1);
      return false;
    }
    if (!parse_byte_size(eq + 1, size_t(item_end - eq - 1), &bytes) || bytes > kMaxCapBytes) {
      snprintf(error, error_size, "%s='%s': '%.*s' for device %d is not %s (at most 16T)", variable,
               text, int(item_end - eq - 1), eq + 1, ordinal, kSizeHelp);
      return false;
    }
    if (listed[ordinal]) {
      snprintf(error, error_size, "%s='%s': device %d is listed twice; list it once", variable,
               text, ordinal);
      return false;
    }
    listed[ordinal] = true;
    bytes_of[ordinal] = bytes;
    if (!comma) break;
    item = comma + 1;
  }
  return true;
}

bool valid_tenant(const char* tenant) {
  size_t length = strlen(tenant);
  if (length == 0 || length > size_t(kMaxTenantLength) || tenant[0] == '.') return false;
  for (size_t i = 0; i < length; ++i) {
    char c = tenant[i];
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '_' || c == '-';
    if (!ok) return false;
  }
  return true;
}

}  // namespace

bool parse_byte_size(const char* text, size_t length, uint64_t* bytes) {
  const char* begin = text;
  const char* end = text + length;
  trim(&begin, &end);
  const char* number_end = begin;
  while (number_end < end && ((*number_end >= '0' && *number_end <= '9') || *number_end == '.')) {
    ++number_end;
  }
  if (number_end == begin || number_end - begin > 40) return false;
  char number[48];
  memcpy(number, begin, size_t(number_end - begin));
  number[number_end - begin] = '\0';
  char* parsed_end = nullptr;
  double value = strtod(number, &parsed_end);
  if (parsed_end != number + (number_end - begin) || !isfinite(value)) return false;

  const char* suffix = number_end;
  trim(&suffix, &end);
  char unit[4] = {0, 0, 0, 0};
  size_t unit_length = size_t(end - suffix);
  if (unit_length > 3) return false;
  for (size_t i = 0; i < unit_length; ++i) unit[i] = lower(suffix[i]);
  if (unit_length > 0 && unit[unit_length - 1] == 'b') unit[--unit_length] = '\0';  // "gb", "gib"
  if (unit_length > 0 && unit[unit_length - 1] == 'i') unit[--unit_length] = '\0';  // "gi"
  double scale = 1;
  if (unit_length == 1) {
    switch (unit[0]) {
      case 'k':
        scale = 1024.0;
        break;
      case 'm':
        scale = 1024.0 * 1024;
        break;
      case 'g':
        scale = 1024.0 * 1024 * 1024;
        break;
      case 't':
        scale = 1024.0 * 1024 * 1024 * 1024;
        break;
      default:
        return false;
    }
  } else if (unit_length != 0) {
    return false;
  }
  double result = value * scale;
  if (result >= 18446744073709551615.0) return false;
  *bytes = uint64_t(llround(result));
  return true;
}

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

void default_state_dir(char* out, size_t size) {
  snprintf(out, size, "/dev/shm/gpufrac-memcap-%u", unsigned(getuid()));
}

bool parse_memcap_config(const char* bytes, const char* tenant, const char* state_dir,
                         const char* verbose, MemcapConfig* config, char* error,
                         size_t error_size) {
  memset(config, 0, sizeof *config);
  if (error_size > 0) error[0] = '\0';
  config->enabled = bytes != nullptr && bytes[0] != '\0';
  config->verbose = verbose != nullptr && verbose[0] != '\0' && strcmp(verbose, "0") != 0 &&
                    strcmp(verbose, "false") != 0 && strcmp(verbose, "no") != 0;

  if (tenant == nullptr || tenant[0] == '\0') tenant = kDefaultTenant;
  if (!valid_tenant(tenant)) {
    snprintf(error, error_size,
             "%s='%s' is not a tenant name: use 1-%d letters, digits, '.', '_' or '-' (e.g. "
             "qwen3-4b)",
             kEnvTenant, tenant, kMaxTenantLength);
    return false;
  }
  snprintf(config->tenant, sizeof config->tenant, "%s", tenant);

  if (state_dir == nullptr || state_dir[0] == '\0') {
    default_state_dir(config->state_dir, sizeof config->state_dir);
  } else if (state_dir[0] != '/' || strlen(state_dir) >= sizeof config->state_dir - 80) {
    snprintf(error, error_size,
             "%s='%s' must be an absolute directory path shorter than %d characters (e.g. "
             "/dev/shm/gpufrac-memcap)",
             kEnvStateDir, state_dir, kMaxStateDirLength - 80);
    return false;
  } else {
    snprintf(config->state_dir, sizeof config->state_dir, "%s", state_dir);
  }

  if (!config->enabled) return true;
  return parse_device_sizes(kEnvBytes, bytes, config->device_capped, config->cap_bytes,
                            &config->one_cap_for_all, error, error_size);
}

bool parse_memcap_pool(const char* floor, const char* pool_bytes, const char* pool,
                       MemcapConfig* config, char* error, size_t error_size) {
  auto given = [](const char* value) { return value != nullptr && value[0] != '\0'; };
  snprintf(config->pool, sizeof config->pool, "%s", kDefaultPool);
  if (!given(floor) && !given(pool_bytes) && !given(pool)) return true;
  config->enabled = true;  // a pool was asked for: refuse CUDA rather than run without it
  if (!given(pool_bytes)) {
    snprintf(error, error_size,
             "%s is set but %s is not: give the bytes the device's pooled tenants share (e.g. "
             "%s=80G)",
             given(floor) ? kEnvFloorBytes : kEnvPool, kEnvPoolBytes, kEnvPoolBytes);
    return false;
  }
  bool capped_somewhere = false;
  for (int d = 0; d < kMaxDevices; ++d) capped_somewhere |= config->device_capped[d];
  if (!capped_somewhere) {
    snprintf(error, error_size,
             "%s is set but %s is not: a pooled tenant needs a ceiling (e.g. %s=40G)",
             kEnvPoolBytes, kEnvBytes, kEnvBytes);
    return false;
  }
  if (given(pool)) {
    if (!valid_tenant(pool)) {
      snprintf(error, error_size,
               "%s='%s' is not a pool name: use 1-%d letters, digits, '.', '_' or '-' (e.g. "
               "node-a)",
               kEnvPool, pool, kMaxTenantLength);
      return false;
    }
    snprintf(config->pool, sizeof config->pool, "%s", pool);
  }
  bool pool_listed[kMaxDevices] = {};
  bool pool_for_all = false;
  if (!parse_device_sizes(kEnvPoolBytes, pool_bytes, pool_listed, config->pool_bytes, &pool_for_all,
                          error, error_size)) {
    return false;
  }
  bool floor_listed[kMaxDevices] = {};
  bool floor_for_all = false;
  if (given(floor) && !parse_device_sizes(kEnvFloorBytes, floor, floor_listed, config->floor_bytes,
                                          &floor_for_all, error, error_size)) {
    return false;
  }
  // A size for all devices applies where the one before it does; a listed device must have it.
  for (int d = 0; d < kMaxDevices; ++d) {
    if (pool_listed[d] && !config->device_capped[d] && !pool_for_all) {
      snprintf(error, error_size,
               "%s gives device %d a pool but %s gives it no ceiling; give it one (e.g. %d=40G)",
               kEnvPoolBytes, d, kEnvBytes, d);
      return false;
    }
    config->device_pooled[d] = pool_listed[d] && config->device_capped[d];
    if (floor_listed[d] && !config->device_pooled[d] && !floor_for_all) {
      snprintf(error, error_size,
               "%s gives device %d a floor but %s gives it no pool; give it one (e.g. %d=80G)",
               kEnvFloorBytes, d, kEnvPoolBytes, d);
      return false;
    }
    if (!config->device_pooled[d]) {
      config->pool_bytes[d] = 0;
      config->floor_bytes[d] = 0;
      continue;
    }
    const struct {
      const char* name;
      const char* variable;
      uint64_t bytes;
    } bounds[] = {{"ceiling", kEnvBytes, config->cap_bytes[d]},
                  {"pool", kEnvPoolBytes, config->pool_bytes[d]}};
    for (const auto& bound : bounds) {
      if (config->floor_bytes[d] <= bound.bytes) continue;
      snprintf(error, error_size,
               "%s: device %d's floor (%llu bytes) is above its %s in %s (%llu bytes); lower the "
               "floor",
               kEnvFloorBytes, d, (unsigned long long)config->floor_bytes[d], bound.name,
               bound.variable, (unsigned long long)bound.bytes);
      return false;
    }
  }
  return true;
}

bool read_memcap_config(MemcapConfig* config, char* error, size_t error_size) {
  return parse_memcap_config(getenv(kEnvBytes), getenv(kEnvTenant), getenv(kEnvStateDir),
                             getenv(kEnvVerbose), config, error, error_size) &&
         parse_memcap_pool(getenv(kEnvFloorBytes), getenv(kEnvPoolBytes), getenv(kEnvPool), config,
                           error, error_size);
}

}  // namespace gpufrac::memcap
