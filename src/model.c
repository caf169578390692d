/* model.c - the tensor table every reader fills, and tpl__model_open, which
 * decides what kind of checkpoint a path holds and runs its reader. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dtype.h"
#include "fileio.h"
#include "model.h"
#include "readers.h"

struct tpl_model *tpl__model_new(int format, const char *dir) {
  struct tpl_model *m = calloc(1, sizeof(*m));
  if (m == NULL) return NULL;
  m->format = format;
  m->dir = strdup(dir);
  if (m->dir == NULL) {
    free(m);
    return NULL;
  }
  return m;
}

void tpl__model_free(struct tpl_model *m) {
  if (m == NULL) return;
  for (size_t i = 0; i < m->ntensors; i++)
    free(m->tensors[i].name);
  for (size_t i = 0; i < m->nfiles; i++) {
    free(m->files[i].path);
    free(m->files[i].name);
    if (m->files[i].fd >= 0) close(m->files[i].fd);
  }
  free(m->tensors);
  free(m->files);
  free(m->dir);
  free(m);
}

int tpl__model_add_file(struct tpl_model *m, const char *path, const char *name,
                        uint64_t size, uint32_t *idx) {
  struct tpl__file *f;
  char *p, *n;
  if (m->nfiles >= UINT32_MAX) return -ENOMEM;
  f = realloc(m->files, (m->nfiles + 1) * sizeof(*f));
  if (f == NULL) return -ENOMEM;
  m->files = f;
  p = strdup(path);
  n = strdup(name);
  if (p == NULL || n == NULL) {
    free(p);
    free(n);
    return -ENOMEM;
  }
  f[m->nfiles].path = p;
  f[m->nfiles].name = n;
  f[m->nfiles].size = size;
  f[m->nfiles].fd = -1;
  *idx = (uint32_t)m->nfiles++;
  return 0;
}

int tpl__model_add_tensor(struct tpl_model *m, const struct tpl__tensor *t) {
  size_t len = strlen(t->name);
  if (m->ntensors >= TPL_MAX_TENSORS ||
      len > TPL_MAX_NAME_BYTES - m->name_bytes)
    return TPL_ELIMIT;
  if (m->ntensors == m->cap_tensors) {
    size_t cap = m->cap_tensors ? m->cap_tensors * 2 : 64;
    struct tpl__tensor *n = realloc(m->tensors, cap * sizeof(*n));
    if (n == NULL) return -ENOMEM;
    m->tensors = n;
    m->cap_tensors = cap;
  }
  m->tensors[m->ntensors++] = *t;
  m->name_bytes += len;
  return 0;
}

static int64_t mtime_ns(const struct stat *st) {
  return (int64_t)st->st_mtim.tv_sec * 1000000000 + st->st_mtim.tv_nsec;
}

int tpl__model_hold_fd(struct tpl_model *m, uint32_t idx, int fd) {
  struct tpl__file *f = &m->files[idx];
  struct stat st;
  if (fstat(fd, &st) != 0) {
    int e = errno;
    close(fd);
    return -e;
  }
  if (f->fd >= 0) close(f->fd);
  f->fd = fd;
  f->dev = (uint64_t)st.st_dev;
  f->ino = (uint64_t)st.st_ino;
  f->size = (uint64_t)st.st_size;
  f->mtime_ns = mtime_ns(&st);
  return 0;
}

int tpl__model_file_unchanged(const struct tpl_model *m, uint32_t idx,
                              struct tpl_error *err) {
  const struct tpl__file *f = &m->files[idx];
  struct stat st, at_path;
  const char *what = NULL;
  if (f->fd < 0) return 0;
  /* The bytes come from the held descriptor whatever the path names now,
   * but a path that names another file means the model was replaced
   * under the load: say so rather than deliver the old one silently. */
  if (fstat(f->fd, &st) != 0 || stat(f->path, &at_path) != 0)
    what = "it can no longer be examined";
  else if ((uint64_t)at_path.st_dev != f->dev ||
           (uint64_t)at_path.st_ino != f->ino)
    what = "another file took its place";
  else if ((uint64_t)st.st_size != f->size)
    what = "its size changed";
  else if (mtime_ns(&st) != f->mtime_ns)
    what = "it was modified";
  if (what == NULL) return 0;
  return tpl__fail(err, -EIO,
                   "%s: changed while loading (%s); expected the file "
                   "validated at start",
                   f->path, what);
}

int tpl__model_add_failed(int rc, const char *what, struct tpl_error *err) {
  if (rc != TPL_ELIMIT) return tpl__fail(err, rc, "%s: out of memory", what);
  return tpl__fail(err, rc,
                   "%s: expected at most %u tensors and %u bytes of tensor "
                   "names in a model, found more",
                   what, TPL_MAX_TENSORS, TPL_MAX_NAME_BYTES);
}

uint64_t tpl__tensor_numel(const struct tpl__tensor *t) {
  uint64_t n = 1;
  for (int i = 0; i < t->ndim; i++)
    n *= t->shape[i];
  return n;
}

uint64_t tpl__model_bytes(const struct tpl_model *m) {
  uint64_t total = 0;
  for (size_t i = 0; i < m->ntensors; i++)
    total += m->tensors[i].nbytes;
  return total;
}

char *tpl__shape_str(const uint64_t *shape, int ndim, char *buf, size_t len) {
  size_t used = 0;
  if (len == 0) return buf;
  buf[0] = '\0';
  used += (size_t)snprintf(buf, len, "[");
  for (int i = 0; i < ndim && used < len; i++)
    used += (size_t)snprintf(buf + used, len - used, "%s%llu", i ? ", " : "",
                             (unsigned long long)shape[i]);
  if (used < len) snprintf(buf + used, len - used, "]");
  return buf;
}

/* --- format detection --- */

static int open_single_file(const char *path, struct tpl_model **out,
                            struct tpl_error *err) {
  char *dir = strdup(path), *slash, *base;
  struct tpl_model *m;
  int rc;
  if (dir == NULL) return tpl__fail(err, -ENOMEM, "out of memory");
  slash = strrchr(dir, '/');
  base = slash ? slash + 1 : dir;
  if (slash == dir)
    slash[1] = '\0';
  else if (slash)
    *slash = '\0';
  m = tpl__model_new(TPL_FMT_SAFETENSORS, slash ? dir : ".");
  if (m == NULL) {
    free(dir);
    return tpl__fail(err, -ENOMEM, "out of memory");
  }
  rc = tpl__st_load(path, slash ? path + (base - dir) : path, m, err);
  free(dir);
  if (rc != 0) {
    tpl__model_free(m);
    return rc;
  }
  *out = m;
  return 0;
}

static int open_json_driven(const char *dir, const char *name, int format,
                            struct tpl_model **out, struct tpl_error *err) {
  char *path = tpl__path_join(dir, name), *buf = NULL;
  size_t len = 0;
  struct tpl_model *m = NULL;
  int rc;
  if (path == NULL) return tpl__fail(err, -ENOMEM, "out of memory");
  rc = tpl__read_file(path, TPL_MAX_JSON_FILE, &buf, &len, err);
  if (rc != 0) goto fail;
  m = tpl__model_new(format, dir);
  if (m == NULL) {
    rc = tpl__fail(err, -ENOMEM, "out of memory");
    goto fail;
  }
  if (format == TPL_FMT_ST_INDEX)
    rc = tpl__st_index_parse(buf, len, dir, m, err);
  else
    rc = tpl__mlc_parse(buf, len, dir, name, m, err);
  if (rc != 0) goto fail;
  free(path);
  free(buf);
  *out = m;
  return 0;
fail:
  tpl__model_free(m);
  free(path);
  free(buf);
  return rc;
}

static int open_directory(const char *dir, struct tpl_model **out,
                          struct tpl_error *err) {
  static const struct {
    const char *name;
    int format;
  } probes[] = {
      {"model.safetensors.index.json", TPL_FMT_ST_INDEX},
      {"tensor-cache.json", TPL_FMT_MLC},
      {"ndarray-cache.json", TPL_FMT_MLC},
  };
  char *single;
  int rc;
  for (size_t i = 0; i < ARRAY_SIZE(probes); i++) {
    char *p = tpl__path_join(dir, probes[i].name);
    int found = p != NULL && tpl__exists(p);
    free(p);
    if (found)
      return open_json_driven(dir, probes[i].name, probes[i].format, out, err);
  }
  single = tpl__path_join(dir, "model.safetensors");
  if (single == NULL) return tpl__fail(err, -ENOMEM, "out of memory");
  if (!tpl__exists(single)) {
    free(single);
    return tpl__fail(err, TPL_ENOMODEL,
                     "%s: expected model.safetensors, "
                     "model.safetensors.index.json, tensor-cache.json or "
                     "ndarray-cache.json, found none",
                     dir);
  }
  rc = open_single_file(single, out, err);
  if (rc == 0) {
    free((*out)->dir);
    (*out)->dir = strdup(dir);
    if ((*out)->dir == NULL) {
      tpl__model_free(*out);
      rc = tpl__fail(err, -ENOMEM, "out of memory");
    }
  }
  free(single);
  return rc;
}

/* Every member stays open from validation to the end of the load (see
 * tpl__model_hold_fd); a model of more files than the soft descriptor
 * limit (1024 by default) must not fail for that, so take the hard one. */
static void raise_fd_limit(void) {
  struct rlimit rl;
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
  }
}

int tpl__model_open(const char *path, struct tpl_model **out,
                    struct tpl_error *err) {
  raise_fd_limit();
  if (!tpl__exists(path))
    return tpl__fail(err, TPL_ENOMODEL, "%s: no such file or directory", path);
  if (tpl__is_dir(path)) return open_directory(path, out, err);
  return open_single_file(path, out, err);
}
