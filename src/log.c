/* log.c - the daemon's event log: one timestamped line per event on
 * stderr, prefixed with the rank, so that the lines of every rank, merged
 * by mpirun, still say when and where each happened.  Which events are
 * logged is the caller's choice (daemon.c and its --log-level). */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "log.h"

#define LOG_LINE_MAX 1024

int tpl__log_level_parse(const char *name, int *level) {
  static const char *const names[] = {"quiet", "info", "debug"};
  for (int i = 0; i < 3; i++)
    if (strcmp(name, names[i]) == 0) {
      *level = i;
      return 0;
    }
  return -1;
}

/* "2026-11-30T12:00:00.123Z" into buf; returns its length. */
static size_t format_now(char *buf, size_t len) {
  struct timespec ts;
  struct tm tm;
  size_t n;
  clock_gettime(CLOCK_REALTIME, &ts);
  gmtime_r(&ts.tv_sec, &tm);
  n = strftime(buf, len, "%Y-%m-%dT%H:%M:%S", &tm);
  n += (size_t)snprintf(buf + n, len - n, ".%03ldZ", ts.tv_nsec / 1000000);
  return n < len ? n : len - 1;
}

/* Adds what snprintf reported to *used, capped at the room there was. */
static void advance(size_t *used, int wrote, size_t room) {
  if (wrote > 0) *used += (size_t)wrote < room ? (size_t)wrote : room - 1;
}

void tpl__log(uint32_t rank, const char *fmt, ...) {
  char line[LOG_LINE_MAX + 1]; /* + the newline */
  size_t n = format_now(line, LOG_LINE_MAX);
  va_list ap;
  advance(&n, snprintf(line + n, LOG_LINE_MAX - n, " rank %u: ", rank),
          LOG_LINE_MAX - n);
  va_start(ap, fmt);
  advance(&n, vsnprintf(line + n, LOG_LINE_MAX - n, fmt, ap), LOG_LINE_MAX - n);
  va_end(ap);
  line[n++] = '\n';
  /* A failed write has nowhere left to be reported. */
  ssize_t wrote = write(STDERR_FILENO, line, n);
  (void)wrote;
}
