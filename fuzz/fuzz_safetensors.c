/* fuzz_safetensors.c - libFuzzer target for the safetensors reader: the
 * input is a whole file (file size = input length); its length prefix and
 * header go through tpl__st_header_len and tpl__st_parse into a fresh
 * model, which is then freed.  Any crash, leak or UB is a bug. */
#include <stddef.h>
#include <stdint.h>

#include "fmt_safetensors.h"
#include "model.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  struct tpl__error err;
  struct tpl__model *m;
  uint64_t hlen;
  uint32_t idx;
  if (tpl__st_header_len(data, size, size, "fuzz", &hlen, &err) != 0) return 0;
  m = tpl__model_new(TPL_FMT_SAFETENSORS, ".");
  if (m == NULL) return 0;
  if (tpl__model_add_file(m, "fuzz", "fuzz", size, &idx) == 0)
    tpl__st_parse(data, size, size, "fuzz", idx, m, &err);
  tpl__model_free(m);
  return 0;
}
