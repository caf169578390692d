/* fuzz_shardinfo.c - libFuzzer target for the shard-info.json parser
 * (src/fmt_shardinfo.c): the input is fed as bytes to tpl__si_parse; a
 * parsed one is walked (every param's holder of every shard it was cut
 * into, and the rank layouts its cut gives, as a re-shard asks for them),
 * then freed.  No file is touched.  Any crash, leak or UB is a bug. */
#include <stdint.h>
#include <stdlib.h>

#include "dtype.h"
#include "fmt_shardinfo.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void walk(const struct tpl__si *si, const struct tpl__si_param *p) {
  struct tpl__layout l;
  for (uint32_t s = 0; s < si->tp; s++) {
    if (p->kind == TPL_SI_CUT && tpl__si_holder_of(p, s) == NULL) abort();
    if (p->kind == TPL_SI_CUT &&
        tpl__shard_layout(p->shape, p->ndim, tpl__dtype_size(p->dtype),
                          &p->spec, si->tp, s, &l) == 0 &&
        l.total != tpl__si_holder_of(p, s)->nbytes)
      abort();
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  struct tpl__error err;
  struct tpl__si *si = NULL;
  if (tpl__si_parse((const char *)data, size, "fuzz", &si, &err) != 0) return 0;
  for (size_t i = 0; i < si->nparams; i++)
    walk(si, &si->params[i]);
  tpl__si_free(si);
  return 0;
}
