/* http_fields.h - the parts of an HTTP response tpload reads (RFC 9110):
 * the status line, a header line's name and value, Content-Range.  Pure
 * parsers of one line each (bytes and a length in, fields out), for the
 * fetcher (http.c) and the fuzz target. */
#ifndef TPL_HTTP_FIELDS_H
#define TPL_HTTP_FIELDS_H

#include <stddef.h>
#include <stdint.h>

/* "HTTP/1.1 206 Partial Content" or "HTTP/2 404" (CRLF or not): the
 * three-digit status into *status.  Returns 0, or -1 when the line is
 * not a status line. */
int tpl__http_status_line(const char *line, size_t len, int *status);

/* "Name: value" (CRLF or not): the name and the value without the space
 * around it, both borrowed from `line`.  Returns 0, or -1 when the line
 * has no ':' or an empty name (the blank line that ends the headers
 * included). */
int tpl__http_header_split(const char *line, size_t len, const char **name,
                           size_t *name_len, const char **value,
                           size_t *value_len);

/* Whether header name `name` (`len` bytes) is `want`, in any case. */
int tpl__http_header_is(const char *name, size_t len, const char *want);

/* A Content-Range value. */
struct tpl__http_range_field {
  int has_range;  /* 0 for "bytes * / total" (an unsatisfied range) */
  uint64_t first; /* the first and last byte sent, when has_range */
  uint64_t last;
  int has_total;  /* 0 for "bytes a-b / *" (length unknown) */
  uint64_t total; /* the object's size, when has_total */
};

/* Parses "bytes FIRST-LAST/TOTAL", "bytes * /TOTAL" or
 * "bytes FIRST-LAST/ *" (without the spaces around '/', which only keep
 * this comment a comment): decimal numbers without sign or spaces that
 * fit in 64 bits, FIRST <= LAST, LAST < TOTAL.  Returns 0, or -1 for
 * anything else. */
int tpl__http_content_range(const char *value, size_t len,
                            struct tpl__http_range_field *out);

#endif
