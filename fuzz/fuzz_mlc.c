/* fuzz_mlc.c - libFuzzer target for the MLC weight-directory parser: the
 * input is tensor-cache.json, fed as bytes to tpl__mlc_parse_flags into a
 * fresh model (its files are listed, never opened), which is then freed,
 * twice: as a model to shard, and as a presharded cache (inspect,
 * verify), each then judged as --verify-md5 would (its files' md5sum
 * records).  No file is touched.  Any crash, leak or UB is a bug. */
#include <stdint.h>

#include "fmt_mlc_cache.h"
#include "mlc_md5.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  for (int presharded = 0; presharded < 2; presharded++) {
    struct tpl__error err;
    struct tpl__model *m = tpl__model_new(TPL_FMT_MLC, ".");
    if (m == NULL) return 0;
    if (tpl__mlc_parse_flags((const char *)data, size, "fuzz", presharded, m,
                             &err) == 0) {
      tpl__mlc_check_nonempty(m, "fuzz", &err);
      tpl__mlc_md5_ready(m, "fuzz", &err);
    }
    tpl__model_free(m);
  }
  return 0;
}
