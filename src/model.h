/* model.h - the one in-memory description every checkpoint reader
 * produces: a table of tensors (name, dtype, shape, file, offset, bytes) and
 * the files they live in.  Readers fill it (checkpoint.h opens a model);
 * plan, shard, engine and the commands only read it. */
#ifndef TPL_MODEL_H
#define TPL_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "common.h"
#include "http.h"
#include "url.h"

struct tpl__fdcache; /* fdcache.h */

struct tpl__origin;

enum tpl__model_format {
  TPL_FMT_SAFETENSORS = 1, /* one .safetensors file */
  TPL_FMT_ST_INDEX,        /* model.safetensors.index.json + files */
  TPL_FMT_MLC,             /* tensor-cache.json / ndarray-cache.json */
  TPL_FMT_PRESHARDED,      /* shard-info.json + rank{R}.safetensors */
  TPL_FMT_PRESHARDED_MLC   /* the same, cut from an MLC directory */
};

/* How a tensor's bytes are stored in its file. */
enum tpl__encoding {
  TPL_ENC_RAW = 0,        /* stored exactly as the dtype says */
  TPL_ENC_F32_TO_BF16 = 1 /* dtype F32, stored as the upper 16 bits (bf16) */
};

/* What an MLC file record says of its md5sum (md5sum.h); only
 * --verify-md5 asks, so a load without it reads none of it. */
enum tpl__md5_state {
  TPL_MD5_NONE = 0, /* no "md5sum" (and every other format's files) */
  TPL_MD5_OK,       /* 32 hex digits */
  TPL_MD5_BAD       /* anything else */
};

struct tpl__tensor {
  char *name; /* owned, NUL-terminated */
  int dtype;  /* enum tpl_dtype (the decoded dtype) */
  int ndim;   /* 0..TPL_MAX_DIMS */
  uint64_t shape[TPL_MAX_DIMS];
  uint32_t file;         /* index into model->files */
  int encoding;          /* enum tpl__encoding */
  uint64_t offset;       /* absolute byte offset in the file */
  uint64_t stored_bytes; /* bytes in the file */
  uint64_t nbytes;       /* decoded bytes: numel x dtype size */
};

struct tpl__file {
  char *path;               /* owned; as opened (dir + name) */
  char *name;               /* owned; as named in the index/model */
  uint64_t size;            /* bytes, from fstat when opened */
  uint64_t dev, ino;        /* its identity when validated ... */
  int64_t mtime_ns;         /* ... and modification time */
  char *url;                /* owned: a remote file's URL as fetched (its
                               query, a presigned signature, kept), NULL for
                               a local file; `path` is its shown form */
  struct tpl__http_obj obj; /* a remote file's size and validators
                               when validated */
  int md5_state;            /* an MLC file's "md5sum": enum tpl__md5_state */
  char md5[33];             /* TPL_MD5_OK: its 32 hex digits, lowercased */
};

struct tpl__model {
  int format; /* enum tpl__model_format */
  char *dir;  /* owned; directory holding the model */
  struct tpl__file *files;
  size_t nfiles;
  struct tpl__tensor *tensors; /* checkpoint order */
  size_t ntensors;
  size_t cap_tensors;
  size_t name_bytes; /* all tensor names, for the cap */
  /* A model at a URL (checkpoint.h); all NULL for a local one. */
  struct tpl__url *url;   /* owned: MODEL parsed */
  struct tpl__http *http; /* owned: the client that read it */
  char *shown;            /* owned: MODEL as messages and reports show
                             it (without a presigned URL's signature) */
  /* Where its files live (origin.h), set when it was opened; NULL (a
   * model built by hand) is the local origin. */
  const struct tpl__origin *origin;
  /* owned: the local files validated, open while they are read
   * (fdcache.h); NULL until one is held (remote and hand-built models) */
  struct tpl__fdcache *fds;
  /* owned: a format's own state (a presharded MODEL's map of its rank
   * files, reshard.h), freed by priv_free with the model; NULL else */
  void *priv;
  void (*priv_free)(void *priv);
  /* tensors whose bytes are rebuilt within an ulp, not exactly (a
   * presharded MODEL's biases held as bias / N, times N: reshard.h) */
  uint32_t approximate;
};

/* The message for a directory (`dir`, a path or a URL) that holds none of
 * the files that make a checkpoint (format.h's probes): TPL_ENOMODEL, `where`
 * ("" or " at this URL (HTTP 404)") after the list. */
int tpl__model_none_found(const char *dir, const char *where,
                          struct tpl__error *err);

/* Parses "model.layers.<i>." at the start of name: returns 1 and *layer,
 * 0 when name is not a decoder-layer tensor.  An index too large for 32
 * bits sets *layer to UINT32_MAX (out of range for any model). */
int tpl__model_layer_of(const char *name, uint32_t *layer);

/* Removes every tensor of decoder layer `first` and above
 * ("model.layers.<i>." with i >= first), keeping the order of the rest;
 * the files stay.  Returns how many were removed. */
size_t tpl__model_drop_layers(struct tpl__model *m, uint32_t first);

/* Frees a model and everything it owns; NULL is accepted. */
void tpl__model_free(struct tpl__model *m);

/* Allocates an empty model with `dir` copied; NULL on ENOMEM. */
struct tpl__model *tpl__model_new(int format, const char *dir);

/* Appends a file (path and name copied); returns its index in *idx. */
int tpl__model_add_file(struct tpl__model *m, const char *path,
                        const char *name, uint64_t size, uint32_t *idx);

/* Keeps `fd` (open on file `idx`, now owned by the model's fdcache,
 * which may close it and open the path again later, checking that it is
 * still the same file) with its identity (device, inode, size, mtime from
 * fstat), so that the bytes the engine reads come from the very file
 * that was validated.  Closes fd and returns -errno when fstat fails,
 * -ENOMEM. */
int tpl__model_hold_fd(struct tpl__model *m, uint32_t idx, int fd);

/* A descriptor of held file idx of m into *fd (tpl__fdcache_get: valid
 * until the next descriptor of m's is asked for; -EIO naming the file
 * when it changed since it was held). */
int tpl__model_fd(const struct tpl__model *m, uint32_t idx, int *fd,
                  struct tpl__error *err);

/* Exactly `len` bytes at `off` of held file idx of m into buf
 * (tpl__model_fd, then tpl__pread_full).  Returns 0, -EIO when the file
 * changed since it was held, or tpl__pread_full's codes; no message. */
int tpl__model_pread(const struct tpl__model *m, uint32_t idx, void *buf,
                     size_t len, uint64_t off);

/* Appends a tensor, taking ownership of t->name on success only.
 * Returns 0, -ENOMEM, or TPL_ELIMIT when the model would exceed
 * TPL_MAX_TENSORS tensors or TPL_MAX_NAME_BYTES of names (checked before
 * growing the table). */
int tpl__model_add_tensor(struct tpl__model *m, const struct tpl__tensor *t);

/* tpl__model_add_tensor for a reader of `what` (a file name): the model
 * takes t->name (freed on failure; NULL in *t either way), and a failure
 * says which cap was hit, or out of memory. */
int tpl__model_take_tensor(struct tpl__model *m, struct tpl__tensor *t,
                           const char *what, struct tpl__error *err);

/* Checks a file name a checkpoint's JSON gives (`name`, `len` bytes) as
 * the name of a file directly inside the model directory: refuses an
 * empty name, a NUL byte, an absolute path, any '/', "." and "..".
 * `what` (the JSON file) and `ctx` (e.g. "tensor 'x'") go into messages.
 * Pure: symlinks are the checkpoint loader's to check.  Returns 0 or
 * TPL_EFORMAT. */
int tpl__model_check_file_name(const char *name, size_t len, const char *what,
                               const char *ctx, struct tpl__error *err);

/* Number of elements of `t` (shape product; 1 for a scalar). Overflow is
 * impossible for a validated tensor. */
uint64_t tpl__tensor_numel(const struct tpl__tensor *t);

/* Total decoded bytes of all tensors. */
uint64_t tpl__model_bytes(const struct tpl__model *m);

/* Writes "[a, b, c]" into buf (truncating safely). Returns buf. */
char *tpl__shape_str(const uint64_t *shape, int ndim, char *buf, size_t len);

/* The same as "[a,b,c]", as JSON writes it compactly (`status`'s table). */
char *tpl__shape_str_compact(const uint64_t *shape, int ndim, char *buf,
                             size_t len);

#endif
