// The fake GPU's environment (see fake_libcuda.h), compiled into both fake libraries.
#include <fcntl.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include <string_view>

#include "fakes/fake_libcuda.h"

namespace {

uint64_t env_number(const char* name, uint64_t fallback) {
  const char* text = getenv(name);
  return text != nullptr && text[0] != '\0' ? strtoull(text, nullptr, 10) : fallback;
}

FakeDeviceUsage* map_usage() {
  const char* path = getenv("FAKE_CUDA_SHARED_FILE");
  if (path != nullptr && path[0] != '\0') {
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd >= 0 && ftruncate(fd, sizeof(FakeDeviceUsage)) == 0) {
      void* mapping =
          mmap(nullptr, sizeof(FakeDeviceUsage), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
      close(fd);
      if (mapping != MAP_FAILED) return static_cast<FakeDeviceUsage*>(mapping);
    }
    abort();  // a test asked for a shared device it cannot have: fail loudly
  }
  return new FakeDeviceUsage{};
}

FakeGpuConfig load() {
  FakeGpuConfig config;
  config.devices = int(env_number("FAKE_CUDA_DEVICES", 2));
  if (config.devices < 1 || config.devices > kFakeMaxDevices) config.devices = 2;
  config.total_bytes = env_number("FAKE_CUDA_TOTAL_BYTES", uint64_t(4) << 30);
  config.others_bytes = env_number("FAKE_CUDA_OTHERS_BYTES", 0);
  config.alloc_delay_us = env_number("FAKE_CUDA_ALLOC_DELAY_US", 0);
  const char* table = getenv("FAKE_CUDA_PROC_TABLE");
  config.private_proc_table = table != nullptr && std::string_view(table) == "private";
  config.newer_memalloc = env_number("FAKE_CUDA_NEWER_MEMALLOC", 0) != 0;
  config.usage = map_usage();
  return config;
}

}  // namespace

const FakeGpuConfig& fake_gpu_config() {
  static const FakeGpuConfig config = load();
  return config;
}
