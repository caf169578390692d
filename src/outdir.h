/* outdir.h - the output directory every layout's sink writes into
 * (DESIGN.md section 6's output rules): the check every rank makes of it,
 * `--force`'s cleaning, writes and fsyncs that beat while they run, and files
 * created where no reader takes them for output, then published under
 * their names. */
#ifndef TPL_OUTDIR_H
#define TPL_OUTDIR_H

#include <stddef.h>
#include <stdint.h>

#include "common.h"
#include "coord.h"

struct tpl__model;

/* A member of MODEL an output takes (its config, a tokenizer file): read
 * whole, through the model's origin, while the model is open. */
struct tpl__outdir_member {
  char *name; /* owned: its name in MODEL's directory */
  char *buf;  /* owned: its bytes, NUL-terminated */
  size_t len;
};

/* What a layout's sink is given (layout.h); must outlive the load. */
struct tpl__outdir_opts {
  const char *dir;   /* the output directory */
  const char *model; /* the MODEL it is written from */
  int force;         /* replace existing output */
  /* Rank 0: the members its sink took at prepare (tpl__outdir_take), for
   * its run, when the model is closed; freed by tpl__outdir_opts_clear. */
  struct tpl__outdir_member *members;
  size_t nmembers;
};

/* Member `name` of m, read whole (at most `cap` bytes) through m's
 * origin, kept in o.  Returns 0, -ENOENT when m has none (err naming it),
 * or the origin's code. */
int tpl__outdir_take(struct tpl__outdir_opts *o, const struct tpl__model *m,
                     const char *name, size_t cap, struct tpl__error *err);

/* Frees the members o took. */
void tpl__outdir_opts_clear(struct tpl__outdir_opts *o);

/* A sink's check of output directory DIR on `rank` (its own node's
 * view): creates it if missing; it must be a directory owned by this
 * user, writable by no one else (or sticky), and files can be created in
 * it.  Returns 0 or TPL_EOUTPUT / -errno. */
int tpl__outdir_check(const char *dir, uint32_t rank, struct tpl__error *err);

/* 0 when DIR holds no entry; else TPL_EOUTPUT naming one ("pass --force
 * to replace"). */
int tpl__outdir_require_empty(const char *dir, struct tpl__error *err);

/* --force's cleaning of DIR: removes the `nmarks` files `marks` first
 * (what vouches for a complete output: a half-replaced directory never
 * looks complete), then every entry `is_old` says is an earlier run's.
 * Missing files are fine.  Returns 0 or TPL_EOUTPUT. */
int tpl__outdir_remove_old(const char *dir, const char *const *marks,
                           size_t nmarks, int (*is_old)(const char *name),
                           struct tpl__error *err);

/* `n` bytes at `p` to fd, a MiB at a time, beating (c->beat) between
 * steps.  Returns 0 or -errno. */
int tpl__outdir_write_beating(int fd, const uint8_t *p, size_t n,
                              const struct tpl__coord *c);

/* fsync(fd), beating every 100 ms while it runs.  Returns 0 or -errno. */
int tpl__outdir_fsync_beating(int fd, const struct tpl__coord *c);

/* A file being written into DIR that no reader takes for output yet:
 * unnamed (O_TMPFILE), or at its temp name (a dot name the caller
 * chooses), registered with tmpguard.h until published or discarded. */
struct tpl__outdir_file {
  int fd;       /* -1 when closed or none */
  int named;    /* 1: lives at DIR/tmp */
  char tmp[80]; /* its temp name inside DIR */
};

/* Creates a file in `dir` for writing: unnamed (O_TMPFILE) when
 * `unnamed` is nonzero and the filesystem allows it, else at DIR/`tmp`
 * (a stale one replaced), which a SIGTERM, SIGINT or SIGHUP then removes
 * until the file is discarded or published.  Returns 0 or -errno (then
 * f->fd is -1 and nothing is left). */
int tpl__outdir_create(const char *dir, const char *tmp, int unnamed,
                       struct tpl__outdir_file *f);

/* Closes f's descriptor, keeping its temp name (a named file only).
 * Returns 0 or close's -errno. */
int tpl__outdir_close(struct tpl__outdir_file *f);

/* Drops a written but unpublished file: closed, its temp name removed
 * and forgotten.  A file already published or discarded is left alone. */
void tpl__outdir_discard(const char *dir, struct tpl__outdir_file *f);

/* Gives f the name DIR/`final` (replacing an old one): an unnamed file
 * first gets its temp name, then the temp is renamed over the final
 * name, so readers see the old file or the new, never a part.  The
 * directory is not fsynced (tpl__fsync_dir, once for all files).  The
 * file is closed either way; on failure its temp is gone.  Returns 0 or
 * -errno. */
int tpl__outdir_publish(const char *dir, struct tpl__outdir_file *f,
                        const char *final);

#endif
