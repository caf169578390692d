/* client.c - the consumer side of the daemon protocol and the public
 * tpl_attach API.  A client connects to DIR/rank{R}.sock and asks, in one
 * round trip, for the store and the tensor table: the daemon passes two
 * sealed memfds with SCM_RIGHTS, the store and the table it laid out once
 * for reading in place (table_map.h), and the client maps both
 * read-only.  The table is validated once before any pointer into either
 * mapping is handed out (every entry inside the store, nbytes = numel x
 * itemsize, names inside the table, the name index consistent), so a
 * confused daemon cannot make a reader run off the end; lookups then
 * hash and compare in the mapping, allocating nothing.  I/O is blocking with
 * poll() deadlines; there is no libuv here. */
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

#include "client.h"
#include "dtype.h"
#include "fileio.h"
#include "table_map.h"
#include "trust.h"

struct tpl_shard {
  const uint8_t *base; /* the store's memfd, mapped */
  uint64_t size;
  struct tpl__wire_response man; /* the attach reply: identity */
  const uint8_t *table;          /* the TPLM region, mapped from its memfd */
  size_t table_len;
  struct tpl__tmap map; /* validated; borrows `table` */
};

/* ---- sockets with deadlines ---- */

static int64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int untrusted(const char *path, const char *why,
                     struct tpl__error *err) {
  return tpl__fail(err, TPL_EUNREACHABLE,
                   "%s: refusing to talk to this daemon: %s", path, why);
}

/* Checks the socket's directory, and the socket file in it, against the
 * trusted uid; stores the socket's path under the resolved directory
 * (malloc'd), which is what gets connected to. */
static int trusted_path(const char *path, uid_t uid, char **out,
                        struct tpl__error *err) {
  struct tpl__error why = {0};
  const char *base = strrchr(path, '/');
  char *dir = tpl__dir_of(path), *real = NULL, *full = NULL;
  struct stat st;
  int rc;
  if (dir == NULL) return tpl__oom(err);
  rc = tpl__check_private_dir(dir, uid, &real, &why);
  free(dir);
  if (rc != 0) return untrusted(path, why.msg, err);
  full = tpl__path_join(real, base ? base + 1 : path);
  free(real);
  if (full == NULL) return tpl__oom(err);
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
                      struct tpl__error *err) {
  char why[96];
  uid_t peer;
  pid_t pid;
  int rc = tpl__peer_cred(s, &peer, &pid);
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
                      int *fd, struct tpl__error *err) {
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

/* Connects to the daemon socket `path`, waiting at most timeout_ms, once
 * the path and then the peer are trusted.  Stores a blocking,
 * close-on-exec socket in *fd.  Returns 0, TPL_EUNREACHABLE (nothing
 * answers, or not a trusted daemon; err names the path and the reason) or
 * -ENAMETOOLONG. */
static int connect_trusted(const char *path, int timeout_ms, int *fd,
                           struct tpl__error *err) {
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
                    struct tpl__error *err) {
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

/* Where passed descriptors go: the first `n` that arrive are kept in
 * fds[0..n), in order; others are closed. */
struct fd_sink {
  int *fds;
  size_t n, have;
};

static void take_fds(struct msghdr *m, struct fd_sink *sink) {
  for (struct cmsghdr *c = CMSG_FIRSTHDR(m); c != NULL; c = CMSG_NXTHDR(m, c)) {
    size_t nfd;
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    nfd = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < nfd; i++) {
      int f;
      memcpy(&f, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
      if (sink->have < sink->n)
        sink->fds[sink->have++] = f;
      else
        close(f);
    }
  }
}

static void close_fds(struct fd_sink *sink) {
  for (size_t i = 0; i < sink->have; i++) {
    close(sink->fds[i]);
    sink->fds[i] = -1;
  }
  sink->have = 0;
}

/* Waits until `fd` is readable or the deadline passes. */
static int wait_readable(int fd, int64_t deadline, struct tpl__error *err) {
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
                      struct fd_sink *sink, struct tpl__error *err) {
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
    take_fds(&m, sink);
    if (n == 0)
      return tpl__fail(err, TPL_EUNREACHABLE,
                       "daemon closed the connection before replying");
    buf += n;
    len -= (size_t)n;
  }
  return 0;
}

static int read_reply(int fd, int timeout_ms, struct tpl__wire_response *resp,
                      struct fd_sink *sink, struct tpl__error *err) {
  int64_t deadline = now_ms() + timeout_ms;
  uint8_t hdr[TPL_WIRE_HEADER], *body;
  uint32_t len;
  int rc = recv_exact(fd, hdr, sizeof(hdr), deadline, sink, err);
  if (rc != 0) return rc;
  len = (uint32_t)hdr[0] << 24 | (uint32_t)hdr[1] << 16 |
        (uint32_t)hdr[2] << 8 | hdr[3];
  if (len > TPL_WIRE_MAX_RESPONSE)
    return tpl__fail(err, TPL_EPROTO,
                     "daemon reply: expected at most %u bytes, found a "
                     "length of %u",
                     TPL_WIRE_MAX_RESPONSE, len);
  body = malloc(len ? len : 1);
  if (body == NULL) return tpl__oom(err);
  rc = recv_exact(fd, body, len, deadline, sink, err);
  if (rc == 0) rc = tpl__wire_decode_response(body, len, resp, err);
  free(body);
  return rc;
}

int tpl__client_call(const char *path, int kind, unsigned flags, int timeout_ms,
                     struct tpl__wire_response *resp, int *fds, size_t nfds,
                     struct tpl__error *err) {
  struct tpl__client_req q = {kind, flags, NULL, timeout_ms, timeout_ms};
  return tpl__client_call_req(path, &q, resp, fds, nfds, err);
}

int tpl__client_call_req(const char *path, const struct tpl__client_req *q,
                         struct tpl__wire_response *resp, int *fds, size_t nfds,
                         struct tpl__error *err) {
  struct fd_sink sink = {fds, nfds, 0};
  uint8_t *frame;
  size_t len;
  int fd = -1, rc;
  for (size_t i = 0; i < nfds; i++)
    fds[i] = -1;
  rc = tpl__wire_encode_request_args(q->kind, q->flags, q->args, &frame, &len);
  if (rc != 0) return tpl__fail(err, rc, "out of memory");
  rc = connect_trusted(path, q->timeout_ms, &fd, err);
  if (rc == 0) rc = send_all(fd, frame, len, err);
  free(frame);
  if (rc == 0) rc = read_reply(fd, q->reply_ms, resp, &sink, err);
  if (fd >= 0) close(fd);
  if (rc != 0) close_fds(&sink);
  return rc;
}

int tpl__client_request_flags(const char *path, int kind, unsigned flags,
                              int timeout_ms, struct tpl__wire_response *resp,
                              struct tpl__error *err) {
  return tpl__client_call(path, kind, flags, timeout_ms, resp, NULL, 0, err);
}

char *tpl__client_rank0_path(const char *path) {
  const char *slash = strrchr(path, '/');
  size_t dir_len = slash != NULL ? (size_t)(slash - path) + 1 : 0;
  size_t size = dir_len + sizeof("rank0.sock");
  char *out = malloc(size);
  if (out != NULL) snprintf(out, size, "%.*srank0.sock", (int)dir_len, path);
  return out;
}

int tpl__client_job_call(const char *path, const struct tpl__client_req *q,
                         struct tpl__wire_response *resp,
                         struct tpl__error *err) {
  char *r0;
  int rc = tpl__client_call_req(path, q, resp, NULL, 0, err);
  if (rc != 0 || resp->ok || resp->rank == 0) return rc;
  tpl__wire_response_free(resp);
  r0 = tpl__client_rank0_path(path);
  if (r0 == NULL) return tpl__oom(err);
  rc = tpl__client_call_req(r0, q, resp, NULL, 0, err);
  free(r0);
  return rc;
}

/* ---- attaching ---- */

/* Checks a passed memfd, the `what` of `size` bytes, sealed against
 * writes and shrinking (so what was validated stays as it was), and maps
 * it read-only into *out (not when empty). */
static int map_memfd(int fd, uint64_t size, int flags, const char *path,
                     const char *what, const uint8_t **out,
                     struct tpl__error *err) {
  const int need = F_SEAL_WRITE | F_SEAL_SHRINK;
  struct stat st;
  int seals = fcntl(fd, F_GET_SEALS);
  void *p;
  if (fstat(fd, &st) != 0 || (uint64_t)st.st_size != size)
    return tpl__fail(err, TPL_EPROTO,
                     "%s: expected a %llu-byte %s, found another size", path,
                     (unsigned long long)size, what);
  if (seals < 0 || (seals & need) != need)
    return tpl__fail(err, TPL_EPROTO,
                     "%s: expected a sealed read-only %s, found an unsealed "
                     "one",
                     path, what);
  if (size > SIZE_MAX)
    return tpl__fail(err, TPL_EPROTO, "%s: %s too large", path, what);
  if (size == 0) return 0;
  p = mmap(NULL, (size_t)size, PROT_READ, MAP_SHARED | flags, fd, 0);
  if (p == MAP_FAILED)
    return tpl__fail(err, -errno, "%s: cannot map the %s: %s", path, what,
                     strerror(errno));
  *out = p;
  return 0;
}

/* Maps the table the daemon laid out in its own memfd, with its page
 * tables filled in one call (it is read whole to validate it), and opens
 * it against the mapped store; errors about its content name the
 * socket. */
static int open_table(struct tpl_shard *s, const char *path, int fd,
                      struct tpl__error *err) {
  struct tpl__error why = {0};
  int rc = map_memfd(fd, s->man.table_bytes, MAP_POPULATE, path, "tensor table",
                     &s->table, err);
  s->table_len = (size_t)s->man.table_bytes;
  if (rc == 0)
    rc = tpl__tmap_open(s->table, s->table_len, s->size, &s->map, &why);
  if (rc != 0 && why.msg[0] != '\0')
    return tpl__fail(err, rc, "%s: %s", path, why.msg);
  return rc;
}

/* One round trip: the attach reply carries the store's memfd and the
 * table's, into fds[0] and fds[1]. */
static int fetch(struct tpl_shard *s, const char *path, int timeout_ms,
                 int *fds, struct tpl__error *err) {
  int rc = tpl__client_call(path, TPL_REQ_ATTACH, 0, timeout_ms, &s->man, fds,
                            2, err);
  if (rc == 0 && (!s->man.ok || fds[0] < 0 || fds[1] < 0))
    rc = tpl__fail(err, TPL_EPROTO, "%s: attach refused: %s", path,
                   s->man.error ? s->man.error
                                : "a file descriptor is missing from the "
                                  "reply");
  s->size = s->man.store_bytes;
  return rc;
}

int tpl__client_attach(const char *path, int timeout_ms, struct tpl_shard **out,
                       struct tpl__error *err) {
  struct tpl_shard *s = calloc(1, sizeof(*s));
  int fds[2] = {-1, -1}, rc;
  if (s == NULL) return tpl__oom(err);
  rc = fetch(s, path, timeout_ms, fds, err);
  if (rc == 0) rc = map_memfd(fds[0], s->size, 0, path, "store", &s->base, err);
  if (rc == 0) rc = open_table(s, path, fds[1], err);
  for (int i = 0; i < 2; i++) /* mapped: the descriptors are not needed */
    if (fds[i] >= 0) close(fds[i]);
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
  struct tpl__error err = {0};
  int rc = tpl__client_attach(socket_path, TPL_CLIENT_TIMEOUT_MS, out, &err);
  tpl__error_text(&err, rc, errbuf, errlen);
  return rc;
}

void tpl_detach(struct tpl_shard *s) {
  if (s == NULL) return;
  if (s->base != NULL) munmap((void *)s->base, (size_t)s->size);
  if (s->table != NULL) munmap((void *)s->table, s->table_len);
  tpl__wire_response_free(&s->man);
  free(s);
}

uint32_t tpl_shard_rank(const struct tpl_shard *s) {
  return s->man.rank;
}
void tpl__shard_grid(const struct tpl_shard *s, uint32_t *tp, uint32_t *pp) {
  *tp = s->man.tp;
  *pp = s->man.pp;
}

const char *tpl__shard_fingerprint(const struct tpl_shard *s) {
  return s->man.fingerprint != NULL ? s->man.fingerprint : "";
}

uint32_t tpl_shard_world(const struct tpl_shard *s) {
  return s->man.world;
}
size_t tpl_shard_count(const struct tpl_shard *s) {
  return s->map.count;
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
uint64_t tpl_shard_generation(const struct tpl_shard *s) {
  return s->man.generation;
}

static void fill_view(const struct tpl_shard *s, size_t i,
                      struct tpl_tensor_view *v) {
  const struct tpl__tmap_entry *e = &s->map.entries[i];
  v->name = s->map.names + e->name_off;
  v->dtype = tpl__dtype_mlc_name(e->dtype);
  v->dtype_id = (enum tpl_dtype)e->dtype;
  v->ndim = e->ndim;
  v->shape = s->map.dims + e->dims_off;
  v->data = e->nbytes == 0 ? NULL : s->base + e->offset;
  v->nbytes = e->nbytes;
  v->xxh3 = e->xxh3;
}

const void *tpl_tensor_data(const struct tpl_tensor_view *v) {
  return v->data;
}

int tpl_shard_tensor(const struct tpl_shard *s, size_t index,
                     struct tpl_tensor_view *out) {
  if (index >= s->map.count) return -ERANGE;
  fill_view(s, index, out);
  return 0;
}

int tpl_shard_find(const struct tpl_shard *s, const char *name,
                   struct tpl_tensor_view *out) {
  size_t i;
  if (tpl__tmap_find(&s->map, name, &i) != 0) return -ENOENT;
  fill_view(s, i, out);
  return 0;
}
