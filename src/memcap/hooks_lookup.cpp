// The ways a program finds driver functions without linking them, each answered with the shim's
// hooks so that every path is capped the same:
//   - cuGetProcAddress / cuGetProcAddress_v2 (how the CUDA runtime, PyTorch and Triton reach the
//     driver since CUDA 11.3), including a lookup of "cuGetProcAddress" itself;
//   - dlsym on a handle from dlopen("libcuda.so.1") or dlopen("libnvidia-ml.so.1").
// A variant of an interposed function that the shim does not know (a newer driver's
// "cuMemAlloc_v3") is refused rather than handed out uncapped.
//
// dlsym forwards every other lookup as a tail call, so glibc still sees the caller's return
// address and RTLD_NEXT / RTLD_DEFAULT resolve relative to the caller, not to this library
// (tests/memcap checks this). The shim is built with -O2 so that the tail call is always emitted.
#include <dlfcn.h>
#include <string.h>

#include <atomic>

#include "memcap/hook_table.h"
#include "memcap/shim.h"

using namespace gpufrac::memcap;

namespace {

void say_refused_variant(const char* symbol, int version) {
  static constinit std::atomic<int> said{0};
  if (said.fetch_add(1) < 8) {
    say("the driver's '%s' for CUDA %d is a variant this memcap does not know; refusing it "
        "rather than running it uncapped (update gpufrac)",
        symbol, version);
  }
}

void* driver_lookup(const char* symbol, int version, cuuint64_t flags) {
  void* function = nullptr;
  if (auto v2 = REAL(cuGetProcAddress_v2)) {
    if (v2(symbol, &function, version, flags, nullptr) != CUDA_SUCCESS) return nullptr;
  } else if (auto v1 = REAL(cuGetProcAddress)) {
    if (v1(symbol, &function, version, flags) != CUDA_SUCCESS) return nullptr;
  }
  return function;
}

// The driver handed out *pfn for (symbol, version, flags); swaps in the matching hook. Returns
// false when it is an interposed function in a variant the shim does not know.
bool substitute_hook(const char* symbol, void** pfn, int version) {
  bool interposed = false;
  for (const EntryPoint& entry : kEntryPoints) {
    if (entry.hook == nullptr || entry.library != Library::kCuda || strcmp(entry.base, symbol)) {
      continue;
    }
    interposed = true;
    if (real_function(&entry) == *pfn) {
      *pfn = entry.hook;
      return true;
    }
  }
  if (!interposed) return true;
  // The driver may hand out internal pointers rather than its exported symbols: ask it which
  // variant this is, by looking each known variant up at its own version.
  for (const EntryPoint& entry : kEntryPoints) {
    if (entry.hook == nullptr || entry.library != Library::kCuda || strcmp(entry.base, symbol) ||
        entry.min_version > version) {
      continue;
    }
    cuuint64_t flags = entry.per_thread ? CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM
                                        : CU_GET_PROC_ADDRESS_LEGACY_STREAM;
    if (driver_lookup(symbol, entry.min_version, flags) == *pfn) {
      *pfn = entry.hook;
      return true;
    }
  }
  say_refused_variant(symbol, version);
  *pfn = nullptr;
  return false;
}

CUresult finish_lookup(CUresult result, const char* symbol, void** pfn, int version,
                       CUdriverProcAddressQueryResult* status) {
  if (result != CUDA_SUCCESS || symbol == nullptr || pfn == nullptr || *pfn == nullptr ||
      !cap_requested()) {
    return result;
  }
  if (substitute_hook(symbol, pfn, version)) return result;
  if (status != nullptr) *status = CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT;
  return CUDA_ERROR_NOT_SUPPORTED;
}

// dlsym(handle, symbol) for an explicit handle: true with *found set when the shim answers.
bool answer_dlsym(void* handle, const char* symbol, void** found) {
  if (const EntryPoint* entry = find_hook_by_symbol(symbol)) {
    void* real = real_dlsym()(handle, symbol);
    if (real != nullptr && real_function(entry) == nullptr) {
      say("'%s' comes from a library the shim cannot dlopen by soname; refusing it", symbol);
      real = nullptr;
    }
    *found = real != nullptr ? entry->hook : nullptr;
    return true;
  }
  if (unknown_variant_of_hook(symbol) && real_dlsym()(handle, symbol) != nullptr) {
    say_refused_variant(symbol, 0);
    *found = nullptr;
    return true;
  }
  return false;
}

}  // namespace

extern "C" {

CUresult cuGetProcAddress_v2(const char* symbol, void** pfn, int version, cuuint64_t flags,
                             CUdriverProcAddressQueryResult* status) {
  auto real = REAL(cuGetProcAddress_v2);
  if (real == nullptr) return CUDA_ERROR_NOT_INITIALIZED;
  CUresult result = real(symbol, pfn, version, flags, status);
  return finish_lookup(result, symbol, pfn, version, status);
}

CUresult cuGetProcAddress(const char* symbol, void** pfn, int version, cuuint64_t flags) {
  auto real = REAL(cuGetProcAddress);
  if (real == nullptr) return CUDA_ERROR_NOT_INITIALIZED;
  CUresult result = real(symbol, pfn, version, flags);
  return finish_lookup(result, symbol, pfn, version, nullptr);
}

__attribute__((visibility("default"))) void* dlsym(void* handle, const char* symbol) noexcept {
  if (handle != RTLD_DEFAULT && handle != RTLD_NEXT && (symbol[0] == 'c' || symbol[0] == 'n') &&
      cap_requested()) {
    void* found = nullptr;
    if (answer_dlsym(handle, symbol, &found)) return found;
  }
  return real_dlsym()(handle, symbol);  // a tail call: see the file comment
}

}  // extern "C"
