/* client.c - the consumer side of the daemon protocol and the public
 * tpl_attach API.  A client connects to DIR/rank{R}.sock, asks for the
 * manifest, then for the store: the daemon passes its sealed memfd with
 * SCM_RIGHTS and the client maps it read-only.  Every manifest entry is
 * checked against the mapping (known dtype, nbytes = numel x itemsize,
 * inside the store, unique name) before any pointer into it is handed
 * out, so a confused daemon cannot make a reader run off the end.  I/O is
 * blocking with poll() deadlines; there is no libuv here. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>

#include "client.h"
#include "dtype.h"
#include "fileio.h"
#include "trust.h"

struct tpl_shard {
  int fd;
  const uint8_t *base;
  uint64_t size;
  uint32_t rank, world;
  struct tpl__wire_response man; /* owns names and shapes */
  size_t *by_name;               /* hash table: entry index + 1, 0 free */
  size_t mask;                   /* table size - 1 (a power of two) */
};

/* ---- sockets with deadlines ---- */

static int64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The directory part of a socket path ("." when there is none). */
static char *dir_of(const char *path) {
  const char *slash = strrchr(path, '/');
  if (slash == NULL) return strdup(".");
  return strndup(path, slash == path ? 1 : (size_t)(slash - path));
}

static int untrusted(const char *path, const char *why, struct tpl_error *err) {
  return tpl__fail(err, TPL_EUNREACHABLE,
                   "%s: refusing to talk to this daemon: %s", path, why);
}

/* Checks the socket's directory, and the socket file in it, against the
 * trusted uid; stores the socket's path under the resolved directory
 * (malloc'd), which is what gets connected to. */
static int trusted_path(const char *path, uid_t uid, char **out,
                        struct tpl_error *err) {
  struct tpl_error why = {0};
  const char *base = strrchr(path, '/');
  char *dir = dir_of(path), *real = NULL, *full = NULL;
  struct stat st;
  int rc;
  if (dir == NULL) return tpl__fail(err, -ENOMEM, "out of memory");
  rc = tpl__check_private_dir(dir, uid, &real, &why);
  free(dir);
  if (rc != 0) return untrusted(path, why.msg, err);
  full = tpl__path_join(real, base ? base + 1 : path);
  free(real);
  if (full == NULL) return tpl__fail(err, -ENOMEM, "out of memory");
  if (lstat(full, &st) == 0 && (!S_ISSOCK(st.st_mode) || st.st_uid != uid)) {
    snprintf(why.msg, sizeof(why.msg),
             "expected a socket of uid %u, found %s of uid %u", (unsigned)uid,
             S_ISSOCK(st.st_mode) ? "a socket" : "another file type",
             (unsigned)st.st_uid);
    free(full);
    return untrusted(path, why.msg, err);
  }
  *out = full;
  return 0;
}

/* The process listening must run as the trusted uid. */
static int check_peer(int s, const char *path, uid_t uid,
                      struct tpl_error *err) {
  char why[96];
  uid_t peer;
  int rc = tpl__peer_uid(s, &peer);
  if (rc == 0 && peer == uid) return 0;
  if (rc != 0)
    snprintf(why, sizeof(why), "cannot read its credentials: %s",
             strerror(-rc));
  else
    snprintf(why, sizeof(why), "expected a daemon of uid %u, found uid %u",
             (unsigned)uid, (unsigned)peer);
  return untrusted(path, why, err);
}

static int connect_to(const char *path, const char *real, int timeout_ms,
                      int *fd, struct tpl_error *err) {
  struct sockaddr_un sa = {.sun_family = AF_UNIX};
  struct timeval tv = {timeout_ms / 1000, (timeout_ms % 1000) * 1000};
  size_t n = strlen(real);
  int s, e;
  if (n >= sizeof(sa.sun_path))
    return tpl__fail(err, -ENAMETOOLONG,
                     "%s: socket path: expected at most %zu bytes, found %zu",
                     real, sizeof(sa.sun_path) - 1, n);
  memcpy(sa.sun_path, real, n + 1);
  s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (s < 0) {
    e = errno;
    return tpl__fail(err, -e, "socket: %s", strerror(e));
  }
  /* Unix connect() honours the send timeout when the backlog is full. */
  setsockopt(s, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  if (connect(s, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
    e = errno;
    close(s);
    return tpl__fail(err, TPL_EUNREACHABLE,
                     "%s: cannot connect: %s (is `tpload serve` running?)",
                     path, strerror(e));
  }
  *fd = s;
  return 0;
}

int tpl__client_connect(const char *path, int timeout_ms, int *fd,
                        struct tpl_error *err) {
  char *real = NULL;
  uid_t uid;
  int s = -1, rc = tpl__trusted_uid(&uid, err);
  if (rc == 0) rc = trusted_path(path, uid, &real, err);
  if (rc == 0) rc = connect_to(path, real, timeout_ms, &s, err);
  if (rc == 0) rc = check_peer(s, path, uid, err);
  free(real);
  if (rc != 0) {
    if (s >= 0) close(s);
    return rc;
  }
  *fd = s;
  return 0;
}

static int send_all(int fd, const uint8_t *p, size_t len,
                    struct tpl_error *err) {
  while (len > 0) {
    ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0)
      return tpl__fail(err, TPL_EUNREACHABLE, "daemon: cannot send: %s",
                       strerror(errno));
    p += n;
    len -= (size_t)n;
  }
  return 0;
}

/* Keeps the first descriptor that arrives (when wanted), closes others. */
static void take_fds(struct msghdr *m, int *passed_fd) {
  for (struct cmsghdr *c = CMSG_FIRSTHDR(m); c != NULL; c = CMSG_NXTHDR(m, c)) {
    size_t nfd;
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    nfd = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < nfd; i++) {
      int f;
      memcpy(&f, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
      if (passed_fd != NULL && *passed_fd < 0)
        *passed_fd = f;
      else
        close(f);
    }
  }
}

/* Waits until `fd` is readable or the deadline passes. */
static int wait_readable(int fd, int64_t deadline, struct tpl_error *err) {
  for (;;) {
    struct pollfd p = {.fd = fd, .events = POLLIN};
    int64_t left = deadline - now_ms();
    int rc;
    if (left <= 0)
      return tpl__fail(err, TPL_EUNREACHABLE,
                       "daemon: timed out waiting for a reply");
    rc = poll(&p, 1, (int)left);
    if (rc > 0) return 0;
    if (rc < 0 && errno != EINTR)
      return tpl__fail(err, TPL_EUNREACHABLE, "poll: %s", strerror(errno));
  }
}

/* Reads exactly `len` bytes, collecting any passed descriptor. */
static int recv_exact(int fd, uint8_t *buf, size_t len, int64_t deadline,
                      int *passed_fd, struct tpl_error *err) {
  while (len > 0) {
    union {
      struct cmsghdr h;
      char b[CMSG_SPACE(8 * sizeof(int))];
    } ctl;
    struct iovec iov = {buf, len};
    struct msghdr m = {.msg_iov = &iov,
                       .msg_iovlen = 1,
                       .msg_control = ctl.b,
                       .msg_controllen = sizeof(ctl.b)};
    ssize_t n;
    int rc = wait_readable(fd, deadline, err);
    if (rc != 0) return rc;
    n = recvmsg(fd, &m, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n < 0)
      return tpl__fail(err, TPL_EUNREACHABLE, "daemon: cannot read: %s",
                       strerror(errno));
    take_fds(&m, passed_fd);
    if (n == 0)
      return tpl__fail(err, TPL_EUNREACHABLE,
                       "daemon closed the connection before replying");
    buf += n;
    len -= (size_t)n;
  }
  return 0;
}

static int read_reply(int fd, int timeout_ms, struct tpl__wire_response *resp,
                      int *passed_fd, struct tpl_error *err) {
  int64_t deadline = now_ms() + timeout_ms;
  uint8_t hdr[TPL_WIRE_HEADER], *body;
  uint32_t len;
  int rc = recv_exact(fd, hdr, sizeof(hdr), deadline, passed_fd, err);
  if (rc != 0) return rc;
  len = (uint32_t)hdr[0] << 24 | (uint32_t)hdr[1] << 16 |
        (uint32_t)hdr[2] << 8 | hdr[3];
  if (len > TPL_WIRE_MAX_RESPONSE)
    return tpl__fail(err, TPL_EPROTO,
                     "daemon reply: expected at most %u bytes, found a "
                     "length of %u",
                     TPL_WIRE_MAX_RESPONSE, len);
  body = malloc(len ? len : 1);
  if (body == NULL) return tpl__fail(err, -ENOMEM, "out of memory");
  rc = recv_exact(fd, body, len, deadline, passed_fd, err);
  if (rc == 0) rc = tpl__wire_decode_response(body, len, resp, err);
  free(body);
  return rc;
}

int tpl__client_call(int fd, int kind, int timeout_ms,
                     struct tpl__wire_response *resp, int *passed_fd,
                     struct tpl_error *err) {
  uint8_t *frame;
  size_t len;
  int rc;
  if (passed_fd != NULL) *passed_fd = -1;
  rc = tpl__wire_encode_request(kind, &frame, &len);
  if (rc != 0) return tpl__fail(err, rc, "out of memory");
  rc = send_all(fd, frame, len, err);
  free(frame);
  if (rc == 0) rc = read_reply(fd, timeout_ms, resp, passed_fd, err);
  if (rc != 0 && passed_fd != NULL && *passed_fd >= 0) {
    close(*passed_fd);
    *passed_fd = -1;
  }
  return rc;
}

int tpl__client_request(const char *path, int kind, int timeout_ms,
                        struct tpl__wire_response *resp,
                        struct tpl_error *err) {
  int fd, rc = tpl__client_connect(path, timeout_ms, &fd, err);
  if (rc != 0) return rc;
  rc = tpl__client_call(fd, kind, timeout_ms, resp, NULL, err);
  close(fd);
  return rc;
}

/* ---- attaching ---- */

static int check_entry(const struct tpl__wire_tensor *t, uint64_t size,
                       struct tpl_error *err) {
  int dt = tpl__dtype_from_mlc(t->dtype);
  uint64_t n, end;
  if (t->name[0] == '\0')
    return tpl__fail(err, TPL_EPROTO,
                     "manifest: expected a tensor name, "
                     "found an empty one");
  if (dt < 0)
    return tpl__fail(err, TPL_EPROTO,
                     "manifest: tensor '%s': expected a known dtype, found "
                     "'%s'",
                     t->name, t->dtype);
  n = tpl__dtype_size(dt);
  for (int d = 0; d < t->ndim; d++)
    if (tpl__mul_u64(n, t->shape[d], &n) != 0) n = UINT64_MAX;
  if (n != t->nbytes)
    return tpl__fail(err, TPL_EPROTO,
                     "manifest: tensor '%s': expected %llu bytes for its "
                     "shape, found %llu",
                     t->name, (unsigned long long)n,
                     (unsigned long long)t->nbytes);
  if (tpl__add_u64(t->offset, t->nbytes, &end) != 0 || end > size)
    return tpl__fail(err, TPL_EPROTO,
                     "manifest: tensor '%s': expected bytes inside the "
                     "%llu-byte store, found offset %llu + %llu",
                     t->name, (unsigned long long)size,
                     (unsigned long long)t->offset,
                     (unsigned long long)t->nbytes);
  return 0;
}

static size_t name_slot(const char *name, size_t mask) {
  return (size_t)XXH3_64bits(name, strlen(name)) & mask;
}

/* Indexes entries by name in an open-addressing hash table at most half
 * full, for tpl_shard_find; refuses duplicates.  Linear in the tensor
 * count (sorting 20,000 names cost more than the rest of an attach). */
static int index_names(struct tpl_shard *s, struct tpl_error *err) {
  size_t n = s->man.ntensors, cap = 16;
  const struct tpl__wire_tensor *t = s->man.tensors;
  while (cap < 2 * n)
    cap *= 2;
  s->by_name = calloc(cap, sizeof(*s->by_name));
  if (s->by_name == NULL) return tpl__fail(err, -ENOMEM, "out of memory");
  s->mask = cap - 1;
  for (size_t i = 0; i < n; i++) {
    size_t j = name_slot(t[i].name, s->mask);
    for (; s->by_name[j] != 0; j = (j + 1) & s->mask)
      if (strcmp(t[s->by_name[j] - 1].name, t[i].name) == 0)
        return tpl__fail(err, TPL_EPROTO,
                         "manifest: tensor '%s': expected one entry, found "
                         "two",
                         t[i].name);
    s->by_name[j] = i + 1;
  }
  return 0;
}

/* Checks the passed memfd (size, seals) and maps it read-only. */
static int map_store(struct tpl_shard *s, const char *path,
                     struct tpl_error *err) {
  const int need = F_SEAL_WRITE | F_SEAL_SHRINK;
  struct stat st;
  int seals = fcntl(s->fd, F_GET_SEALS);
  void *p;
  if (fstat(s->fd, &st) != 0 || (uint64_t)st.st_size != s->size)
    return tpl__fail(err, TPL_EPROTO,
                     "%s: expected a %llu-byte store, found another size", path,
                     (unsigned long long)s->size);
  if (seals < 0 || (seals & need) != need)
    return tpl__fail(err, TPL_EPROTO,
                     "%s: expected a sealed read-only store, found an "
                     "unsealed one",
                     path);
  if (s->size == 0) return 0;
  p = mmap(NULL, (size_t)s->size, PROT_READ, MAP_SHARED, s->fd, 0);
  if (p == MAP_FAILED)
    return tpl__fail(err, -errno, "%s: cannot map the store: %s", path,
                     strerror(errno));
  s->base = p;
  return 0;
}

/* One round trip: the attach reply carries the tensor table (compact,
 * wire_table.c) and the store's memfd. */
static int fetch(struct tpl_shard *s, const char *path, int timeout_ms,
                 struct tpl_error *err) {
  int sock, rc = tpl__client_connect(path, timeout_ms, &sock, err);
  if (rc != 0) return rc;
  rc = tpl__client_call(sock, TPL_REQ_ATTACH, timeout_ms, &s->man, &s->fd, err);
  close(sock);
  if (rc == 0 && (!s->man.ok || s->fd < 0))
    rc = tpl__fail(err, TPL_EPROTO, "%s: attach refused: %s", path,
                   s->man.error ? s->man.error
                                : "no file descriptor came with the reply");
  s->size = s->man.store_bytes;
  s->rank = s->man.rank;
  s->world = s->man.world;
  return rc;
}

int tpl__client_attach(const char *path, int timeout_ms, struct tpl_shard **out,
                       struct tpl_error *err) {
  struct tpl_shard *s = calloc(1, sizeof(*s));
  int rc;
  if (s == NULL) return tpl__fail(err, -ENOMEM, "out of memory");
  s->fd = -1;
  rc = fetch(s, path, timeout_ms, err);
  if (rc == 0) rc = map_store(s, path, err);
  for (size_t i = 0; rc == 0 && i < s->man.ntensors; i++)
    rc = check_entry(&s->man.tensors[i], s->size, err);
  if (rc == 0) rc = index_names(s, err);
  if (rc != 0) {
    tpl_detach(s);
    return rc;
  }
  *out = s;
  return 0;
}

/* ---- public API ---- */

int tpl_attach(const char *socket_path, struct tpl_shard **out, char *errbuf,
               size_t errlen) {
  struct tpl_error err = {0};
  int rc = tpl__client_attach(socket_path, TPL_CLIENT_TIMEOUT_MS, out, &err);
  tpl__error_text(&err, rc, errbuf, errlen);
  return rc;
}

void tpl_detach(struct tpl_shard *s) {
  if (s == NULL) return;
  if (s->base != NULL) munmap((void *)s->base, (size_t)s->size);
  if (s->fd >= 0) close(s->fd);
  tpl__wire_response_free(&s->man);
  free(s->by_name);
  free(s);
}

uint32_t tpl_shard_rank(const struct tpl_shard *s) {
  return s->rank;
}
uint32_t tpl_shard_world(const struct tpl_shard *s) {
  return s->world;
}
size_t tpl_shard_count(const struct tpl_shard *s) {
  return s->man.ntensors;
}
uint64_t tpl_shard_bytes(const struct tpl_shard *s) {
  return s->size;
}
const char *tpl_shard_job_id(const struct tpl_shard *s) {
  return s->man.job_id ? s->man.job_id : "";
}
const char *tpl_shard_model(const struct tpl_shard *s) {
  return s->man.model ? s->man.model : "";
}

static void fill_view(const struct tpl_shard *s, size_t i,
                      struct tpl_tensor_view *v) {
  const struct tpl__wire_tensor *t = &s->man.tensors[i];
  v->name = t->name;
  v->dtype = t->dtype;
  v->ndim = t->ndim;
  v->shape = t->shape;
  v->data = t->nbytes == 0 ? NULL : s->base + t->offset;
  v->nbytes = t->nbytes;
  v->xxh3 = t->xxh3;
}

int tpl_shard_tensor(const struct tpl_shard *s, size_t index,
                     struct tpl_tensor_view *out) {
  if (index >= s->man.ntensors) return -ERANGE;
  fill_view(s, index, out);
  return 0;
}

int tpl_shard_find(const struct tpl_shard *s, const char *name,
                   struct tpl_tensor_view *out) {
  size_t j;
  if (s->by_name == NULL) return -ENOENT;
  for (j = name_slot(name, s->mask); s->by_name[j] != 0; j = (j + 1) & s->mask)
    if (strcmp(s->man.tensors[s->by_name[j] - 1].name, name) == 0) {
      fill_view(s, s->by_name[j] - 1, out);
      return 0;
    }
  return -ENOENT;
}
