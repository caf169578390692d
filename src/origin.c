/* origin.c - the table of origins (origin.h) and the one choice of a
 * MODEL's: the first row that claims it.  A new origin is one file
 * exporting its descriptor and one row here, before the local one. */
#include <stddef.h>

#include "origin.h"
#include "url.h"

const struct tpl__origin *const tpl__origins[] = {
    &tpl__origin_http, &tpl__origin_local, /* claims every MODEL: last */
};
const size_t tpl__norigins = ARRAY_SIZE(tpl__origins);

const struct tpl__origin *tpl__origin_for(const char *model) {
  for (size_t i = 0; i + 1 < tpl__norigins; i++)
    if (tpl__origins[i]->claims(model)) return tpl__origins[i];
  return tpl__origins[tpl__norigins - 1];
}

const struct tpl__origin *tpl__origin_for_file(const char *url) {
  return url != NULL && url[0] != '\0' ? tpl__origin_for(url)
                                       : &tpl__origin_local;
}

const struct tpl__origin *tpl__model_origin(const struct tpl__model *m) {
  return m->origin != NULL ? m->origin : &tpl__origin_local;
}
