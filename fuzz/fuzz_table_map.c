/* fuzz_table_map.c - libFuzzer target for the tensor table a consumer
 * reads in place (src/table_map.c): any bytes, copied to aligned memory,
 * are opened as a TPLM region against a store of 1 MiB; a region that
 * opens has every entry's name and bytes inside it (ASan watches the
 * reads), and looking up a name finds an entry so named. */
#include <stdlib.h>
#include <string.h>

#include "table_map.h"

#define STORE_BYTES (1u << 20)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void in_place(const uint8_t *data, size_t size) {
  uint64_t *words = malloc((size / 8 + 1) * 8);
  struct tpl__tmap m;
  if (words == NULL) return;
  memcpy(words, data, size);
  if (tpl__tmap_open((const uint8_t *)words, size, STORE_BYTES, &m, NULL) ==
      0) {
    for (size_t i = 0; i < m.count; i++) {
      const char *name = m.names + m.entries[i].name_off;
      size_t found;
      if (m.entries[i].offset + m.entries[i].nbytes > STORE_BYTES) abort();
      if (tpl__tmap_find(&m, name, &found) == 0 &&
          strcmp(m.names + m.entries[found].name_off, name) != 0)
        abort();
    }
  }
  free(words);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  in_place(data, size);
  return 0;
}
