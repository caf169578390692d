/* curl_dl.h - libcurl loaded on first use, not at start-up.  Linked, its
 * library and the ~30 it pulls in (TLS, Kerberos, LDAP, SSH, ...) are
 * mapped and relocated in every process, every rank of every load: 5
 * MiB of each rank's RSS (about 1 MiB of it private) that only a MODEL
 * URL uses.  Here the curl_* functions http.c, s3.c and hf.c call are the
 * functions of libcurl.so.4 found by dlopen the first time any is called
 * (tpl__curl_load, which tpl__http_open calls first to fail cleanly).
 * Include this instead of <curl/curl.h>: setopt's compile-time type
 * checks (typecheck-gcc.h) are off, its arguments go through as given. */
#ifndef TPL_CURL_DL_H
#define TPL_CURL_DL_H
#define CURL_DISABLE_TYPECHECK 1
#include <curl/curl.h>

#include "common.h"

struct tpl__curl {
  CURLcode (*global_init)(long);
  CURL *(*easy_init)(void);
  void (*easy_reset)(CURL *);
  void (*easy_cleanup)(CURL *);
  CURLcode (*easy_setopt)(CURL *, CURLoption, ...);
  CURLcode (*easy_getinfo)(CURL *, CURLINFO, ...);
  const char *(*easy_strerror)(CURLcode);
  CURLM *(*multi_init)(void);
  CURLMcode (*multi_setopt)(CURLM *, CURLMoption, ...);
  CURLMcode (*multi_add_handle)(CURLM *, CURL *);
  CURLMcode (*multi_remove_handle)(CURLM *, CURL *);
  CURLMcode (*multi_perform)(CURLM *, int *);
  CURLMcode (*multi_poll)(CURLM *, struct curl_waitfd *, unsigned int, int,
                          int *);
  CURLMsg *(*multi_info_read)(CURLM *, int *);
  CURLMcode (*multi_cleanup)(CURLM *);
  struct curl_slist *(*slist_append)(struct curl_slist *, const char *);
  void (*slist_free_all)(struct curl_slist *);
};

/* Loads libcurl once (thread-safe); 0, or TPL_EINTERNAL naming dlerror. */
int tpl__curl_load(struct tpl__error *err);
/* The loaded functions; loads them, or exits 70 saying why. */
const struct tpl__curl *tpl__curl_fns(void);

/* curl.h names these three macros of themselves (for its type checks). */
#undef curl_easy_setopt
#undef curl_easy_getinfo
#undef curl_multi_setopt
#define curl_global_init (tpl__curl_fns()->global_init)
#define curl_easy_init (tpl__curl_fns()->easy_init)
#define curl_easy_reset (tpl__curl_fns()->easy_reset)
#define curl_easy_cleanup (tpl__curl_fns()->easy_cleanup)
#define curl_easy_setopt (tpl__curl_fns()->easy_setopt)
#define curl_easy_getinfo (tpl__curl_fns()->easy_getinfo)
#define curl_easy_strerror (tpl__curl_fns()->easy_strerror)
#define curl_multi_init (tpl__curl_fns()->multi_init)
#define curl_multi_setopt (tpl__curl_fns()->multi_setopt)
#define curl_multi_add_handle (tpl__curl_fns()->multi_add_handle)
#define curl_multi_remove_handle (tpl__curl_fns()->multi_remove_handle)
#define curl_multi_perform (tpl__curl_fns()->multi_perform)
#define curl_multi_poll (tpl__curl_fns()->multi_poll)
#define curl_multi_info_read (tpl__curl_fns()->multi_info_read)
#define curl_multi_cleanup (tpl__curl_fns()->multi_cleanup)
#define curl_slist_append (tpl__curl_fns()->slist_append)
#define curl_slist_free_all (tpl__curl_fns()->slist_free_all)
#endif
