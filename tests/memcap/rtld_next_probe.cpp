// Prints what dlsym(RTLD_NEXT, ...) found when called from librtld_next_first: "2" is right
// (the next library's definition); "1" means dlsym judged the caller to be the wrong library,
// as it would if the shim's dlsym did not forward by tail call.
#include <stdio.h>

extern "C" int rtld_next_lookup();
extern "C" int rtld_next_second_loaded();

int main() {
  if (rtld_next_second_loaded() != 1) return 1;
  printf("%d\n", rtld_next_lookup());
  return 0;
}
