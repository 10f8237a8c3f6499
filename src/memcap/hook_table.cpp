#include "memcap/hook_table.h"

#include <dlfcn.h>
#include <stdint.h>
#include <string.h>

#include <atomic>

namespace gpufrac::memcap {
namespace {

#define GPUFRAC_MEMCAP_HOOK_ADDRESS_true(symbol) reinterpret_cast<void*>(&::symbol)
#define GPUFRAC_MEMCAP_HOOK_ADDRESS_false(symbol) nullptr

void* const kMissing = reinterpret_cast<void*>(uintptr_t(1));

constinit std::atomic<void*> g_real[int(EntryId::kCount)] = {};
constinit std::atomic<DlsymFunction> g_real_dlsym{nullptr};

void* library_handle(Library library) {
  // dlopen returns the copy the program already loaded (matched by soname), else loads it.
  const char* soname = library == Library::kCuda ? "libcuda.so.1" : "libnvidia-ml.so.1";
  return dlopen(soname, RTLD_LAZY | RTLD_LOCAL);
}

bool is_variant_suffix(const char* rest) {
  if (strncmp(rest, "_v", 2) == 0 && rest[2] >= '0' && rest[2] <= '9') {
    rest += 2;
    while (*rest >= '0' && *rest <= '9') ++rest;
  }
  return *rest == '\0' || strcmp(rest, "_ptsz") == 0 || strcmp(rest, "_ptds") == 0;
}

}  // namespace

const EntryPoint kEntryPoints[int(EntryId::kCount)] = {
#define GPUFRAC_MEMCAP_ROW(symbol, base, version, per_thread, library, hooked) \
  {#symbol,          base,                                                     \
   version,          per_thread,                                               \
   Library::library, GPUFRAC_MEMCAP_HOOK_ADDRESS_##hooked(symbol)},
    GPUFRAC_MEMCAP_ENTRY_POINTS(GPUFRAC_MEMCAP_ROW)
#undef GPUFRAC_MEMCAP_ROW
};

const EntryPoint* find_hook_by_symbol(const char* symbol) {
  for (const EntryPoint& entry : kEntryPoints) {
    if (entry.hook != nullptr && strcmp(entry.symbol, symbol) == 0) return &entry;
  }
  return nullptr;
}

bool unknown_variant_of_hook(const char* symbol) {
  for (const EntryPoint& entry : kEntryPoints) {
    if (strcmp(entry.symbol, symbol) == 0) return false;  // known, interposed or not
  }
  for (const EntryPoint& entry : kEntryPoints) {
    size_t base_length = strlen(entry.base);
    if (entry.hook == nullptr || strncmp(symbol, entry.base, base_length) != 0) continue;
    const char* rest = symbol + base_length;
    if (*rest != '\0' && is_variant_suffix(rest)) return true;
  }
  return false;
}

void* real_function(EntryId id) {
  std::atomic<void*>& slot = g_real[int(id)];
  void* function = slot.load(std::memory_order_acquire);
  if (function != nullptr) return function == kMissing ? nullptr : function;
  const EntryPoint& entry = kEntryPoints[int(id)];
  void* library = library_handle(entry.library);
  if (library == nullptr) return nullptr;  // not cached: the program may load it later
  function = real_dlsym()(library, entry.symbol);
  slot.store(function != nullptr ? function : kMissing, std::memory_order_release);
  return function;
}

DlsymFunction real_dlsym() {
  DlsymFunction function = g_real_dlsym.load(std::memory_order_acquire);
  if (function != nullptr) return function;
  // dlvsym is not interposed; since glibc 2.34 dlsym lives in libc under both versions.
  function = reinterpret_cast<DlsymFunction>(dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34"));
  if (function == nullptr) {
    function = reinterpret_cast<DlsymFunction>(dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5"));
  }
  g_real_dlsym.store(function, std::memory_order_release);
  return function;
}

}  // namespace gpufrac::memcap
