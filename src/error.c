/* error.c - the project's error table: code to text, code to exit status,
 * and the formatter every module uses to describe a failure. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"

const char *tpl_strerror(int code) {
  switch (code) {
#define TPL_STRERROR_CASE(name, val, msg, ex)                                  \
  case TPL_##name:                                                             \
    return msg;
    TPL_ERRNO_MAP(TPL_STRERROR_CASE)
#undef TPL_STRERROR_CASE
  case 0:
    return "success";
  default:
    break;
  }
  if (code < 0 && code > -4096) return strerror(-code);
  return "unknown error";
}

/* The exit code of an errno; any other is an I/O error (74: EIO,
 * ENOSPC, EDQUOT, short reads ...).  75 (try again): a daemon busy with a
 * reload, a watch whose time was up. */
static const struct {
  int errnum, exit_code;
} errno_exits[] = {
    {ENOENT, 66}, {ENOTDIR, 66}, {EACCES, 73},       {EPERM, 73},
    {EEXIST, 73}, {EROFS, 73},   {ECONNREFUSED, 69}, {ECONNRESET, 69},
    {EPIPE, 69},  {ENOMEM, 70},  {EBUSY, 75},        {ETIMEDOUT, 75},
};

static int errno_exit_code(int e) {
  for (size_t i = 0; i < ARRAY_SIZE(errno_exits); i++)
    if (errno_exits[i].errnum == e) return errno_exits[i].exit_code;
  return 74;
}

int tpl_exit_code(int code) {
  switch (code) {
  case 0:
    return 0;
#define TPL_EXIT_CASE(name, val, msg, ex)                                      \
  case TPL_##name:                                                             \
    return ex;
    TPL_ERRNO_MAP(TPL_EXIT_CASE)
#undef TPL_EXIT_CASE
  default:
    break;
  }
  if (code < 0 && code > -4096) return errno_exit_code(-code);
  return 70;
}

const char *tpl_version(void) {
  return PACKAGE_VERSION;
}

/* A message too long for err->msg keeps its start (the file, the tensor)
 * and this much of its end (the reason), with MIDDLE between. */
#define TAIL_KEPT 640
static const char MIDDLE[] = " [...] ";

/* Whether byte b continues a UTF-8 character (a cut never splits one). */
static int continues(char b) {
  return ((unsigned char)b & 0xC0) == 0x80;
}

/* text (n bytes) and then suffix into dst of cap bytes, NUL-terminated:
 * whole when it fits, else its start, MIDDLE and its end. */
static void fit_message(char *dst, size_t cap, const char *text, size_t n,
                        const char *suffix) {
  size_t slen = strlen(suffix), head, from;
  if (n + slen < cap) {
    memcpy(dst, text, n);
    memcpy(dst + n, suffix, slen + 1);
    return;
  }
  head = cap - 1 - TAIL_KEPT - (sizeof(MIDDLE) - 1);
  from = n + slen - TAIL_KEPT; /* TAIL_KEPT > slen: within text */
  while (head > 0 && continues(text[head]))
    head--;
  while (from < n && continues(text[from]))
    from++;
  memcpy(dst, text, head);
  memcpy(dst + head, MIDDLE, sizeof(MIDDLE) - 1);
  head += sizeof(MIDDLE) - 1;
  memcpy(dst + head, text + from, n - from);
  memcpy(dst + head + (n - from), suffix, slen + 1);
}

int tpl__fail(struct tpl__error *err, int code, const char *fmt, ...) {
  char small[2048], *big = NULL;
  const char *text = small;
  va_list ap;
  int n;
  if (err == NULL) return code;
  va_start(ap, fmt);
  n = vsnprintf(small, sizeof(small), fmt, ap);
  va_end(ap);
  if (n < 0) {
    n = 0;
    small[0] = '\0';
  }
  if ((size_t)n >= sizeof(small) && (big = malloc((size_t)n + 1)) != NULL) {
    va_start(ap, fmt);
    vsnprintf(big, (size_t)n + 1, fmt, ap);
    va_end(ap);
    text = big;
  } else if ((size_t)n >= sizeof(small)) {
    n = (int)sizeof(small) - 1; /* no memory for more: its start */
  }
  /* Out of memory says so, whatever the step that met it called it. */
  fit_message(err->msg, sizeof(err->msg), text, (size_t)n,
              code == -ENOMEM && strstr(text, "memory") == NULL
                  ? ": out of memory"
                  : "");
  free(big);
  err->code = code;
  return code;
}

void tpl__error_text(const struct tpl__error *err, int rc, char *buf,
                     size_t len) {
  if (buf == NULL || len == 0) return;
  snprintf(buf, len, "%s",
           rc == 0       ? ""
           : err->msg[0] ? err->msg
                         : tpl_strerror(rc));
}

int tpl__oom(struct tpl__error *err) {
  return tpl__fail(err, -ENOMEM, "out of memory");
}
