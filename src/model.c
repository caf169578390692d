/* model.c - the tensor table every reader fills: tensors, the files they
 * live in (held by their identity once validated, open while read), the
 * caps on both, and the rule for the file names a checkpoint's JSON may
 * give. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fdcache.h"
#include "fileio.h"
#include "jsonu.h"
#include "model.h"

int tpl__model_none_found(const char *dir, const char *where,
                          struct tpl__error *err) {
  return tpl__fail(err, TPL_ENOMODEL,
                   "%s: expected model.safetensors, "
                   "model.safetensors.index.json, tensor-cache.json or "
                   "ndarray-cache.json%s, found none",
                   dir, where);
}

struct tpl__model *tpl__model_new(int format, const char *dir) {
  struct tpl__model *m = calloc(1, sizeof(*m));
  if (m == NULL) return NULL;
  m->format = format;
  m->dir = strdup(dir);
  if (m->dir == NULL) {
    free(m);
    return NULL;
  }
  return m;
}

int tpl__model_layer_of(const char *name, uint32_t *layer) {
  static const char prefix[] = "model.layers.";
  const char *p = name + sizeof(prefix) - 1;
  uint64_t v = 0;
  if (strncmp(name, prefix, sizeof(prefix) - 1) != 0) return 0;
  if (*p < '0' || *p > '9') return 0;
  for (; *p >= '0' && *p <= '9'; p++)
    if (v <= UINT32_MAX) v = v * 10 + (uint64_t)(*p - '0');
  if (*p != '.') return 0;
  *layer = v > UINT32_MAX ? UINT32_MAX : (uint32_t)v;
  return 1;
}

size_t tpl__model_drop_layers(struct tpl__model *m, uint32_t first) {
  size_t kept = 0, n = m->ntensors;
  for (size_t i = 0; i < n; i++) {
    uint32_t layer;
    if (tpl__model_layer_of(m->tensors[i].name, &layer) && layer >= first) {
      m->name_bytes -= strlen(m->tensors[i].name);
      free(m->tensors[i].name);
      continue;
    }
    m->tensors[kept++] = m->tensors[i];
  }
  m->ntensors = kept;
  return n - kept;
}

void tpl__model_free(struct tpl__model *m) {
  if (m == NULL) return;
  if (m->priv_free != NULL) m->priv_free(m->priv);
  for (size_t i = 0; i < m->ntensors; i++)
    free(m->tensors[i].name);
  for (size_t i = 0; i < m->nfiles; i++) {
    free(m->files[i].path);
    free(m->files[i].name);
    free(m->files[i].url);
  }
  tpl__fdcache_free(m->fds);
  free(m->tensors);
  free(m->files);
  free(m->dir);
  if (m->url != NULL) tpl__url_clear(m->url);
  free(m->url);
  tpl__http_close(m->http);
  free(m->shown);
  free(m);
}

int tpl__model_add_file(struct tpl__model *m, const char *path,
                        const char *name, uint64_t size, uint32_t *idx) {
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
  f[m->nfiles] = (struct tpl__file){.path = p, .name = n, .size = size};
  *idx = (uint32_t)m->nfiles++;
  return 0;
}

int tpl__model_add_tensor(struct tpl__model *m, const struct tpl__tensor *t) {
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

int tpl__model_hold_fd(struct tpl__model *m, uint32_t idx, int fd) {
  struct tpl__file *f = &m->files[idx];
  struct tpl__file_id id;
  int rc;
  if (m->fds == NULL && (m->fds = tpl__fdcache_new(0)) == NULL) {
    close(fd);
    return -ENOMEM;
  }
  rc = tpl__fdcache_hold(m->fds, idx, f->path, fd, &id);
  if (rc != 0) return rc;
  f->dev = id.dev;
  f->ino = id.ino;
  f->size = id.size;
  f->mtime_ns = id.mtime_ns;
  return 0;
}

int tpl__model_fd(const struct tpl__model *m, uint32_t idx, int *fd,
                  struct tpl__error *err) {
  return tpl__fdcache_get(m->fds, idx, fd, err);
}

int tpl__model_pread(const struct tpl__model *m, uint32_t idx, void *buf,
                     size_t len, uint64_t off) {
  int fd, rc = tpl__model_fd(m, idx, &fd, NULL);
  return rc != 0 ? rc : tpl__pread_full(fd, buf, len, off);
}

int tpl__model_take_tensor(struct tpl__model *m, struct tpl__tensor *t,
                           const char *what, struct tpl__error *err) {
  int rc = tpl__model_add_tensor(m, t);
  if (rc != 0) free(t->name);
  t->name = NULL;
  if (rc == 0) return 0;
  if (rc != TPL_ELIMIT) return tpl__fail(err, rc, "%s: out of memory", what);
  return tpl__fail(err, rc,
                   "%s: expected at most %u tensors and %u bytes of tensor "
                   "names in a model, found more",
                   what, TPL_MAX_TENSORS, TPL_MAX_NAME_BYTES);
}

int tpl__model_check_file_name(const char *name, size_t len, const char *what,
                               const char *ctx, struct tpl__error *err) {
  if (len == 0)
    return tpl__fail(err, TPL_EFORMAT,
                     "%s: %s: expected a file name inside the model "
                     "directory, found an empty name",
                     what, ctx);
  if (tpl__has_nul(name, len))
    return tpl__fail(err, TPL_EFORMAT,
                     "%s: %s: expected a file name, found a NUL byte in it",
                     what, ctx);
  /* Longer than any file name can be (ENAMETOOLONG at open, 74): it is
   * the model's data that is wrong. */
  if (len > NAME_MAX)
    return tpl__fail(err, TPL_EFORMAT,
                     "%s: %s: expected a file name of at most %d bytes, "
                     "found %zu bytes ('%.40s...')",
                     what, ctx, NAME_MAX, len, name);
  if (name[0] == '/')
    return tpl__fail(err, TPL_EFORMAT,
                     "%s: %s: expected a file name inside the model "
                     "directory, found the absolute path '%s'",
                     what, ctx, name);
  if (strchr(name, '/') != NULL)
    return tpl__fail(err, TPL_EFORMAT,
                     "%s: %s: expected a plain file name without '/', "
                     "found '%s'",
                     what, ctx, name);
  if (strcmp(name, "..") == 0 || strcmp(name, ".") == 0)
    return tpl__fail(err, TPL_EFORMAT,
                     "%s: %s: expected a file name inside the model "
                     "directory, found '%s'",
                     what, ctx, name);
  return 0;
}

uint64_t tpl__tensor_numel(const struct tpl__tensor *t) {
  uint64_t n = 1;
  for (int i = 0; i < t->ndim; i++)
    n *= t->shape[i];
  return n;
}

uint64_t tpl__model_bytes(const struct tpl__model *m) {
  uint64_t total = 0;
  for (size_t i = 0; i < m->ntensors; i++)
    total += m->tensors[i].nbytes;
  return total;
}

/* "[a<sep>b<sep>c]" into buf. */
static char *shape_join(const uint64_t *shape, int ndim, const char *sep,
                        char *buf, size_t len) {
  size_t used;
  if (len == 0) return buf;
  used = (size_t)snprintf(buf, len, "[");
  for (int i = 0; i < ndim && used < len; i++)
    used += (size_t)snprintf(buf + used, len - used, "%s%llu", i ? sep : "",
                             (unsigned long long)shape[i]);
  if (used < len) snprintf(buf + used, len - used, "]");
  return buf;
}

char *tpl__shape_str(const uint64_t *shape, int ndim, char *buf, size_t len) {
  return shape_join(shape, ndim, ", ", buf, len);
}

char *tpl__shape_str_compact(const uint64_t *shape, int ndim, char *buf,
                             size_t len) {
  return shape_join(shape, ndim, ",", buf, len);
}
