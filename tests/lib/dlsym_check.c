/* dlsym_check.c - `dlsym_check LIBRARY NAME...`: opens the shared library
 * as a consumer's dlopen would and resolves every NAME in it; prints each
 * that does not resolve and exits 1 if any did not (tests/mpi/install.sh
 * passes every function tpload.h declares). */
#include <dlfcn.h>
#include <stdio.h>

int main(int argc, char **argv) {
  void *lib;
  int missing = 0;
  if (argc < 2) {
    fprintf(stderr, "usage: dlsym_check LIBRARY NAME...\n");
    return 64;
  }
  lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (lib == NULL) {
    fprintf(stderr, "dlsym_check: %s\n", dlerror());
    return 1;
  }
  for (int i = 2; i < argc; i++)
    if (dlsym(lib, argv[i]) == NULL) {
      printf("%s\n", argv[i]);
      missing = 1;
    }
  dlclose(lib);
  return missing;
}
