/* serve.h - `tpload serve`'s sink: after the load, every rank seals its
 * store and serves it on DIR/rank{R}.sock (daemon.c) until the job shuts
 * down. */
#ifndef TPL_SERVE_H
#define TPL_SERVE_H

#include "coord.h"

/* The serve sink's options; must outlive the load. */
struct tpl__serve_opts {
  const char *socket_dir;
  const char *ready_file; /* may be NULL */
  const char *model;      /* the MODEL argument (a URL's query included):
                             what a reload without MODEL loads again */
  int log_level;          /* enum tpl__log_level (log.h) */
};

/* The serve sink: every rank checks the socket directory and rank 0
 * claims the ready file before any byte moves; after the load every rank
 * seals its store, rank 0 draws the job id and shares it, and every rank
 * runs its daemon with the job's coordination.  The store is a memfd. */
struct tpl__sink tpl__serve_sink(const struct tpl__serve_opts *o);

#endif
