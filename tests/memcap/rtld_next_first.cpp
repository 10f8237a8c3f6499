// The first definition of rtld_next_value(), and a lookup of the next one with RTLD_NEXT, which
// must find librtld_next_second's (2), not this library's own (1), even with the shim's dlsym in
// between (see rtld_next_probe.cpp).
#include <dlfcn.h>

extern "C" int rtld_next_value() {
  return 1;
}

extern "C" int rtld_next_lookup() {
  auto next = reinterpret_cast<int (*)()>(dlsym(RTLD_NEXT, "rtld_next_value"));
  return next != nullptr ? next() : -1;
}
