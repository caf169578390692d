/* log.h - the daemon's one-line event log on stderr. */
#ifndef TPL_LOG_H
#define TPL_LOG_H

#include <stdint.h>

/* --log-level of `tpload serve`: what the daemon writes to stderr. */
enum tpl__log_level {
  TPL_LOG_QUIET = 0, /* nothing */
  TPL_LOG_INFO = 1,  /* start, ready, attach/detach, shutdown */
  TPL_LOG_DEBUG = 2  /* ... and one line per request */
};

/* Parses "quiet", "info" or "debug" into *level.  Returns 0, or -1 (and
 * leaves *level alone) for anything else. */
int tpl__log_level_parse(const char *name, int *level);

/* Writes one line to stderr: "2026-11-30T12:00:00.123Z rank R: MESSAGE",
 * the time in UTC with milliseconds.  The line is built whole and written
 * with one write(), so lines of several ranks sharing a pipe do not
 * interleave; a message too long is cut. */
void tpl__log(uint32_t rank, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

#endif
