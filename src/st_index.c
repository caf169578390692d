/* st_index.c - placeholder, being written. */
#include "readers.h"
int tpl__st_index_parse(const char *buf, size_t len, const char *dir,
                        struct tpl_model *m, struct tpl_error *err) {
  return tpl__fail(err, TPL_EINTERNAL, "%s: index reader not built", dir);
}
