/* mlc_layout.c - the files of a presharded MLC tensor cache, computed from
 * the job.  MLC's runtime (LoadMultiGPUPresharded) walks the model's
 * params in order; worker k of a tensor-parallel group looks up
 * "<name>_shard-<k>" for a param with preprocs (a cut one) and "<name>"
 * for the others, and reads a whole .bin file whenever the record it
 * needs lives in another file than the last one.  MLC's own converter
 * puts the tp shards of a param next to each other, so every worker reads
 * nearly every file; here each worker's shard records get files of their
 * own, the replicated params shared ones, and a file ends where a
 * worker's walk leaves it, so each worker reads each file it needs once.
 * Records are written raw (TVM decodes f32-to-bf16 only on float32
 * records; the store already holds the decoded bytes). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dtype.h"
#include "mlc_layout.h"

/* The files one writer is filling: its open file, what it holds, and
 * whether the worker that reads it has been elsewhere since. */
struct stream {
  long cur; /* file index, -1 when none */
  uint64_t size;
  int broken;
};

struct builder {
  const struct tpl__job *job;
  struct tpl__mlc_layout *l;
  /* per lane (2 x stage, + 1 for the tensors of several stages from that
   * one on) x (1 + tp) slots: 0 replicated, 1 + k worker k's */
  struct stream *streams;
  size_t cap_files, cap_recs;
};

static int is_cut(const struct tpl__job *job, const struct tpl__job_tensor *t) {
  return t->kind == TPL_RULE_SHARD && job->grid.tp > 1;
}

static struct stream *stream_of(struct builder *b, uint32_t lane,
                                uint32_t slot) {
  return &b->streams[(size_t)lane * (b->job->grid.tp + 1) + slot];
}

static int grow(void **p, size_t *cap, size_t n, size_t size) {
  void *q;
  size_t c = *cap ? *cap * 2 : 64;
  if (n < *cap) return 0;
  q = realloc(*p, c * size);
  if (q == NULL) return -ENOMEM;
  *p = q;
  *cap = c;
  return 0;
}

static int open_file(struct builder *b, struct stream *s, uint32_t lane,
                     uint32_t slot) {
  struct tpl__mlc_file *f;
  uint32_t stage = lane / 2;
  uint32_t shard = slot == 0 ? 0 : slot - 1;
  if (grow((void **)&b->l->files, &b->cap_files, b->l->nfiles, sizeof(*f)))
    return -ENOMEM;
  f = &b->l->files[b->l->nfiles];
  memset(f, 0, sizeof(*f));
  f->owner = stage * b->job->grid.tp + shard; /* replica 0 */
  f->stage = stage;
  f->shard = slot == 0 ? -1 : (int32_t)shard;
  s->cur = (long)b->l->nfiles++;
  s->size = 0;
  s->broken = 0;
  return 0;
}

/* Appends tensor i (shard slot - 1, or whole for slot 0) to its stream;
 * records are grouped by file afterwards. */
static int append(struct builder *b, size_t i, uint32_t lane, uint32_t slot) {
  struct stream *s = stream_of(b, lane, slot);
  uint64_t n = b->job->tensors[i].rank_bytes;
  struct tpl__mlc_rec *r;
  if ((s->cur < 0 || s->broken ||
       (s->size > 0 && s->size + n > TPL_MLC_FILE_CAP)) &&
      open_file(b, s, lane, slot) != 0)
    return -ENOMEM;
  if (grow((void **)&b->l->recs, &b->cap_recs, b->l->nrecs, sizeof(*r)))
    return -ENOMEM;
  r = &b->l->recs[b->l->nrecs++];
  r->tensor = i;
  r->shard = slot == 0 ? -1 : (int32_t)(slot - 1);
  r->offset = s->size;
  b->l->files[s->cur].count++;
  b->l->files[s->cur].nbytes += n;
  s->size += n;
  if (s->size > TPL_MLC_FILE_CAP) s->broken = 1; /* a larger tensor: alone */
  return 0;
}

/* After tensor t went to `lane`'s slots (cut: 1..tp, else 0), the files
 * its readers leave: every other stream of a stage that holds t, and
 * every other stream of several stages (whose readers vary: each run of
 * such tensors gets files of its own). */
static void mark_left(struct builder *b, const struct tpl__job_tensor *t,
                      uint32_t lane, int cut) {
  uint32_t tp = b->job->grid.tp;
  for (uint32_t l = 0; l < 2 * b->job->grid.pp; l++)
    for (uint32_t slot = 0; slot <= tp; slot++)
      if ((l != lane || (cut ? slot == 0 : slot != 0)) &&
          (l % 2 == 1 || tpl__stages_has(t->stages, l / 2)))
        stream_of(b, l, slot)->broken = 1;
}

/* Tensor i into the streams of its first stage (a tensor of several
 * stages: those stages' shared lane), and the walk's cuts. */
static int place(struct builder *b, size_t i, long *file_of) {
  const struct tpl__job_tensor *t = &b->job->tensors[i];
  uint32_t tp = b->job->grid.tp;
  uint32_t lane = 2 * t->stages.first + (t->stages.count > 1);
  int cut = is_cut(b->job, t);
  for (uint32_t slot = cut ? 1 : 0; slot <= (cut ? tp : 0); slot++) {
    if (append(b, i, lane, slot) != 0) return -ENOMEM;
    file_of[b->l->nrecs - 1] = stream_of(b, lane, slot)->cur;
  }
  mark_left(b, t, lane, cut);
  return 0;
}

/* Sorts the records by file (stable: within a file they are in job
 * order, as their offsets are). */
static int group_by_file(struct tpl__mlc_layout *l, const long *file_of) {
  struct tpl__mlc_rec *out = malloc((l->nrecs + 1) * sizeof(*out));
  size_t at = 0;
  if (out == NULL) return -ENOMEM;
  for (size_t f = 0; f < l->nfiles; f++) {
    l->files[f].first = at;
    for (size_t r = 0; r < l->nrecs; r++)
      if (file_of[r] == (long)f) out[at++] = l->recs[r];
  }
  free(l->recs);
  l->recs = out;
  return 0;
}

int tpl__mlc_layout_build(const struct tpl__job *job,
                          struct tpl__mlc_layout *out) {
  struct tpl__mlc_layout l = {0};
  struct builder b = {job, &l, NULL, 0, 0};
  size_t nstreams = (size_t)2 * job->grid.pp * (job->grid.tp + 1);
  /* at most tp records per tensor */
  long *file_of = malloc((job->ntensors * job->grid.tp + 1) * sizeof(long));
  int rc = 0;
  b.streams = calloc(nstreams, sizeof(*b.streams));
  if (file_of == NULL || b.streams == NULL) rc = -ENOMEM;
  for (size_t s = 0; rc == 0 && s < nstreams; s++)
    b.streams[s].cur = -1;
  for (size_t i = 0; rc == 0 && i < job->ntensors; i++)
    rc = place(&b, i, file_of);
  if (rc == 0) rc = group_by_file(&l, file_of);
  free(file_of);
  free(b.streams);
  if (rc != 0) {
    tpl__mlc_layout_free(&l);
    return rc;
  }
  *out = l;
  return 0;
}

void tpl__mlc_layout_free(struct tpl__mlc_layout *l) {
  if (l == NULL) return;
  free(l->files);
  free(l->recs);
  memset(l, 0, sizeof(*l));
}

void tpl__mlc_rec_name(const struct tpl__job *job, const struct tpl__mlc_rec *r,
                       char *buf, size_t len) {
  const char *name = job->tensors[r->tensor].name;
  if (r->shard < 0)
    snprintf(buf, len, "%s", name);
  else
    snprintf(buf, len, "%s_shard-%d", name, (int)r->shard);
}

void tpl__mlc_file_name(size_t i, char *buf, size_t len) {
  snprintf(buf, len, "params_shard_%zu.bin", i);
}

size_t tpl__mlc_max_owned(const struct tpl__mlc_layout *l, uint32_t world) {
  size_t most = 0;
  for (uint32_t r = 0; r < world; r++) {
    size_t n = 0;
    for (size_t f = 0; f < l->nfiles; f++)
      n += l->files[f].owner == r;
    if (n > most) most = n;
  }
  return most;
}

static json_t *rec_json(const struct tpl__job *job,
                        const struct tpl__mlc_rec *r) {
  const struct tpl__job_tensor *t = &job->tensors[r->tensor];
  char name[TPL_MAX_NAME + 32];
  tpl__mlc_rec_name(job, r, name, sizeof(name));
  return json_pack("{s:s, s:o, s:s, s:s, s:I, s:I}", "name", name, "shape",
                   tpl__json_u64_array(t->rank_shape, (size_t)t->ndim), "dtype",
                   tpl__dtype_mlc_name(t->dtype), "format", "raw", "nbytes",
                   (json_int_t)t->rank_bytes, "byteOffset",
                   (json_int_t)r->offset);
}

static json_t *file_json(const struct tpl__job *job,
                         const struct tpl__mlc_layout *l, size_t f,
                         const char *md5) {
  const struct tpl__mlc_file *fi = &l->files[f];
  json_t *recs = json_array();
  char name[64];
  tpl__mlc_file_name(f, name, sizeof(name));
  for (size_t r = fi->first; recs != NULL && r < fi->first + fi->count; r++)
    if (json_array_append_new(recs, rec_json(job, &l->recs[r])) != 0) {
      json_decref(recs);
      recs = NULL;
    }
  return json_pack("{s:s, s:s, s:I, s:o, s:s}", "dataPath", name, "format",
                   "raw-shard", "nbytes", (json_int_t)fi->nbytes, "records",
                   recs, "md5sum", md5 + f * 33);
}

/* The source's metadata with MLC's counts for the presharded cache: a
 * record per name (ParamSize) and the decoded bytes of every record
 * (ParamBytes, a real as MLC writes it; BitsPerParam, over the same
 * parameters, stays the source's). */
static json_t *metadata_json(const struct tpl__job *job,
                             const struct tpl__mlc_layout *l,
                             const json_t *src_meta) {
  json_t *m =
      json_is_object(src_meta) ? json_deep_copy(src_meta) : json_object();
  double bytes = 0;
  for (size_t r = 0; r < l->nrecs; r++)
    bytes += (double)job->tensors[l->recs[r].tensor].rank_bytes;
  if (m == NULL ||
      json_object_set_new(m, "ParamSize", json_integer((json_int_t)l->nrecs)) ||
      json_object_set_new(m, "ParamBytes", json_real(bytes))) {
    json_decref(m);
    return NULL;
  }
  return m;
}

json_t *tpl__mlc_layout_json(const struct tpl__job *job,
                             const struct tpl__mlc_layout *l, const char *md5,
                             const json_t *src_meta) {
  json_t *files = json_array();
  for (size_t f = 0; files != NULL && f < l->nfiles; f++)
    if (json_array_append_new(files, file_json(job, l, f, md5)) != 0) {
      json_decref(files);
      files = NULL;
    }
  return json_pack("{s:o, s:o}", "metadata", metadata_json(job, l, src_meta),
                   "records", files);
}
