/* engine_read.c - where the engine's bytes come from: the sources of
 * the job's files, rank 0's stream through the window of slots, --read
 * local and --verify-md5's pass (DESIGN.md sections 4.1, 4.2 and 4.3). */
#include <errno.h>
#include <fcntl.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#include "checkpoint.h"
#include "engine_internal.h"
#include "fdcache.h"
#include "job.h"
#include "local_read.h"
#include "mlc_md5.h"
#include "model.h"
#include "origin.h"
#include "source.h"
#include "stall.h"

/* Moves *scan past tensors that end at or before *pos (and empty ones)
 * and *pos over a gap to the next tensor's start.  Non-empty tensors of a
 * file are sorted by offset and never overlap, so their ends increase.
 * Returns 0 when the file has no bytes left to read. */
static int next_extent(const struct engine *e, const struct file_walk *w,
                       size_t *scan, uint64_t *pos) {
  for (; *scan < w->end; (*scan)++) {
    const struct tpl__job_tensor *t = &e->job->tensors[*scan];
    if (t->stored_bytes != 0 && t->file_offset + t->stored_bytes > *pos) {
      if (t->file_offset > *pos) *pos = t->file_offset;
      return 1;
    }
  }
  return 0;
}

/* End of the last non-empty tensor of the file, 0 when there is none. */
static uint64_t file_data_end(const struct engine *e,
                              const struct file_walk *w) {
  for (size_t i = w->end; i-- > w->first;) {
    const struct tpl__job_tensor *t = &e->job->tensors[i];
    if (t->stored_bytes != 0) return t->file_offset + t->stored_bytes;
  }
  return 0;
}

/* File bytes [from, to) into the slot's read buffer, at their offset from
 * the chunk's start. */
static int read_span(struct engine *e, uint32_t file, struct slot *s,
                     uint64_t from, uint64_t to, struct tpl__error *err) {
  return tpl__source_read(e->src, file, s->data + (from - s->pos), to - from,
                          from, err);
}

/* Tensor i's own bytes [start, start + n) (tensor-relative, one range of
 * layout l0) straight into rank 0's store. */
static int read_own(struct engine *e, size_t i, const struct tpl__layout *l0,
                    uint64_t start, uint64_t n, struct tpl__error *err) {
  const struct tpl__job_tensor *t = &e->job->tensors[i];
  uint8_t *dst =
      e->store.base + t->store_offset + tpl__layout_count(l0, 0, start);
  int rc = tpl__store_prepare(&e->store, t->store_offset + t->rank_bytes, err);
  if (rc != 0) return rc;
  return tpl__source_read(e->src, t->file, dst, n, t->file_offset + start, err);
}

/* A buffered chunk: rank 0's direct own parts (tpl__eng_own_direct) into its
 * store, every other byte into the slot's read buffer.  One copy less per
 * own byte of a cut tensor than reading it into the buffer and gathering
 * it from there. */
static int read_buffered(struct engine *e, uint32_t file, struct slot *s,
                         const struct file_walk *w, struct tpl__error *err) {
  uint64_t pos = s->pos, len = s->len, at = pos; /* read up to here */
  int rc = 0;
  for (size_t i = w->scan; rc == 0 && i < w->end; i++) {
    const struct tpl__job_tensor *t = &e->job->tensors[i];
    uint64_t tb = t->file_offset, te = tb + t->stored_bytes, start, n;
    struct tpl__layout l0;
    if (te <= pos || t->stored_bytes == 0) continue;
    if (tb >= pos + len) break;
    if (!tpl__eng_may_go_direct(e, i) ||
        tpl__job_layout(e->job, i, 0, &l0) != 0)
      continue; /* cache_layouts reports a layout that fails */
    n = tpl__eng_own_direct(e, i, &l0, (pos > tb ? pos : tb) - tb,
                            (pos + len < te ? pos + len : te) - tb, &start);
    if (n == 0) continue;
    if (tb + start > at) rc = read_span(e, file, s, at, tb + start, err);
    if (rc == 0) rc = read_own(e, i, &l0, start, n, err);
    at = tb + start + n;
  }
  if (rc == 0 && at < pos + len) rc = read_span(e, file, s, at, pos + len, err);
  return rc;
}

/* A failed read of rank 0's (a device's EIO, a file cut short, a direct
 * read refused past a file's first) fails the load, but only after the
 * stream, as a file that changed does (deferred_check): the chunks from
 * there on go out unread, so every rank still gets all its bytes and the
 * failure is agreed on (deliver) instead of ending the job, and a reload
 * keeps the generation it serves.  Returns 0: the stream goes on. */
static int defer_failure(struct engine *e, int rc,
                         const struct tpl__error *err) {
  if (rc != 0 && e->deferred == 0) {
    e->deferred = rc;
    e->deferred_err = *err;
  }
  return 0;
}

/* Starts reading the chunk [pos, pos + len) of `file` into slot s: a file
 * read direct as one read the source splits into requests in flight; a
 * buffered one is only announced here (read_buffered reads it). */
static int chunk_start(struct engine *e, uint32_t file, struct slot *s,
                       uint64_t pos, uint64_t len, struct tpl__error *err) {
  int rc = 0;
  s->pos = pos;
  s->len = len;
  s->data = tpl__source_place(e->src, file, s->read, pos);
  s->rd = (struct tpl__read){.file = file, .off = pos, .len = len};
  s->rd.dst = s->data;
  s->reading = e->deferred == 0;
  if (s->reading && e->direct) rc = tpl__source_start(e->src, &s->rd, err);
  if (s->reading && !e->direct) tpl__source_hint(e->src, file, pos, len);
  s->reading = s->reading && rc == 0;
  return defer_failure(e, rc, err);
}

/* A file that changed since rank 0 validated it fails the load, but only
 * after the stream: every rank still gets all its bytes, so the failure
 * is agreed on (deliver) instead of stranding the receivers, and a
 * reload keeps the generation it serves. */
static void deferred_check(struct engine *e, uint32_t file) {
  if (e->deferred == 0)
    e->deferred = tpl__model_file_unchanged(e->model, file, &e->deferred_err);
}

static int chunk_finish(struct engine *e, uint32_t file, struct slot *s,
                        const struct file_walk *w, struct tpl__error *err) {
  double t = tpl__now();
  int rc = 0;
  if (!s->reading) return 0;
  rc = e->direct ? tpl__source_finish(e->src, &s->rd, err)
                 : read_buffered(e, file, s, w, err);
  e->st.t_read += tpl__now() - t;
  e->bytes_read += s->len;
  return defer_failure(e, rc, err);
}

static struct slot *slot_of(struct engine *e, uint64_t chunk) {
  return &e->slots[chunk % NSLOTS];
}

/* The file's chunks in order, each delivered while the reads of the
 * next ones are in flight (NSLOTS).  A chunk's slot is reused once the
 * sends of the chunk delivered before it have completed. */
static int stream_file(struct engine *e, struct file_walk *w, uint64_t *k,
                       struct tpl__error *err) {
  uint32_t file = e->job->tensors[w->first].file;
  uint64_t pos = 0, end = file_data_end(e, w), issued = *k, done = *k;
  size_t scan = w->scan;
  int rc = 0, fd;
  if (end == 0) return 0;
  /* The descriptor validated at start, never the path again; a file
   * that changed is told once every byte went out (deferred_check). */
  deferred_check(e, file);
  e->direct = tpl__source_direct(e->src, file);
  if (tpl__model_fd(e->model, file, &fd, NULL) == 0)
    posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
  for (;;) {
    struct slot *s;
    uint64_t at;
    while (rc == 0 && issued - done < NSLOTS - 1 &&
           next_extent(e, w, &scan, &pos)) {
      uint64_t len = end - pos < e->chunk ? end - pos : e->chunk;
      double t = tpl__now();
      s = slot_of(e, issued++);
      rc =
          tpl__eng_slot_wait(e, s, err); /* its sends of NSLOTS chunks before */
      e->st.t_send += tpl__now() - t;
      if (rc == 0) rc = chunk_start(e, file, s, pos, len, err);
      pos += len;
    }
    if (rc != 0 || done == issued) break;
    s = slot_of(e, done++);
    at = s->pos;
    next_extent(e, w, &w->scan, &at); /* delivery's scan to the chunk */
    rc = chunk_finish(e, file, s, w, err);
    if (rc == 0) tpl__eng_beat(e); /* completed reads are progress */
    if (rc == 0) rc = tpl__eng_deliver_chunk(e, s, w, s->pos, s->len, err);
    if (e->o->progress)
      e->o->progress(e->o->ctx, w->done, e->job->source_bytes, 0);
  }
  *k = issued;
  if (rc == 0) deferred_check(e, file);
  return rc == 0 ? tpl__eng_check_own(e, w, err) : rc;
}

/* The report's record of how each file was read (by this rank). */
static void keep_io(struct engine *e) {
  if (e->src == NULL) return;
  free(e->st.file_io);
  e->st.file_io = malloc(e->job->nfiles + 1);
  free(e->st.file_align);
  e->st.file_align = malloc((e->job->nfiles + 1) * sizeof(uint64_t));
  e->st.nfile_io = e->st.file_io && e->st.file_align ? e->job->nfiles : 0;
  for (size_t f = 0; f < e->st.nfile_io; f++) {
    e->st.file_io[f] = (uint8_t)(e->src->used[f] + 1);
    /* a file that fell back to buffered (source.h) has no alignment */
    e->st.file_align[f] =
        tpl__source_direct(e->src, (uint32_t)f) ? e->src->align[f] : 0;
  }
}

/* Every completed request (a few MiB) is progress: a beat when one is
 * due, so a slow but steady reader is waited for. */
static void source_progress(void *ctx) {
  tpl__eng_beat(ctx);
}

/* While rank 0 waits on a remote read, its sends of the chunks before
 * go on (an MPI send moves only inside MPI calls): fetching and sending
 * share the link's two directions instead of taking turns. */
static void source_idle(void *ctx) {
  tpl__eng_slots_poke(ctx);
}

/* Per file its URL, shown form and validators, for a MODEL URL's source
 * (the job table carries rank 0's; a local file's are NULL and unused). */
static int job_urls(struct engine *e, struct tpl__error *err) {
  e->urls = calloc(e->job->nfiles + 1, sizeof(*e->urls));
  if (e->urls == NULL) return tpl__oom(err);
  for (size_t f = 0; f < e->job->nfiles; f++)
    e->urls[f] = (struct tpl__source_url){
        e->job->files[f].url, e->job->files[f].path, &e->job->files[f].obj};
  return 0;
}

/* The source's fallback note, once (rank 0's only: the others' would
 * say the same): at open, or after the reads (a file system that refused
 * a file's first direct read, source.h). */
static void tell_note(struct engine *e) {
  if (e->src == NULL || e->src->note[0] == '\0') return;
  if (e->rank == 0 && !e->note_told)
    fprintf(stderr, "tpload: %s\n", e->src->note);
  e->note_told = 1;
}

static void close_source(struct engine *e) {
  tell_note(e);
  if (e->src != NULL) e->gets += e->src->gets;
  tpl__source_close(e->src);
  e->src = NULL;
  free(e->urls);
  e->urls = NULL;
}

/* A source over the job's files as their origin opens one (origin.h):
 * local files over fds, a MODEL URL's read by rank 0 with the client that
 * validated them and by the others (--read local) with one of their own,
 * every answer checked against rank 0's size and ETag.  Its fallback
 * note, if any, on stderr (tell_note). */
static int open_source(struct engine *e, struct tpl__fdcache *files,
                       const char *const *paths, struct tpl__error *err) {
  /* --read local on one node: the ranks share the page cache's pages,
   * where direct reads would fetch every page of a strided slice once per
   * rank, so auto reads buffered there. */
  int mode = e->local && e->o->io_mode == TPL_IO_AUTO ? TPL_IO_BUFFERED
                                                      : e->o->io_mode;
  int rc = job_urls(e, err);
  if (rc == 0)
    rc = tpl__job_origin(e->job)->source(
        &(struct tpl__origin_files){.n = e->job->nfiles,
                                    .files = files,
                                    .paths = paths,
                                    .mode = mode,
                                    .urls = e->urls,
                                    .http =
                                        e->rank == 0 ? e->model->http : NULL,
                                    .opts = &e->o->http,
                                    .model = e->rank == 0 ? e->model : NULL},
        &e->src, err);
  if (rc == 0) tell_note(e);
  if (rc == 0) tpl__source_on_progress(e->src, source_progress, e);
  /* rank 0's stream only: under --read local no send waits meanwhile */
  if (rc == 0 && e->rank == 0 && !e->local)
    tpl__source_on_idle(e->src, source_idle, e);
  return rc;
}

static uint64_t round_up(uint64_t n, uint64_t unit) {
  return (n + unit - 1) / unit * unit;
}

/* The window as one mapping (huge pages: buffers of their own would
 * each take a whole one), cut into the slots' buffers, each aligned as
 * the source's direct reads need. */
static int alloc_slots(struct engine *e, struct tpl__error *err) {
  uint64_t unit = tpl__source_slack(e->src) / 2, read, pack;
  uint8_t *p;
  if (unit < 4096) unit = 4096;
  read = round_up(e->chunk + tpl__source_slack(e->src), unit);
  pack = round_up(e->chunk, unit);
  e->window_len = NSLOTS * (read + pack);
  e->window = p = tpl__huge_alloc((size_t)e->window_len);
  if (p == NULL)
    return tpl__fail(err, -ENOMEM, "cannot allocate the streaming window");
  for (int i = 0; i < NSLOTS; i++) {
    e->slots[i].batch_dest = -1;
    e->slots[i].mrc = MPI_SUCCESS;
    e->slots[i].remote = e->remote;
    e->slots[i].read = p;
    e->slots[i].pack = p + read;
    p += read + pack;
  }
  return 0;
}

static void free_slots(struct engine *e) {
  e->st.bytes_sent = e->st.bytes_out_remote = 0;
  for (int i = 0; i < NSLOTS; i++) {
    e->st.bytes_sent += e->slots[i].sent;
    e->st.bytes_out_remote += e->slots[i].sent_remote;
    free(e->slots[i].reqs);
  }
  tpl__huge_free(e->window, (size_t)e->window_len);
}

/* The model's paths, in job file order (its files: e->model->fds). */
static int model_paths(const struct engine *e, const char ***paths) {
  size_t n = e->job->nfiles;
  *paths = malloc((n + 1) * sizeof(**paths));
  if (*paths == NULL) return -ENOMEM;
  for (size_t f = 0; f < n; f++)
    (*paths)[f] = e->model->files[f].path;
  return 0;
}

static int stream_all(struct engine *e, struct tpl__error *err) {
  struct file_walk w = {0};
  uint64_t k = 0;
  int rc = alloc_slots(e, err);
  w.layouts = calloc(e->job->grid.tp, sizeof(*w.layouts));
  w.dests = calloc(e->job->grid.tp, sizeof(*w.dests));
  if (rc == 0 && (w.layouts == NULL || w.dests == NULL)) rc = tpl__oom(err);
  for (size_t i = 0; rc == 0 && i < e->job->ntensors;) {
    w.first = w.scan = i;
    w.end = i + 1;
    while (w.end < e->job->ntensors &&
           e->job->tensors[w.end].file == e->job->tensors[i].file)
      w.end++;
    w.cur = SIZE_MAX;
    rc = stream_file(e, &w, &k, err);
    i = w.end;
  }
  for (int i = 0; rc == 0 && i < NSLOTS; i++) {
    double t = tpl__now();
    rc = tpl__eng_slot_wait(e, &e->slots[i], err);
    e->st.t_send += tpl__now() - t;
  }
  free(w.layouts);
  free(w.dests);
  return rc;
}

int tpl__eng_send_all(struct engine *e, struct tpl__error *err) {
  const char **paths = NULL;
  int rc = model_paths(e, &paths) == 0 ? 0 : tpl__oom(err);
  if (rc == 0) rc = open_source(e, e->model->fds, paths, err);
  if (rc == 0) rc = stream_all(e, err);
  keep_io(e);
  close_source(e); /* before the buffers its reads land in */
  free_slots(e);
  free(paths);
  return rc;
}

/* --- --read local: every rank reads its own slices --- */

/* --read auto may read locally: the job's files are local ones (not a
 * URL's, not a presharded MODEL's, whose full tensors rank 0 gathers),
 * --io leaves the choice to the page cache, and rank 0 finds every file
 * warm in the files it validated.  Rank 0's answer goes to every rank
 * (tpl__eng_share_job): a cold load asks no other rank to open a file. */
int tpl__eng_auto_asks(const struct engine *e) {
  return e->o->read_mode == TPL_READ_AUTO && e->o->io_mode == TPL_IO_AUTO &&
         e->job->nfiles > 0 &&
         tpl__model_origin(e->model) == &tpl__origin_local &&
         tpl__local_warm(e->job, e->model->fds);
}

/* Whether this rank (not 0: tpl__eng_auto_asks asked it) finds every
 * file of the job warm in the same files at their paths (any that cannot
 * be opened, or differs, is not warm); the files it opened are kept in
 * e->probed for its local reads. */
static int files_warm_here(struct engine *e) {
  struct tpl__error ignored;
  if (tpl__local_open(e->job, &e->probed, &ignored) != 0) return 0;
  return tpl__local_warm(e->job, e->probed);
}

int tpl__eng_choose_read(struct engine *e, struct tpl__error *err) {
  int mine, all = 0;
  MPI_Request req;
  e->local = e->read_mode == TPL_READ_LOCAL;
  e->job->read_auto = e->read_mode == TPL_READ_AUTO;
  if (e->read_asks) {
    mine = e->rank == 0 || files_warm_here(e);
    if (tpl__eng_mpi_check(MPI_Iallreduce(&mine, &all, 1, MPI_INT, MPI_MIN,
                                          MPI_COMM_WORLD, &req),
                           "--read auto", err) != 0)
      return TPL_EPEER;
    if (tpl__eng_wait_collective(e, &req, -1, "--read auto", err) != 0)
      return TPL_EPEER;
    e->local = all;
  }
  if (!e->local) { /* the stream reads on rank 0 alone */
    tpl__fdcache_free(e->probed);
    e->probed = NULL;
  }
  e->job->read_local = e->local;
  return 0;
}

/* The step of local reads: small enough that a step's bytes are still in
 * cache when they are hashed (chosen by measurement: see the commit that
 * set it). */
#define LOCAL_STEP ((size_t)512 << 10)

/* A strided slice is read piece by piece when its pieces are this long,
 * instead of whole rows through the window (whole rows meant each rank
 * reading the row-parallel weights N times over). */
#define LOCAL_PIECE_MIN 1024

/* The step of local reads from a file read direct: requests in flight
 * need a step of several (source.c); hashing from the store after. */
#define LOCAL_DIRECT_STEP ((size_t)8 << 20)

/* After every step of a rank's local reads: its heartbeat, and rank 0's
 * progress line. */
static void local_progress(void *ctx, uint64_t done, uint64_t total) {
  struct engine *e = ctx;
  tpl__eng_beat(e);
  if (e->rank == 0 && e->o->progress) e->o->progress(e->o->ctx, done, total, 1);
}

/* This rank's cache of the job's files: rank 0's is the model's, of the
 * files it validated (a re-open checks their identity), the others open
 * the paths and check they are the same files, or take those --read
 * auto opened to find them warm (theirs to free). */
static int local_files(struct engine *e, struct tpl__fdcache **files,
                       struct tpl__error *err) {
  if (e->rank == 0)
    *files = e->model->fds;
  else if (e->probed != NULL)
    *files = e->probed;
  else
    return tpl__local_open(e->job, files, err);
  e->probed = NULL;
  return 0;
}

/* Whether some file is read in whole steps through the window (direct,
 * or over HTTP, which needs no slack). */
static int any_direct(const struct tpl__source *src) {
  for (uint32_t f = 0; f < src->nfiles; f++)
    if (tpl__source_direct(src, f)) return 1;
  return 0;
}

/* Nobody waits for anybody until the agreement after, so a failure here
 * is agreed on, not a reason to end the job. */
int tpl__eng_read_local(struct engine *e, struct tpl__error *err) {
  size_t n = e->job->nfiles;
  struct tpl__local_read lr = {.job = e->job,
                               .rank = e->rank,
                               .store = &e->store,
                               .window_len = LOCAL_STEP,
                               .direct_len = LOCAL_DIRECT_STEP,
                               .piece_min = LOCAL_PIECE_MIN,
                               .finish = tpl__eng_finish_own,
                               .ctx = e};
  struct tpl__fdcache *files = NULL;
  const char **paths = malloc((n + 1) * sizeof(*paths));
  size_t window = 0;
  int rc;
  for (size_t f = 0; paths != NULL && f < n; f++)
    paths[f] = e->job->files[f].path;
  lr.progress = local_progress;
  if (tpl__eng_node_shares(e)) { /* a node's bytes once (engine_node.c) */
    lr.skip = tpl__eng_node_skips;
    lr.finish = tpl__eng_node_finish;
  }
  lr.run_gap = e->o->read_gap != TPL_READ_GAP_AUTO
                   ? e->o->read_gap
                   : tpl__read_gap_default(e->o->model);
  lr.run_gap_multi =
      e->o->read_gap != TPL_READ_GAP_AUTO ? e->o->read_gap : TPL_READ_GAP_MULTI;
  if (paths == NULL)
    rc = tpl__oom(err);
  else
    rc = local_files(e, &files, err);
  if (rc == 0 && lr.skip != NULL) rc = tpl__eng_node_turns(e, err);
  if (rc == 0) rc = open_source(e, files, paths, err);
  if (rc == 0) {
    window = !any_direct(e->src)
                 ? LOCAL_STEP /* no file is read direct */
                 : LOCAL_DIRECT_STEP + (size_t)tpl__source_slack(e->src);
    lr.window = tpl__huge_alloc(window);
    if (lr.window == NULL)
      rc = tpl__fail(err, -ENOMEM, "cannot allocate the read window");
  }
  if (rc == 0) tpl__stall_test_stop("deliver", e->rank); /* source open */
  lr.files = files;
  lr.src = e->src;
  if (rc == 0) rc = tpl__local_read_all(&lr, err);
  keep_io(e);
  close_source(e);
  e->st.t_read = lr.t_read;
  e->st.t_pack = lr.t_pack;
  e->st.t_hash += lr.t_hash;
  e->bytes_read = lr.bytes_read;
  if (e->rank != 0) tpl__fdcache_free(files);
  free(paths);
  tpl__huge_free(lr.window, window);
  return rc;
}

/* --- rank 0: --verify-md5's pass --- */

/* Each hashed read is progress: a beat when one is due, and the line. */
static void md5_progress(void *ctx, uint64_t done, uint64_t total) {
  struct engine *e = ctx;
  tpl__eng_beat(e);
  if (e->o->md5_progress) e->o->md5_progress(e->o->ctx, done, total);
}

/* Every file read whole through a source of its own and checked against
 * its md5sum (mlc_md5.h); the report names them. */
static int md5_pass(struct engine *e, struct tpl__error *err) {
  struct tpl__mlc_md5 v = {
      .m = e->model, .chunk = e->chunk, .progress = md5_progress, .ctx = e};
  const char **paths = NULL;
  int rc = model_paths(e, &paths) == 0 ? 0 : tpl__oom(err);
  if (rc == 0) rc = open_source(e, e->model->fds, paths, err);
  v.src = e->src;
  if (rc == 0) rc = tpl__mlc_md5_verify(&v, err);
  close_source(e);
  e->md5_names = paths; /* the files' paths, replaced by their names */
  for (size_t f = 0; rc == 0 && f < e->job->nfiles; f++)
    paths[f] = e->model->files[f].name;
  e->md5 = (struct tpl__md5_summary){
      paths, rc == 0 ? tpl__mlc_md5_nfiles(e->model) : 0, v.bytes, v.seconds};
  return rc;
}

/* Before any byte moves: rank 0's pass, while the others wait for it
 * under the stall deadline its beats move; agreed. */
int tpl__eng_verify_md5(struct engine *e, struct tpl__error *err) {
  tpl__eng_beats_begin(e);
  return tpl__eng_agree_after_beats(e, e->rank == 0 ? md5_pass(e, err) : 0,
                                    err);
}
