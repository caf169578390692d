/* preshard.c - the rank layout's sink: one rank's shard as a safetensors
 * file DIR/rank{R}.safetensors (header with its place in the grid, the
 * one definition `dump` shares), written where no reader sees it and
 * published whole (outdir.h), then rank 0's shard-info.json last.  The
 * sink's job-wide order (write, agree, publish, agree, shard-info.json)
 * is at the end.  While it writes and fsyncs, a rank beats (coord.h), so
 * the others wait for the agreement after the write under
 * --stall-timeout. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fileio.h"
#include "format.h"
#include "preshard.h"
#include "report.h"
#include "shardinfo.h"
#include "st_writer.h"
#include "stall.h"
#include "tmpguard.h"

/* "rank<digits>.safetensors": the shard file of some earlier run. */
static int is_rank_file(const char *name) {
  const char *p = name + 4;
  if (strncmp(name, "rank", 4) != 0 || *p < '0' || *p > '9') return 0;
  while (*p >= '0' && *p <= '9')
    p++;
  return strcmp(p, ".safetensors") == 0;
}

/* --force: shard-info.json goes first (a half-replaced directory never
 * looks complete), then every old rank file, so that a run with fewer
 * ranks than the last one leaves no stale rank{R}.safetensors behind. */
static int remove_old_output(const char *dir, struct tpl__error *err) {
  static const char *const marks[] = {"shard-info.json"};
  return tpl__outdir_remove_old(dir, marks, 1, is_rank_file, err);
}

/* The rank file's temp name where O_TMPFILE is missing. */
static void temp_name(char *buf, size_t len, uint32_t rank) {
  snprintf(buf, len, ".rank%u.safetensors.tmp", rank);
}

static int preshard_check(void *ctx, uint32_t rank, struct tpl__error *err) {
  return tpl__outdir_check(((const struct tpl__outdir_opts *)ctx)->dir, rank,
                           err);
}

/* MODEL's config (its format's: config.json, or an MLC directory's
 * mlc-chat-config.json), when it has one, to be copied beside the rank
 * files: the output is then a MODEL of its own (a presharded directory,
 * reshard.h), whose preset is found from it as from the original's. */
static int take_config(struct tpl__outdir_opts *o, const struct tpl__model *m,
                       struct tpl__error *err) {
  const struct tpl__format *f;
  int rc;
  if (m == NULL) return 0; /* a sink driven without a model (its tests) */
  f = tpl__format_of(m->format);
  rc = tpl__outdir_take(o, m, f != NULL ? f->config : "config.json",
                        TPL_MAX_JSON_FILE, err);
  return rc == -ENOENT || rc == TPL_EDENIED ? 0 : rc;
}

/* Rank 0's check before loading (the sink's prepare step): its check of
 * DIR (preshard_check), then without --force, DIR must be empty (old
 * output, the model's own files or anything else is refused).  With
 * --force, removes the old shard-info.json (so a half-replaced directory
 * never looks complete) and every old rank<digits>.safetensors (so fewer
 * ranks than last time leave no stale file).  Returns 0 or TPL_EOUTPUT /
 * -errno. */
static int preshard_prepare(void *ctx, const struct tpl__model *m,
                            struct tpl__error *err) {
  struct tpl__outdir_opts *o = ctx;
  int rc = preshard_check(ctx, 0, err);
  if (rc == 0 && !o->force) rc = tpl__outdir_require_empty(o->dir, err);
  if (rc == 0) rc = take_config(o, m, err);
  if (rc != 0) return rc;
  return o->force ? remove_old_output(o->dir, err) : 0;
}

int tpl__rank_file_header(const struct tpl__st_out *t, size_t n,
                          const struct tpl__grid *g, uint32_t rank,
                          const char *fingerprint, uint8_t **hdr, size_t *len) {
  struct tpl__pos c = tpl__grid_coord(g, rank);
  uint32_t v[8] = {c.t, g->tp, rank, g->world, c.p, g->pp, c.d, g->dp};
  char s[8][16];
  const char *meta[18] = {"tp_rank",    s[0], "tp_size", s[1], "rank",    s[2],
                          "world_size", s[3], "pp_rank", s[4], "pp_size", s[5],
                          "dp_rank",    s[6], "dp_size", s[7]};
  size_t nmeta = g->pp * g->dp > 1 ? 8 : 2;
  for (int i = 0; i < 8; i++)
    snprintf(s[i], sizeof(s[i]), "%u", v[i]);
  if (fingerprint != NULL) {
    meta[2 * nmeta] = "fingerprint";
    meta[2 * nmeta++ + 1] = fingerprint;
  }
  return tpl__st_build_header(t, n, meta, nmeta, hdr, len);
}

static int write_header(int fd, const char *dir, const struct tpl__job *job,
                        uint32_t rank, const char *fp, struct tpl__error *err) {
  struct tpl__st_out *outs = calloc(job->ntensors + 1, sizeof(*outs));
  uint8_t *hdr = NULL;
  size_t hlen = 0, n = 0;
  int rc;
  if (outs == NULL) return tpl__oom(err);
  for (size_t i = 0; i < job->ntensors; i++) {
    const struct tpl__job_tensor *t = &job->tensors[i];
    if (t->store_offset == UINT64_MAX) continue; /* not this stage's */
    outs[n].name = t->name;
    outs[n].dtype = t->dtype;
    outs[n].ndim = t->ndim;
    outs[n].shape = t->rank_shape;
    outs[n++].nbytes = t->rank_bytes;
  }
  rc = tpl__rank_file_header(outs, n, &job->grid, rank, fp, &hdr, &hlen);
  free(outs);
  if (rc == 0) rc = tpl__write_full(fd, hdr, hlen);
  free(hdr);
  if (rc != 0)
    return tpl__fail(err, rc, "%s/rank%u.safetensors: cannot write: %s", dir,
                     rank, tpl_strerror(rc));
  return 0;
}

/* Writes this rank's safetensors file (header with its place in the
 * grid, tpl__rank_file_header; the tensors its stage holds, in checkpoint
 * order) to a file no reader will take for output and fsyncs it, beating
 * all along (c->beat).  Disk full is -ENOSPC (exit 74).  On failure
 * nothing is left in DIR and f->fd is -1. */
static int write_rank_file(const char *dir, const struct tpl__loaded *l,
                           const struct tpl__coord *c, const char *fp,
                           struct tpl__outdir_file *f, struct tpl__error *err) {
  const struct tpl__job *job = l->job;
  uint32_t rank = c->rank;
  char tmp[64];
  int rc;
  temp_name(tmp, sizeof(tmp), rank);
  rc = tpl__outdir_create(dir, tmp, 1, f);
  if (rc != 0)
    return tpl__fail(err, rc == -ENOSPC ? -ENOSPC : TPL_EOUTPUT,
                     "%s: cannot create rank %u's file: %s", dir, rank,
                     strerror(-rc));
  rc = write_header(f->fd, dir, job, rank, fp, err);
  if (rc == 0) tpl__stall_test_pause("written", rank);
  for (size_t i = 0; rc == 0 && i < job->ntensors; i++) {
    const struct tpl__job_tensor *t = &job->tensors[i];
    if (t->store_offset == UINT64_MAX) continue;
    rc = tpl__outdir_write_beating(f->fd, l->store->base + t->store_offset,
                                   (size_t)t->rank_bytes, c);
    if (rc != 0)
      rc = tpl__fail(err, rc, "%s/rank%u.safetensors: writing '%s': %s", dir,
                     rank, t->name, tpl_strerror(rc));
  }
  if (rc == 0 && (rc = tpl__outdir_fsync_beating(f->fd, c)) != 0)
    tpl__fail(err, rc, "%s/rank%u.safetensors: fsync: %s", dir, rank,
              tpl_strerror(rc));
  if (rc != 0) tpl__outdir_discard(dir, f);
  return rc;
}

/* Gives the written file its name DIR/rank{R}.safetensors (replacing an
 * old one, tpl__outdir_publish) and fsyncs DIR; on failure the file is
 * gone. */
static int publish(const char *dir, uint32_t rank, struct tpl__outdir_file *f,
                   struct tpl__error *err) {
  char final[64];
  int rc;
  snprintf(final, sizeof(final), "rank%u.safetensors", rank);
  rc = tpl__outdir_publish(dir, f, final);
  if (rc == 0) rc = tpl__fsync_dir(dir);
  if (rc != 0)
    return tpl__fail(err, rc, "%s/%s: cannot publish: %s", dir, final,
                     tpl_strerror(rc));
  return 0;
}

/* Removes DIR/rank{R}.safetensors (after a failure elsewhere). */
static void unpublish(const char *dir, uint32_t rank) {
  char name[64], *p;
  snprintf(name, sizeof(name), "rank%u.safetensors", rank);
  p = tpl__path_join(dir, name);
  if (p != NULL) unlink(p);
  free(p);
}

/* Removes the members rank 0 wrote (after a failure elsewhere). */
static void unpublish_members(const struct tpl__outdir_opts *o) {
  for (size_t i = 0; i < o->nmembers; i++) {
    char *p = tpl__path_join(o->dir, o->members[i].name);
    if (p != NULL) unlink(p);
    free(p);
  }
}

/* --- the sink: the job-wide order --- */

/* Rank 0, last: DIR/shard-info.json from the job and its LoadReport's
 * per-rank bytes and checksums. */
static int write_shard_info(const char *dir, const struct tpl__loaded *l,
                            struct tpl__error *err) {
  struct tpl__report *rep = NULL;
  json_t *info = NULL;
  char *text = NULL;
  int rc = tpl__report_decode(l->report, l->report_len, &rep, NULL);
  if (rc == 0 && rep->ntensors != l->job->ntensors) rc = TPL_EPEER;
  if (rc == 0) rc = tpl__shardinfo_build(l->job, rep->infos, &info);
  if (rc == 0) {
    text = json_dumps(info, JSON_INDENT(1) | JSON_PRESERVE_ORDER);
    rc = text ? 0 : -ENOMEM;
  }
  if (rc == 0)
    rc =
        tpl__write_file_atomic(dir, "shard-info.json", text, strlen(text), err);
  else
    tpl__fail(err, rc, "%s/shard-info.json: cannot build: %s", dir,
              tpl_strerror(rc));
  free(text);
  json_decref(info);
  tpl__report_free(rep);
  return rc;
}

/* Rank 0: the members taken at prepare (config.json), before
 * shard-info.json, which marks the directory complete. */
static int write_members(void *ctx, struct tpl__error *err) {
  const struct tpl__outdir_opts *o = ctx;
  int rc = 0;
  for (size_t i = 0; rc == 0 && i < o->nmembers; i++)
    rc = tpl__write_file_atomic(o->dir, o->members[i].name, o->members[i].buf,
                                o->members[i].len, err);
  return rc;
}

static int preshard_run(void *ctx, const struct tpl__loaded *l,
                        const struct tpl__coord *c, struct tpl__error *err) {
  const char *dir = ((const struct tpl__outdir_opts *)ctx)->dir;
  struct tpl__outdir_file f = {.fd = -1};
  const char *fp = l->fingerprint;
  int rc, all;
  if (c->beats_begin != NULL) c->beats_begin(c->ctx);
  tpl__stall_test_stop("write", c->rank);
  rc = write_rank_file(dir, l, c, fp != NULL && fp[0] ? fp : NULL, &f, err);
  all = c->agree_after_beats != NULL ? c->agree_after_beats(c->ctx, rc, err)
                                     : c->agree(c->ctx, rc, err);
  /* Once files get names, a SIGTERM, SIGINT or SIGHUP waits until the
   * directory is complete or cleaned (a few milliseconds): a signal
   * between the renames and shard-info.json would otherwise leave rank
   * files that no shard-info.json vouches for.  Held, not blocked: the
   * kernel may give it to any thread (MPI's, the fsync's). */
  tpl__tmpguard_hold();
  if (all == 0) {
    rc = publish(dir, c->rank, &f, err);
    all = c->agree(c->ctx, rc, err);
  }
  tpl__outdir_discard(dir, &f);
  if (all == 0 && c->rank == 0) rc = write_members(ctx, err);
  if (rc == 0 && all == 0 && c->rank == 0) rc = write_shard_info(dir, l, err);
  all = c->agree(c->ctx, rc, err);
  if (all != 0) unpublish(dir, c->rank);
  if (all != 0 && c->rank == 0) unpublish_members(ctx);
  tpl__tmpguard_release();
  return all;
}

struct tpl__sink tpl__preshard_sink(struct tpl__outdir_opts *o) {
  struct tpl__sink s = {.prepare = preshard_prepare,
                        .check = preshard_check,
                        .run = preshard_run,
                        .ctx = o};
  return s;
}
