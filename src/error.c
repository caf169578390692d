/* error.c - the project's error table: code to text, code to exit status,
 * and the formatter every module uses to describe a failure. */
#include <errno.h>
#include <stdio.h>
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

int tpl__fail(struct tpl_error *err, int code, const char *fmt, ...) {
  if (err != NULL) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
    va_end(ap);
    err->code = code;
  }
  return code;
}

void tpl__error_text(const struct tpl_error *err, int rc, char *buf,
                     size_t len) {
  if (buf == NULL || len == 0) return;
  snprintf(buf, len, "%s",
           rc == 0       ? ""
           : err->msg[0] ? err->msg
                         : tpl_strerror(rc));
}
