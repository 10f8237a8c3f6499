// The second definition of rtld_next_value() (see rtld_next_probe.cpp).
extern "C" int rtld_next_value() {
  return 2;
}

// Called by the probe so that the linker keeps this library among its dependencies.
extern "C" int rtld_next_second_loaded() {
  return 1;
}
