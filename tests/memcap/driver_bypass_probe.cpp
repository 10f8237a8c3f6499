// driver_bypass_probe: a CUDA client that allocates device memory the way a hostile (or merely
// unusual) process could, to show which limit stops it. It is not linked to libcuda: it
// dlopen()s libcuda.so.1 and finds its functions with --resolve:
//   dlsym   dlsym() on the handle, the way frameworks that load CUDA lazily do; under the memcap
//           shim, which defines dlsym, this hands out the shim's hooks (so the shim counts)
//   elf     straight from libcuda's own dynamic symbol table in memory (dlinfo's link map, the
//           GNU or SysV hash table for the symbol count): no dlsym, no cuGetProcAddress, so the
//           shim never sees a call, as a program that carries its own loader or a static driver
//           would not be seen
// Then: cuInit, device 0's primary context, cuMemGetInfo_v2, one allocation of half of --cap
// (freed), one of 1.5 x --cap (freed), and allocations of --chunk bytes until one fails or
// --max-total bytes are held (all freed at the end; default 2 x --cap). Before freeing, with
// --hold-seconds S, it sleeps S seconds holding everything (a test asks the MPS daemon about it
// meanwhile). It prints one JSON object, including where each function it called lives (dladdr):
//   {"resolve": "elf", "functions": {"cuMemAlloc_v2": "/usr/lib/.../libcuda.so.580.65.06", ...},
//    "dlsym_cuMemAlloc_v2": "/.../libgpufrac_memcap.so", "init": "ok", "free_bytes": ...,
//    "total_bytes": ..., "half_cap": "ok", "over_cap": "oom", "chunks_bytes": ...,
//    "chunks_ended_by": "oom", "pid": 4242}
// Results are CUDA error names as far as the probes know them ("ok", "oom", "not_permitted",
// ...), else "errorN" (cuda_result_name.h). Exit status 0 when it got as far as allocating, 1
// when the driver could not be loaded or initialized, 2 for a bad command line.
#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "cuda_result_name.h"
#include "memcap/cuda_abi.h"

namespace {

struct Options {
  std::string resolve = "elf";
  size_t cap = 0;
  size_t chunk = 0;
  size_t max_total = 0;
  int hold_seconds = 0;
};

[[noreturn]] void usage(const char* problem) {
  fprintf(stderr,
          "driver_bypass_probe: %s\nusage: driver_bypass_probe --cap BYTES [--resolve elf|dlsym] "
          "[--chunk BYTES] [--max-total BYTES] [--hold-seconds S]\n",
          problem);
  exit(2);
}

size_t parse_size(const char* text) {
  char* end = nullptr;
  unsigned long long value = strtoull(text, &end, 10);
  unsigned long long unit = 1;
  if (*end == 'K') unit = 1ull << 10;
  if (*end == 'M') unit = 1ull << 20;
  if (*end == 'G') unit = 1ull << 30;
  if (unit != 1) ++end;
  if (end == text || *end != '\0' || value == 0) usage("sizes are bytes or a number with K, M, G");
  return size_t(value * unit);
}

// An address in the dynamic section is relocated by glibc on most targets and left as an offset
// on others: a value below the load address is an offset.
uintptr_t dynamic_address(const link_map* map, ElfW(Addr) value) {
  return value < map->l_addr ? map->l_addr + value : value;
}

// How many entries the dynamic symbol table has, from the GNU hash table (the last symbol of the
// longest chain) or the SysV one (nchain).
size_t symbol_count(const link_map* map, uintptr_t gnu_hash, uintptr_t sysv_hash) {
  if (gnu_hash) {
    const uint32_t* words = reinterpret_cast<const uint32_t*>(gnu_hash);
    uint32_t buckets = words[0], offset = words[1], bloom_words = words[2];
    const uint32_t* bucket = words + 4 + bloom_words * (sizeof(ElfW(Addr)) / 4);
    const uint32_t* chain = bucket + buckets;
    uint32_t last = 0;
    for (uint32_t b = 0; b < buckets; ++b) last = bucket[b] > last ? bucket[b] : last;
    if (last < offset) return offset;
    while ((chain[last - offset] & 1) == 0) ++last;
    return last + 1;
  }
  if (sysv_hash) return reinterpret_cast<const uint32_t*>(sysv_hash)[1];
  (void)map;
  return 0;
}

// `name`'s address in the library `handle` is, read from its own symbol table; null if absent.
void* elf_symbol(void* handle, const char* name) {
  link_map* map = nullptr;
  if (dlinfo(handle, RTLD_DI_LINKMAP, &map) != 0 || !map) return nullptr;
  uintptr_t symtab = 0, strtab = 0, gnu_hash = 0, sysv_hash = 0;
  for (const ElfW(Dyn)* d = map->l_ld; d->d_tag != DT_NULL; ++d) {
    if (d->d_tag == DT_SYMTAB) symtab = dynamic_address(map, d->d_un.d_ptr);
    if (d->d_tag == DT_STRTAB) strtab = dynamic_address(map, d->d_un.d_ptr);
    if (d->d_tag == DT_GNU_HASH) gnu_hash = dynamic_address(map, d->d_un.d_ptr);
    if (d->d_tag == DT_HASH) sysv_hash = dynamic_address(map, d->d_un.d_ptr);
  }
  if (!symtab || !strtab) return nullptr;
  size_t count = symbol_count(map, gnu_hash, sysv_hash);
  // Without a hash table: .dynsym is laid out right before .dynstr by every common linker.
  if (count == 0 && strtab > symtab) count = (strtab - symtab) / sizeof(ElfW(Sym));
  const ElfW(Sym)* symbols = reinterpret_cast<const ElfW(Sym)*>(symtab);
  for (size_t i = 0; i < count; ++i) {
    const ElfW(Sym)& s = symbols[i];
    if (s.st_shndx == SHN_UNDEF || s.st_value == 0 || ELF64_ST_TYPE(s.st_info) != STT_FUNC)
      continue;
    if (strcmp(reinterpret_cast<const char*>(strtab + s.st_name), name) == 0) {
      return reinterpret_cast<void*>(map->l_addr + s.st_value);
    }
  }
  return nullptr;
}

std::string library_of(void* address) {
  Dl_info info{};
  if (!address || dladdr(address, &info) == 0 || !info.dli_fname) return "?";
  return info.dli_fname;
}

std::string json_text(const std::string& text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    if (static_cast<unsigned char>(c) >= 0x20) out += c;
  }
  return out + "\"";
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (i + 1 >= argc) usage(("missing value for " + arg).c_str());
    const char* value = argv[++i];
    if (arg == "--resolve")
      o.resolve = value;
    else if (arg == "--cap")
      o.cap = parse_size(value);
    else if (arg == "--chunk")
      o.chunk = parse_size(value);
    else if (arg == "--max-total")
      o.max_total = parse_size(value);
    else if (arg == "--hold-seconds")
      o.hold_seconds = atoi(value);
    else
      usage(("unknown argument " + arg).c_str());
  }
  if (o.cap == 0) usage("--cap is required");
  if (o.resolve != "elf" && o.resolve != "dlsym") usage("--resolve is elf or dlsym");
  if (o.chunk == 0) o.chunk = o.cap / 16 ? o.cap / 16 : 1;
  if (o.max_total == 0) o.max_total = 2 * o.cap;

  void* driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!driver) {
    printf("{\"error\": %s}\n",
           json_text(std::string("dlopen libcuda.so.1: ") + dlerror()).c_str());
    return 1;
  }
  std::vector<std::pair<const char*, void*>> functions;
  auto resolve = [&](const char* name) {
    void* f = o.resolve == "elf" ? elf_symbol(driver, name) : dlsym(driver, name);
    functions.emplace_back(name, f);
    return f;
  };
  auto cu_init = reinterpret_cast<decltype(&cuInit)>(resolve("cuInit"));
  auto device_get = reinterpret_cast<decltype(&cuDeviceGet)>(resolve("cuDeviceGet"));
  auto retain =
      reinterpret_cast<decltype(&cuDevicePrimaryCtxRetain)>(resolve("cuDevicePrimaryCtxRetain"));
  auto set_current = reinterpret_cast<CUresult (*)(CUcontext)>(resolve("cuCtxSetCurrent"));
  auto mem_info = reinterpret_cast<decltype(&cuMemGetInfo_v2)>(resolve("cuMemGetInfo_v2"));
  auto mem_alloc = reinterpret_cast<decltype(&cuMemAlloc_v2)>(resolve("cuMemAlloc_v2"));
  auto mem_free = reinterpret_cast<decltype(&cuMemFree_v2)>(resolve("cuMemFree_v2"));

  std::string out = "{\"resolve\": " + json_text(o.resolve) +
                    ", \"pid\": " + std::to_string(getpid()) + ", \"functions\": {";
  bool all_found = true;
  for (size_t i = 0; i < functions.size(); ++i) {
    out += (i ? ", " : "") + json_text(functions[i].first) + ": " +
           json_text(library_of(functions[i].second));
    all_found &= functions[i].second != nullptr;
  }
  out += "}, \"dlsym_cuMemAlloc_v2\": " + json_text(library_of(dlsym(driver, "cuMemAlloc_v2")));
  if (!all_found) {
    printf("%s, \"error\": \"a driver function was not found\"}\n", out.c_str());
    return 1;
  }
  CUresult init = cu_init(0);
  CUdevice device = 0;
  CUcontext context = nullptr;
  if (init == CUDA_SUCCESS) init = device_get(&device, 0);
  if (init == CUDA_SUCCESS) init = retain(&context, device);
  if (init == CUDA_SUCCESS) init = set_current(context);
  out += ", \"init\": " + json_text(cuda_result_name(init));
  if (init != CUDA_SUCCESS) {
    printf("%s}\n", out.c_str());
    return 1;
  }
  size_t free_bytes = 0, total_bytes = 0;
  CUresult info = mem_info(&free_bytes, &total_bytes);
  out += ", \"info\": " + json_text(cuda_result_name(info)) +
         ", \"free_bytes\": " + std::to_string(free_bytes) +
         ", \"total_bytes\": " + std::to_string(total_bytes);

  auto alloc_and_free = [&](size_t bytes) {
    CUdeviceptr p = 0;
    CUresult r = mem_alloc(&p, bytes);
    if (r == CUDA_SUCCESS) mem_free(p);
    return r;
  };
  out += ", \"cap_bytes\": " + std::to_string(o.cap);
  out += ", \"half_cap\": " + json_text(cuda_result_name(alloc_and_free(o.cap / 2)));
  out += ", \"over_cap\": " + json_text(cuda_result_name(alloc_and_free(o.cap + o.cap / 2)));
  std::vector<CUdeviceptr> held;
  size_t held_bytes = 0;
  CUresult ended_by = CUDA_SUCCESS;
  while (held_bytes + o.chunk <= o.max_total) {
    CUdeviceptr p = 0;
    ended_by = mem_alloc(&p, o.chunk);
    if (ended_by != CUDA_SUCCESS) break;
    held.push_back(p);
    held_bytes += o.chunk;
  }
  out += ", \"chunk_bytes\": " + std::to_string(o.chunk) +
         ", \"chunks_bytes\": " + std::to_string(held_bytes) + ", \"chunks_ended_by\": " +
         json_text(ended_by == CUDA_SUCCESS ? "max_total" : cuda_result_name(ended_by)) + "}";
  printf("%s\n", out.c_str());
  fflush(stdout);
  if (o.hold_seconds > 0) sleep(unsigned(o.hold_seconds));
  for (CUdeviceptr p : held) mem_free(p);
  return 0;
}
