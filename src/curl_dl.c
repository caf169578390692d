/* curl_dl.c - libcurl's functions, found by dlopen on first use (see
 * curl_dl.h for why it is not linked). */
#include "curl_dl.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* libcurl's soname since 7.16 (2006). */
#define CURL_SONAME "libcurl.so.4"

static struct tpl__curl fns;
static void *lib; /* never closed: libcurl stays for the process's life */
static pthread_once_t once = PTHREAD_ONCE_INIT;
static int ok;        /* set once every function is found */
static char why[512]; /* else why not */

/* dlsym's void * to a function pointer: copied, as ISO C has no cast. */
#define FIND(field, name)                                                      \
  do {                                                                         \
    void *p_ = dlsym(lib, name);                                               \
    if (p_ == NULL) {                                                          \
      snprintf(why, sizeof(why), "%s: no %s", CURL_SONAME, name);              \
      return;                                                                  \
    }                                                                          \
    memcpy(&fns.field, &p_, sizeof(p_));                                       \
  } while (0)

static void load(void) {
  lib = dlopen(CURL_SONAME, RTLD_NOW | RTLD_LOCAL);
  if (lib == NULL) {
    const char *e = dlerror();
    snprintf(why, sizeof(why), "%s", e != NULL ? e : CURL_SONAME);
    return;
  }
  FIND(global_init, "curl_global_init");
  FIND(easy_init, "curl_easy_init");
  FIND(easy_reset, "curl_easy_reset");
  FIND(easy_cleanup, "curl_easy_cleanup");
  FIND(easy_setopt, "curl_easy_setopt");
  FIND(easy_getinfo, "curl_easy_getinfo");
  FIND(easy_strerror, "curl_easy_strerror");
  FIND(multi_init, "curl_multi_init");
  FIND(multi_setopt, "curl_multi_setopt");
  FIND(multi_add_handle, "curl_multi_add_handle");
  FIND(multi_remove_handle, "curl_multi_remove_handle");
  FIND(multi_perform, "curl_multi_perform");
  FIND(multi_poll, "curl_multi_poll");
  FIND(multi_info_read, "curl_multi_info_read");
  FIND(multi_cleanup, "curl_multi_cleanup");
  FIND(slist_append, "curl_slist_append");
  FIND(slist_free_all, "curl_slist_free_all");
  ok = 1;
}

static int loaded(void) {
  return pthread_once(&once, load) == 0 && ok;
}

int tpl__curl_load(struct tpl__error *err) {
  if (!loaded())
    return tpl__fail(err, TPL_EINTERNAL, "libcurl: cannot load: %s", why);
  return 0;
}

const struct tpl__curl *tpl__curl_fns(void) {
  if (!loaded()) {
    fprintf(stderr, "tpload: libcurl: cannot load: %s\n", why);
    exit(70);
  }
  return &fns;
}
