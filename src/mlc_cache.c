/* mlc_cache.c - placeholder, being written. */
#include "readers.h"
int tpl__mlc_parse(const char *buf, size_t len, const char *dir,
                   const char *cache_name, struct tpl_model *m,
                   struct tpl_error *err) {
  return tpl__fail(err, TPL_EINTERNAL, "%s: MLC reader not built", dir);
}
