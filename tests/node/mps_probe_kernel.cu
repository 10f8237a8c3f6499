// The GPU half of node_mps_probe: which SMs a kernel of this process can reach, and a fault on
// purpose.
#include <cuda_runtime.h>

#include <string>
#include <vector>

namespace {

__global__ void record_sm(unsigned* sm_of_block, long long spin_cycles) {
  unsigned sm;
  asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));
  long long start = clock64();
  while (clock64() - start < spin_cycles) {
  }
  if (threadIdx.x == 0) sm_of_block[blockIdx.x] = sm;
}

__global__ void write_to(int* address) { *address = 1; }

}  // namespace

// A kernel that writes to an address nothing maps: the GPU raises an MMU fault, an illegal
// address (under MPS it reaches every client of the GPU). Returns what the synchronisation
// reports, "" when it reported nothing.
std::string provoke_illegal_address() {
  write_to<<<1, 1>>>(reinterpret_cast<int*>(0x10));
  cudaError_t error = cudaDeviceSynchronize();
  return error == cudaSuccess ? "" : cudaGetErrorString(error);
}

// Distinct SMs that `blocks` spinning blocks ran on (blocks spin long enough that the scheduler
// spreads them over every SM it may use), or -1 on a CUDA error.
int probe_distinct_sms(int blocks) {
  unsigned* device_sms = nullptr;
  if (cudaMalloc(&device_sms, sizeof(unsigned) * blocks) != cudaSuccess) return -1;
  record_sm<<<blocks, 128>>>(device_sms, 2'000'000);
  std::vector<unsigned> sms(size_t(blocks), 0);
  bool ok = cudaDeviceSynchronize() == cudaSuccess &&
            cudaMemcpy(sms.data(), device_sms, sizeof(unsigned) * blocks, cudaMemcpyDeviceToHost) == cudaSuccess;
  cudaFree(device_sms);
  if (!ok) return -1;
  std::vector<bool> seen(1024, false);
  int distinct = 0;
  for (unsigned sm : sms) {
    if (sm < seen.size() && !seen[sm]) {
      seen[sm] = true;
      ++distinct;
    }
  }
  return distinct;
}
