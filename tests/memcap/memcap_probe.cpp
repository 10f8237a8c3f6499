// memcap_probe: a CUDA driver API program for the memcap tests. It is linked to libcuda.so.1 like
// any CUDA program (found through LD_LIBRARY_PATH) and reaches the driver the way real programs
// do, chosen with --api:
//   direct            calls the linked symbols (cuMemAlloc_v2, ...)
//   dlsym             dlopen("libcuda.so.1") + dlsym, as frameworks that load CUDA lazily do
//   procaddress       cuGetProcAddress_v2 with base names, as the CUDA runtime does
//   procaddress-self  the same, through a cuGetProcAddress looked up with cuGetProcAddress
// (--per-thread adds CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM to the lookups), then runs the
// steps on its command line and prints one line per step, e.g. "alloc 64M oom". Steps are listed
// in usage() below; those ending in 32 or -v1 use the older variant of their function, which
// cuGetProcAddress hands out only for an older CUDA version. Exit status 0 unless the command
// line is wrong.
#include <dlfcn.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "common/strings.h"
#include "cuda_result_name.h"
#include "fakes/fake_libcuda.h"
#include "memcap/cuda_abi.h"
#include "memcap_stress.h"

namespace {

struct Options {
  std::string api = "direct";
  bool per_thread = false;
  int version = 13000;
};

[[noreturn]] void usage(const char* problem) {
  fprintf(stderr,
          "memcap_probe: %s\nusage: memcap_probe [--api direct|dlsym|procaddress|"
          "procaddress-self] [--per-thread] STEP...\nsteps: init | device N | alloc SIZE | "
          "alloc32 SIZE | managed SIZE | pitch WIDTH HEIGHT | free I | async SIZE | pool SIZE | "
          "devpool SIZE | hostpool SIZE | freeasync I | free32 I | create SIZE | hostcreate SIZE | "
          "map H | retain H | unmap H | release H | info | info32 | total N | nvml I | nvml2 I | "
          "reset | reset-v1 | primaryrelease | primaryrelease-v1 | ctxcreate | ctxdestroy | "
          "ctxdestroy-v1 | lookup NAME VERSION | dlsym NAME | initialized | hold | "
          "touch PATH | await PATH | fork STEP... end | stress THREADS ITERATIONS MAX_MIB SEED\n",
          problem);
  exit(2);
}

class Probe {
 public:
  explicit Probe(const Options& options) : options_(options) { resolve(); }

  // Runs argv[first, last); returns the index after the last step run.
  void run(char** steps, int first, int last, const char* prefix);

 private:
  void resolve();
  template <typename F>
  void find(F& function, F linked, const char* symbol, const char* base, int version);
  void* nvml(const char* symbol);
  void line(const char* format, ...) __attribute__((format(printf, 2, 3)));

  Options options_;
  const char* prefix_ = "";
  void* libcuda_ = nullptr;
  void* libnvml_ = nullptr;
  decltype(&cuGetProcAddress_v2) get_proc_ = nullptr;
  MemcapDriver d_ = {};
  decltype(&cuCtxCreate_v2) ctx_create_ = nullptr;
  decltype(&cuCtxDestroy_v2) ctx_destroy_ = nullptr;
  decltype(&cuCtxDestroy) ctx_destroy_v1_ = nullptr;
  decltype(&cuDevicePrimaryCtxReset_v2) ctx_reset_ = nullptr;
  decltype(&cuDevicePrimaryCtxReset) ctx_reset_v1_ = nullptr;
  decltype(&cuDevicePrimaryCtxRelease_v2) primary_release_ = nullptr;
  decltype(&cuDevicePrimaryCtxRelease) primary_release_v1_ = nullptr;
  decltype(&cuMemAlloc) alloc32_ = nullptr;
  decltype(&cuMemFree) free32_ = nullptr;
  decltype(&cuMemGetInfo) info32_ = nullptr;
  decltype(&cuMemAllocPitch_v2) pitch_ = nullptr;
  decltype(&cuMemAllocManaged) managed_ = nullptr;
  decltype(&cuMemRetainAllocationHandle) retain_ = nullptr;
  decltype(&cuDeviceTotalMem_v2) total_ = nullptr;
  decltype(&cuMemPoolCreate) pool_create_ = nullptr;
  std::vector<CUdeviceptr> pointers_;
  std::vector<CUdeviceptr_v1> pointers32_;
  std::vector<CUmemGenericAllocationHandle> handles_;
  std::vector<size_t> handle_sizes_;
  std::vector<CUdeviceptr> mapped_at_;
  CUcontext created_ = nullptr;
};

template <typename F>
void Probe::find(F& function, F linked, const char* symbol, const char* base, int version) {
  if (options_.api == "direct") {
    function = linked;
  } else if (options_.api == "dlsym") {
    function = reinterpret_cast<F>(dlsym(libcuda_, symbol));
  } else {
    void* found = nullptr;
    cuuint64_t flags = options_.per_thread ? CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM
                                           : CU_GET_PROC_ADDRESS_DEFAULT;
    CUdriverProcAddressQueryResult status = 0;
    get_proc_(base, &found, version, flags, &status);
    function = reinterpret_cast<F>(found);
  }
  if (function == nullptr) {
    fprintf(stderr, "memcap_probe: cannot find %s through --api %s\n", symbol,
            options_.api.c_str());
    exit(3);
  }
}

void Probe::resolve() {
  libcuda_ = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (libcuda_ == nullptr) usage("cannot dlopen libcuda.so.1 (set LD_LIBRARY_PATH)");
  if (options_.api == "procaddress" || options_.api == "procaddress-self") {
    get_proc_ = &cuGetProcAddress_v2;
    if (options_.api == "procaddress-self") {
      void* self = nullptr;
      get_proc_("cuGetProcAddress", &self, options_.version, 0, nullptr);
      get_proc_ = reinterpret_cast<decltype(get_proc_)>(self);
    }
  } else if (options_.api != "direct" && options_.api != "dlsym") {
    usage("unknown --api");
  }
#define PROBE_FIND(member, symbol, base) find(member, &::symbol, #symbol, base, options_.version)
  PROBE_FIND(d_.init, cuInit, "cuInit");
  PROBE_FIND(d_.retain_primary, cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain");
  PROBE_FIND(d_.set_current, cuCtxSetCurrent, "cuCtxSetCurrent");
  PROBE_FIND(d_.get_device, cuCtxGetDevice, "cuCtxGetDevice");
  PROBE_FIND(d_.alloc, cuMemAlloc_v2, "cuMemAlloc");
  PROBE_FIND(d_.free, cuMemFree_v2, "cuMemFree");
  PROBE_FIND(d_.get_info, cuMemGetInfo_v2, "cuMemGetInfo");
  PROBE_FIND(d_.default_pool, cuDeviceGetDefaultMemPool, "cuDeviceGetDefaultMemPool");
  PROBE_FIND(d_.create, cuMemCreate, "cuMemCreate");
  PROBE_FIND(d_.release, cuMemRelease, "cuMemRelease");
  PROBE_FIND(d_.address_reserve, cuMemAddressReserve, "cuMemAddressReserve");
  PROBE_FIND(d_.map, cuMemMap, "cuMemMap");
  PROBE_FIND(d_.unmap, cuMemUnmap, "cuMemUnmap");
  PROBE_FIND(d_.set_access, cuMemSetAccess, "cuMemSetAccess");
  PROBE_FIND(ctx_create_, cuCtxCreate_v2, "cuCtxCreate");
  PROBE_FIND(ctx_destroy_, cuCtxDestroy_v2, "cuCtxDestroy");
  PROBE_FIND(ctx_reset_, cuDevicePrimaryCtxReset_v2, "cuDevicePrimaryCtxReset");
  PROBE_FIND(primary_release_, cuDevicePrimaryCtxRelease_v2, "cuDevicePrimaryCtxRelease");
  PROBE_FIND(pitch_, cuMemAllocPitch_v2, "cuMemAllocPitch");
  PROBE_FIND(managed_, cuMemAllocManaged, "cuMemAllocManaged");
  PROBE_FIND(retain_, cuMemRetainAllocationHandle, "cuMemRetainAllocationHandle");
  PROBE_FIND(total_, cuDeviceTotalMem_v2, "cuDeviceTotalMem");
  PROBE_FIND(pool_create_, cuMemPoolCreate, "cuMemPoolCreate");
  if (options_.per_thread) {
    PROBE_FIND(d_.alloc_async, cuMemAllocAsync_ptsz, "cuMemAllocAsync");
    PROBE_FIND(d_.alloc_from_pool, cuMemAllocFromPoolAsync_ptsz, "cuMemAllocFromPoolAsync");
    PROBE_FIND(d_.free_async, cuMemFreeAsync_ptsz, "cuMemFreeAsync");
  } else {
    PROBE_FIND(d_.alloc_async, cuMemAllocAsync, "cuMemAllocAsync");
    PROBE_FIND(d_.alloc_from_pool, cuMemAllocFromPoolAsync, "cuMemAllocFromPoolAsync");
    PROBE_FIND(d_.free_async, cuMemFreeAsync, "cuMemFreeAsync");
  }
#undef PROBE_FIND
  // The older variants: only an older CUDA version gets them through cuGetProcAddress.
  find(alloc32_, &::cuMemAlloc, "cuMemAlloc", "cuMemAlloc", 3000);
  find(free32_, &::cuMemFree, "cuMemFree", "cuMemFree", 3000);
  find(info32_, &::cuMemGetInfo, "cuMemGetInfo", "cuMemGetInfo", 3000);
  find(ctx_destroy_v1_, &::cuCtxDestroy, "cuCtxDestroy", "cuCtxDestroy", 3000);
  find(ctx_reset_v1_, &::cuDevicePrimaryCtxReset, "cuDevicePrimaryCtxReset",
       "cuDevicePrimaryCtxReset", 7000);
  find(primary_release_v1_, &::cuDevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease",
       "cuDevicePrimaryCtxRelease", 7000);
}

void* Probe::nvml(const char* symbol) {
  if (libnvml_ == nullptr) {
    libnvml_ = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (libnvml_ == nullptr) usage("cannot dlopen libnvidia-ml.so.1");
    reinterpret_cast<decltype(&nvmlInit_v2)>(dlsym(libnvml_, "nvmlInit_v2"))();
  }
  void* found = dlsym(libnvml_, symbol);
  if (found == nullptr) usage("NVML symbol missing");
  return found;
}

void Probe::line(const char* format, ...) {
  char text[512];
  va_list args;
  va_start(args, format);
  vsnprintf(text, sizeof text, format, args);
  va_end(args);
  printf("%s%s\n", prefix_, text);
  fflush(stdout);
}

size_t parse_size(const char* text) {
  return size_t(gpufrac::parse_bytes(text, "size"));
}

void Probe::run(char** argv, int first, int last, const char* prefix) {
  prefix_ = prefix;
  auto next = [&](int& i) -> const char* {
    if (i + 1 >= last) usage("a step is missing its argument");
    return argv[++i];
  };
  auto index = [&](int& i, size_t count) -> size_t {
    size_t at = size_t(atoi(next(i)));
    if (at >= count) usage("no such index");
    return at;
  };
  for (int i = first; i < last; ++i) {
    std::string step = argv[i];
    if (step == "init" || step == "device") {
      int device = step == "init" ? 0 : atoi(next(i));
      CUcontext context = nullptr;
      CUresult result = d_.init(0);
      if (result == CUDA_SUCCESS) result = d_.retain_primary(&context, device);
      if (result == CUDA_SUCCESS) result = d_.set_current(context);
      if (step == "init")
        line("init %s", cuda_result_name(result));
      else
        line("device %d %s", device, cuda_result_name(result));
    } else if (step == "alloc" || step == "managed" || step == "async" || step == "pool" ||
               step == "devpool" || step == "hostpool") {
      const char* size_text = next(i);
      size_t size = parse_size(size_text);
      CUdeviceptr ptr = 0;
      CUresult result;
      CUdevice device = 0;
      d_.get_device(&device);
      if (step == "alloc") {
        result = d_.alloc(&ptr, size);
      } else if (step == "managed") {
        result = managed_(&ptr, size, 1);
      } else if (step == "async") {
        result = d_.alloc_async(&ptr, size, nullptr);
      } else {
        CUmemoryPool pool = nullptr;
        if (step == "pool") {
          d_.default_pool(&pool, device);
        } else {
          CUmemPoolProps props = {};
          props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
          props.location.type =
              step == "devpool" ? CU_MEM_LOCATION_TYPE_DEVICE : CU_MEM_LOCATION_TYPE_HOST;
          props.location.id = device;
          pool_create_(&pool, &props);
        }
        result = d_.alloc_from_pool(&ptr, size, pool, nullptr);
      }
      if (result == CUDA_SUCCESS) pointers_.push_back(ptr);
      line("%s %s %s", step.c_str(), size_text, cuda_result_name(result));
    } else if (step == "alloc32") {
      const char* size_text = next(i);
      CUdeviceptr_v1 ptr = 0;
      CUresult result = alloc32_(&ptr, unsigned(parse_size(size_text)));
      if (result == CUDA_SUCCESS) pointers32_.push_back(ptr);
      line("alloc32 %s %s", size_text, cuda_result_name(result));
    } else if (step == "pitch") {
      const char* width = next(i);
      const char* height = next(i);
      CUdeviceptr ptr = 0;
      size_t pitch = 0;
      CUresult result = pitch_(&ptr, &pitch, parse_size(width), parse_size(height), 4);
      if (result == CUDA_SUCCESS) pointers_.push_back(ptr);
      line("pitch %s %s %s pitch=%zu", width, height, cuda_result_name(result), pitch);
    } else if (step == "free" || step == "freeasync") {
      size_t at = index(i, pointers_.size());
      CUresult result =
          step == "free" ? d_.free(pointers_[at]) : d_.free_async(pointers_[at], nullptr);
      line("%s %zu %s", step.c_str(), at, cuda_result_name(result));
    } else if (step == "free32") {
      size_t at = index(i, pointers32_.size());
      line("free32 %zu %s", at, cuda_result_name(free32_(pointers32_[at])));
    } else if (step == "create" || step == "hostcreate") {
      const char* size_text = next(i);
      size_t size = parse_size(size_text);
      CUdevice device = 0;
      d_.get_device(&device);
      CUmemAllocationProp prop = {};
      prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
      prop.location.type =
          step == "create" ? CU_MEM_LOCATION_TYPE_DEVICE : CU_MEM_LOCATION_TYPE_HOST;
      prop.location.id = device;
      CUmemGenericAllocationHandle handle = 0;
      CUresult result = d_.create(&handle, size, &prop, 0);
      if (result == CUDA_SUCCESS) {
        handles_.push_back(handle);
        handle_sizes_.push_back(size);
        mapped_at_.push_back(0);
      }
      line("%s %s %s", step.c_str(), size_text, cuda_result_name(result));
    } else if (step == "map") {
      size_t at = index(i, handles_.size());
      CUresult result = d_.address_reserve(&mapped_at_[at], handle_sizes_[at], 0, 0, 0);
      if (result == CUDA_SUCCESS)
        result = d_.map(mapped_at_[at], handle_sizes_[at], 0, handles_[at], 0);
      CUmemAccessDesc access = {{CU_MEM_LOCATION_TYPE_DEVICE, 0}, 3};
      if (result == CUDA_SUCCESS)
        result = d_.set_access(mapped_at_[at], handle_sizes_[at], &access, 1);
      line("map %zu %s", at, cuda_result_name(result));
    } else if (step == "retain") {
      size_t at = index(i, handles_.size());
      CUmemGenericAllocationHandle handle = 0;
      CUresult result = retain_(&handle, reinterpret_cast<void*>(mapped_at_[at]));
      line("retain %zu %s", at, cuda_result_name(result));
    } else if (step == "unmap") {
      size_t at = index(i, handles_.size());
      line("unmap %zu %s", at, cuda_result_name(d_.unmap(mapped_at_[at], handle_sizes_[at])));
    } else if (step == "release") {
      size_t at = index(i, handles_.size());
      line("release %zu %s", at, cuda_result_name(d_.release(handles_[at])));
    } else if (step == "info") {
      size_t free = 0, total = 0;
      CUresult result = d_.get_info(&free, &total);
      if (result == CUDA_SUCCESS)
        line("info free=%zu total=%zu", free, total);
      else
        line("info %s", cuda_result_name(result));
    } else if (step == "info32") {
      unsigned free = 0, total = 0;
      CUresult result = info32_(&free, &total);
      if (result == CUDA_SUCCESS)
        line("info32 free=%u total=%u", free, total);
      else
        line("info32 %s", cuda_result_name(result));
    } else if (step == "total") {
      int device = atoi(next(i));
      size_t bytes = 0;
      CUresult result = total_(&bytes, device);
      if (result == CUDA_SUCCESS)
        line("total %d bytes=%zu", device, bytes);
      else
        line("total %d %s", device, cuda_result_name(result));
    } else if (step == "nvml" || step == "nvml2") {
      unsigned index_value = unsigned(atoi(next(i)));
      nvmlDevice_t device = nullptr;
      reinterpret_cast<decltype(&nvmlDeviceGetHandleByIndex_v2)>(
          nvml("nvmlDeviceGetHandleByIndex_v2"))(index_value, &device);
      if (step == "nvml") {
        nvmlMemory_t memory = {};
        nvmlReturn_t result = reinterpret_cast<decltype(&nvmlDeviceGetMemoryInfo)>(
            nvml("nvmlDeviceGetMemoryInfo"))(device, &memory);
        if (result == NVML_SUCCESS) {
          line("nvml %u total=%llu free=%llu used=%llu", index_value, memory.total, memory.free,
               memory.used);
        } else {
          line("nvml %u error%d", index_value, result);
        }
      } else {
        nvmlMemory_v2_t memory = {};
        memory.version = GPUFRAC_NVML_MEMORY_V2_VERSION;
        nvmlReturn_t result = reinterpret_cast<decltype(&nvmlDeviceGetMemoryInfo_v2)>(
            nvml("nvmlDeviceGetMemoryInfo_v2"))(device, &memory);
        if (result == NVML_SUCCESS) {
          line("nvml2 %u total=%llu free=%llu used=%llu reserved=%llu", index_value, memory.total,
               memory.free, memory.used, memory.reserved);
        } else {
          line("nvml2 %u error%d", index_value, result);
        }
      }
    } else if (step == "reset" || step == "reset-v1" || step == "primaryrelease" ||
               step == "primaryrelease-v1") {
      CUdevice device = 0;
      d_.get_device(&device);
      auto call = step == "reset"            ? ctx_reset_
                  : step == "reset-v1"       ? ctx_reset_v1_
                  : step == "primaryrelease" ? primary_release_
                                             : primary_release_v1_;
      line("%s %s", step.c_str(), cuda_result_name(call(device)));
    } else if (step == "ctxcreate") {
      line("ctxcreate %s", cuda_result_name(ctx_create_(&created_, 0, 0)));
    } else if (step == "ctxdestroy" || step == "ctxdestroy-v1") {
      auto destroy = step == "ctxdestroy" ? ctx_destroy_ : ctx_destroy_v1_;
      line("%s %s", step.c_str(), cuda_result_name(destroy(created_)));
    } else if (step == "lookup") {
      const char* name = next(i);
      int version = atoi(next(i));
      void* found = nullptr;
      CUresult result = cuGetProcAddress_v2(name, &found, version, 0, nullptr);
      line("lookup %s %d %s%s", name, version, cuda_result_name(result), found ? " found" : "");
    } else if (step == "dlsym") {
      const char* name = next(i);
      line("dlsym %s %s", name, dlsym(libcuda_, name) != nullptr ? "found" : "missing");
    } else if (step == "initialized") {
      line("initialized %s", fake_cuda_initialized() ? "yes" : "no");
    } else if (step == "touch" || step == "await") {
      // Two probes take turns: one touches a file, the other waits (up to 20 s) until it exists.
      const char* path = next(i);
      const char* name = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
      bool done = false;
      if (step == "touch") {
        FILE* file = fopen(path, "w");
        done = file != nullptr && fclose(file) == 0;
      } else {
        for (int waited_ms = 0; !done && waited_ms < 20000; ++waited_ms) {
          done = access(path, F_OK) == 0;
          if (!done) usleep(1000);
        }
      }
      line("%s %s%s", step.c_str(), name, done ? "" : " failed");
    } else if (step == "hold") {
      line("holding");
      while (true) pause();
    } else if (step == "fork") {
      int end = i + 1;
      int depth = 1;
      for (; end < last; ++end) {
        if (strcmp(argv[end], "fork") == 0) ++depth;
        if (strcmp(argv[end], "end") == 0 && --depth == 0) break;
      }
      if (end >= last) usage("fork without end");
      pid_t child = fork();
      if (child == 0) {
        run(argv, i + 1, end, "child ");
        exit(0);
      }
      int status = 0;
      waitpid(child, &status, 0);
      prefix_ = prefix;
      line("fork exit=%d", WIFEXITED(status) ? WEXITSTATUS(status) : -1);
      i = end;
    } else if (step == "stress") {
      int threads = atoi(next(i));
      int iterations = atoi(next(i));
      int max_mib = atoi(next(i));
      unsigned seed = unsigned(atoi(next(i)));
      StressCounts counts = run_stress(d_, threads, iterations, max_mib, seed);
      line("stress ok=%llu oom=%llu other=%llu", counts.ok, counts.oom, counts.other);
    } else {
      usage(("unknown step '" + step + "'").c_str());
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  Options options;
  int i = 1;
  for (; i < argc && strncmp(argv[i], "--", 2) == 0; ++i) {
    std::string flag = argv[i];
    if (flag == "--api" && i + 1 < argc) {
      options.api = argv[++i];
    } else if (flag == "--per-thread") {
      options.per_thread = true;
    } else {
      usage("unknown flag");
    }
  }
  Probe probe(options);
  probe.run(argv, i, argc, "");
  return 0;
}
