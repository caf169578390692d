/* fuzz_wire_table.c - libFuzzer target for both forms of the tensor
 * table.  The attach reply's compact table (src/wire_table.c): any bytes
 * are decoded as a table; a table that decodes is encoded again and must
 * give back the same bytes, and laid out for reading in place it finds
 * each name at its index.  The table read in place (src/table_map.c): any
 * bytes, copied to aligned memory, are opened as a TPLM region against a store
 * of 1 MiB; a region that opens has every entry's name and bytes inside it
 * (ASan watches the reads), and looking up a name finds an entry so named. */
#include <stdlib.h>
#include <string.h>

#include "table_map.h"
#include "wire.h"

#define STORE_BYTES (1u << 20)

static void compact(const uint8_t *data, size_t size) {
  struct tpl__wire_response r = {0};
  struct tpl__tmap m;
  uint8_t *again = NULL;
  size_t len = 0, found;
  if (tpl__wire_table_decode(data, size, &r, NULL) == 0) {
    if (tpl__wire_table_encode(r.tensors, r.ntensors, &again, &len) != 0)
      abort();
    if (len != size || memcmp(again, data, size) != 0) abort();
    free(again);
    /* Laid out for reading in place (duplicate names are refused), it
     * opens unless an entry's sizes disagree, and then finds every name
     * where it was put. */
    if (tpl__tmap_build(r.tensors, r.ntensors, &again, &len, NULL) == 0) {
      if (tpl__tmap_open(again, len, UINT64_MAX, &m, NULL) == 0)
        for (size_t i = 0; i < r.ntensors; i++)
          if (tpl__tmap_find(&m, r.tensors[i].name, &found) != 0 || found != i)
            abort();
      free(again);
    }
  }
  tpl__wire_response_free(&r);
}

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
  compact(data, size);
  in_place(data, size);
  return 0;
}
