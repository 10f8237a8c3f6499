// The one seeded generator of gpufrac: SplitMix64 (Steele, Lea and Flood, 2014) as pure
// functions of a 64-bit state, so that any element of a stream can be computed on its own, in any
// order, on any thread, on the host or on the GPU, with the same bits. Preset weights
// (engine/model/presets.cpp and engine/cuda/device_weights.cu), the samplers' draws
// (engine/model/sampler.cpp and engine/cuda/gpu_sampler.cu), the engine's per-request seeds and
// bench's workload all draw from it; a change here changes every preset's weights, every seeded
// sample and every workload, so tests pin its outputs.
//
// Header-only, constexpr, no state. Compiled by nvcc the functions are __host__ __device__.
#pragma once

#include <cstdint>
#include <string_view>

#include "common/host_device.h"

namespace gpufrac {

// SplitMix64's increment: 2^64 / golden ratio, odd.
inline constexpr uint64_t kSplitMixGamma = 0x9e3779b97f4a7c15ull;

// SplitMix64's output function (a bijective finalizer of 64 bits).
GPUFRAC_HOST_DEVICE constexpr uint64_t mix64(uint64_t x) {
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// Output n of the SplitMix64 stream whose state starts at `state` (n = 1: the first output).
GPUFRAC_HOST_DEVICE constexpr uint64_t splitmix64_nth(uint64_t state, uint64_t n) {
  return mix64(state + n * kSplitMixGamma);
}

// The first output of the stream at `x`: the usual one-call hash of a 64-bit key.
GPUFRAC_HOST_DEVICE constexpr uint64_t splitmix64(uint64_t x) {
  return splitmix64_nth(x, 1);
}

// Two keys combined into one seed (order matters).
GPUFRAC_HOST_DEVICE constexpr uint64_t mix_seed(uint64_t a, uint64_t b) {
  return splitmix64(a ^ splitmix64(b));
}

// FNV-1a of a name: the key of a named stream (a tensor's name in the preset generator).
constexpr uint64_t fnv1a(std::string_view name) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : name) h = (h ^ c) * 0x100000001b3ull;
  return h;
}

}  // namespace gpufrac
