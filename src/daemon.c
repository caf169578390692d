/* daemon.c - one rank's server for `tpload serve`: a libuv loop on
 * DIR/rank{R}.sock that answers health, status (the load report with the
 * job table its per-tensor arrays index, or its summary without them),
 * attach (the store exported, store.h: its sealed memfd, and a second
 * sealed memfd holding the tensor table laid out for reading in place,
 * table_map.h, both passed with SCM_RIGHTS), reload, watch and shutdown.
 * The generation served is the engine's record (coord.h), held by
 * pointer; the one a reload replaced is retired once its store has no
 * export left.
 *
 * Each connection is a small state machine driven by one callback per
 * libuv event: READING (bytes go into the frame reader from wire.c),
 * WRITING (exactly one reply in flight; reading is stopped, which is the
 * backpressure: a client that does not read its replies is not read
 * either), FD_RETRY (the attach reply could not be sent yet) and CLOSING.
 * Every reply but the errors is a frame built once at start-up and shared
 * by all connections, so a request storm costs no memory beyond a fixed
 * per-connection buffer, at most one request body (capped at 64 KiB) and
 * the connection limit.  A per-connection timer bounds each phase, so
 * half-sent requests and clients that stop reading are dropped.
 *
 * The attach reply carries file descriptors.  libuv sends handles only on
 * IPC pipes, and making client pipes IPC would also let clients push fds
 * into the daemon; instead, because nothing else is queued on the
 * connection at that moment (one reply in flight at most), the reply is
 * sent with sendmsg() on the connection's fd and any unsent remainder goes
 * through uv_write as usual.  Nothing here calls MPI. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>
#include <uv.h>

#include "daemon.h"
#include "dtype.h"
#include "fileio.h"
#include "log.h"
#include "ready.h"
#include "report.h"
#include "table_map.h"
#include "trust.h"
#include "url.h"
#include "wire.h"

#define DEFAULT_TIMEOUT_MS 10000
#define MAX_CONNS 256       /* extra ones get a "busy" error and are closed */
#define HEALTH_SLOTS 32     /* beyond MAX_CONNS: one health reply each */
#define HEALTH_SLOT_MS 1000 /* ... and this long to ask for it */
#define POLL_MS 100
#define STOP_GRACE_MS 1000
#define FD_RETRY_MS 10
#define LISTEN_BACKLOG 511
#define CONN_INBUF 4096
#define BUSY "daemon busy: too many connections, try again"

/* One log line when the daemon's --log-level is at least `level`. */
#define LOG_AT(s, level, ...)                                                  \
  do {                                                                         \
    if ((s)->cfg->log_level >= (level)) tpl__log((s)->cfg->rank, __VA_ARGS__); \
  } while (0)

enum frame_id {
  F_HEALTH,
  F_STATUS,
  F_ATTACH, /* the table's size; the store's and the table's fds beside */
  F_SHUTDOWN,
  F_BUSY,
  F_COUNT
};

/* C_WAITING: a watch (answered when the generation changes or its time
 * is up) or rank 0's reload client (answered when the reload ends). */
enum conn_state { C_READING, C_WRITING, C_FD_RETRY, C_WAITING, C_CLOSING };

struct server;

/* Every reply that does not change while one generation is served,
 * built once per generation.  Counted: a connection writing one of them
 * (or about to send the attach) holds it, so a switch never frees bytes
 * a write still reads. */
struct replies {
  int refs;
  uint8_t *frames[F_COUNT];
  size_t frame_len[F_COUNT];
  int table_fd;     /* the TPLM table's sealed memfd, or -1 */
  uint8_t *summary; /* rank 0: the report without its tensor arrays */
  size_t summary_len;
};

struct conn {
  uv_pipe_t pipe;
  uv_timer_t timer;
  struct server *srv;
  struct conn *prev, *next;
  enum conn_state state;
  int reading;
  int close_after;      /* close once the reply is written */
  int health_only;      /* a reserved slot: one health reply */
  int open_handles;     /* freed when both handles are closed */
  pid_t pid;            /* the client's, for the log (0: unknown) */
  int attached;         /* it asked for the store at least once */
  struct replies *rep;  /* what the reply in flight is read from, or NULL */
  int watching;         /* C_WAITING: a watch (else the reload client) */
  uint64_t watch_after; /* a watch: answer once the generation exceeds it */
  uint64_t fd_deadline; /* FD_RETRY: give up after this (loop ms) */
  uv_write_t wreq;
  /* An attach being sent: the store it holds an export of (ex), or NULL */
  struct tpl__store *exported;
  struct tpl__store_export ex;
  uint8_t *owned; /* an error reply being written, or NULL */
  struct tpl__frame_reader fr;
  size_t in_off, in_len;
  uint8_t in[CONN_INBUF];
};

struct server {
  const struct tpl__daemon_config *cfg;
  uv_loop_t loop;
  uv_pipe_t listener;
  uv_pipe_t sink; /* takes a connection we cannot allocate for */
  int sink_busy;
  uv_timer_t poll_timer, stop_timer;
  uv_signal_t sigterm, sigint, sighup;
  uv_async_t wake; /* ends the loop's run in its thread (a reload) */
  char *dir;       /* realpath of socket_dir */
  char *sock_path;
  const struct tpl__loaded *cur; /* the generation served (the engine's) */
  uint64_t generation;           /* its number, 1: the first load */
  struct replies *rep;           /* its replies */
  const struct tpl__loaded *old; /* replaced, not retired yet: its store
                                    still has exports (or NULL) */
  struct conn *conns;
  size_t nconns;
  unsigned timeout_ms;
  int bound;      /* the socket file is ours to remove */
  int loop_ready; /* uv_loop_init succeeded */
  int stopping, ready_written;
  uint64_t started_ns; /* uv_hrtime() when serving began */
  uint64_t attaches;   /* attach requests served */
  /* A reload (see run_reload): asked for (the loop stops to run it),
   * running (the loop runs in a thread beside it), a stop asked for
   * meanwhile (done once it ends). */
  int reload_asked, reloading, stop_after_reload;
  char *reload_model, *reload_plan; /* rank 0: what to load; plan NULL:
                                       the current one */
  int reload_md5;                   /* rank 0: reload --verify-md5 */
  struct conn *reload_client;       /* rank 0: the `tpload reload` waiting */
  _Atomic uint64_t next_bytes;      /* the new store's size, once known */
  const struct tpl__loaded *next;   /* the new generation ... */
  struct replies *next_rep;         /* ... and its replies, once ready */
  char *reload_shown; /* rank 0: reload_model as logs and status show it */
  /* rank 0: the MODEL the generation served came from, as asked (a URL's
   * query, which may sign it, included): what a reload without MODEL
   * loads; never shown */
  char *source;
  /* What serve's watch knows (coord.h's silent), taken at every poll
   * while no reload runs: the ranks not heard from for half the deadline
   * (room for world of them), how many, and the deadline (0: no watch).
   * Health, status and reload read it. */
  struct tpl__wire_silent *silent;
  size_t nsilent;
  double deadline;
};

static void drive(struct conn *c);
static void close_conn(struct conn *c);
static void send_attach(struct conn *c);
static void start_read(struct conn *c);

/* ---- start-up: directory, socket path, prebuilt replies ---- */

int tpl__daemon_prepare_dir(const char *dir, char **resolved,
                            struct tpl__error *err) {
  int rc;
  if (mkdir(dir, 0700) == 0) {
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd >= 0) {
      fchmod(fd, 0700); /* whatever the umask */
      close(fd);
    }
  } else if (errno != EEXIST) {
    int e = errno;
    return tpl__fail(err, TPL_EOUTPUT,
                     "%s: cannot create the socket directory: %s", dir,
                     strerror(e));
  }
  rc = tpl__check_private_dir(dir, geteuid(), resolved, err);
  if (rc != 0 && err != NULL) err->code = TPL_EOUTPUT;
  return rc != 0 ? TPL_EOUTPUT : 0;
}

static int make_paths(struct server *s, struct tpl__error *err) {
  char name[32];
  struct sockaddr_un sa;
  snprintf(name, sizeof(name), "rank%u.sock", s->cfg->rank);
  s->sock_path = tpl__path_join(s->dir, name);
  if (s->sock_path == NULL) return tpl__oom(err);
  if (strlen(s->sock_path) >= sizeof(sa.sun_path))
    return tpl__fail(err, TPL_EOUTPUT,
                     "%s: socket path: expected at most %zu bytes, found %zu",
                     s->sock_path, sizeof(sa.sun_path) - 1,
                     strlen(s->sock_path));
  return 0;
}

/* A socket file left behind: refuse when a daemon answers on it, remove
 * it when nobody does; anything that is not a socket is left alone. */
static int clear_stale_socket(const char *path, struct tpl__error *err) {
  struct stat st;
  struct sockaddr_un sa = {.sun_family = AF_UNIX};
  int fd, rc;
  if (lstat(path, &st) != 0) return 0;
  if (!S_ISSOCK(st.st_mode))
    return tpl__fail(err, TPL_EOUTPUT,
                     "%s: expected a socket or nothing, found another file",
                     path);
  fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    int e = errno;
    return tpl__fail(err, -e, "socket: %s", strerror(e));
  }
  memcpy(sa.sun_path, path, strlen(path) + 1);
  rc = connect(fd, (struct sockaddr *)&sa, sizeof(sa));
  close(fd);
  if (rc == 0)
    return tpl__fail(err, TPL_EOUTPUT,
                     "%s: another daemon is serving this socket (stop it "
                     "first, or pick another --socket-dir)",
                     path);
  if (unlink(path) != 0 && errno != ENOENT) {
    int e = errno;
    return tpl__fail(err, -e, "%s: cannot remove a stale socket: %s", path,
                     strerror(e));
  }
  return 0;
}

/* Who answers: this rank, serving generation `generation` (`g`). */
static void fill_identity(const struct server *s, const struct tpl__loaded *g,
                          uint64_t generation, struct tpl__wire_response *r) {
  r->rank = s->cfg->rank;
  r->world = s->cfg->world;
  r->tp = g->job->grid.tp;
  r->pp = g->job->grid.pp;
  r->store_bytes = g->store->size;
  r->job_id = s->cfg->job_id;
  r->model = g->job->model;
  r->plan = g->plan;
  r->fingerprint = g->fingerprint;
  r->generation = generation;
}

/* What one build of the replies needs. */
struct build {
  const struct server *s;
  const struct tpl__loaded *g;
  uint64_t generation;
  struct replies *rep;
};

static int build_frame(const struct build *b, enum frame_id id,
                       struct tpl__wire_response *r, struct tpl__error *err) {
  fill_identity(b->s, b->g, b->generation, r);
  return tpl__wire_encode_response(r, &b->rep->frames[id],
                                   &b->rep->frame_len[id], err);
}

/* A sealed memfd named `name` holding `len` bytes of `b`; -errno. */
static int sealed_memfd(const char *name, const uint8_t *b, size_t len,
                        int *out) {
  const int seals = F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL;
  int fd = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING), rc;
  if (fd < 0) return -errno;
  rc = tpl__write_full(fd, b, len);
  if (rc == 0 && fcntl(fd, F_ADD_SEALS, seals) != 0) rc = -errno;
  if (rc != 0) {
    close(fd);
    return rc;
  }
  *out = fd;
  return 0;
}

/* The tensors this rank's stage holds, as the table builder takes them. */
static struct tpl__tmap_tensor *held_tensors(const struct build *b, size_t *n) {
  const struct tpl__job *job = b->g->job;
  struct tpl__tmap_tensor *t = calloc(job->ntensors + 1, sizeof(*t));
  *n = 0;
  for (size_t i = 0; t != NULL && i < job->ntensors; i++) {
    const struct tpl__job_tensor *jt = &job->tensors[i];
    struct tpl__tmap_tensor *e = &t[*n];
    if (jt->store_offset == UINT64_MAX) continue; /* not this stage's */
    (*n)++;
    e->name = jt->name;
    e->dtype = tpl__dtype_mlc_name(jt->dtype);
    e->ndim = jt->ndim;
    memcpy(e->shape, jt->rank_shape, sizeof(e->shape));
    e->offset = jt->store_offset;
    e->nbytes = jt->rank_bytes;
    e->xxh3 = b->g->store->xxh3[i];
  }
  return t;
}

/* The tensor table laid out for reading in place (table_map.h), in a
 * sealed memfd built once: an attach passes it beside the store, so a
 * consumer copies and allocates nothing per tensor.  Then the attach
 * reply, which gives its size. */
static int build_attach(const struct build *b, struct tpl__error *err) {
  struct tpl__wire_response r = {.ok = 1};
  size_t n, len;
  struct tpl__tmap_tensor *t = held_tensors(b, &n);
  uint8_t *buf = NULL;
  int rc = t != NULL ? tpl__tmap_build(t, n, &buf, &len, err) : tpl__oom(err);
  free(t);
  if (rc != 0) return rc;
  rc = sealed_memfd("tpload-table", buf, len, &b->rep->table_fd);
  free(buf);
  if (rc != 0)
    return tpl__fail(err, rc, "daemon: tensor table memfd: %s", strerror(-rc));
  r.table_bytes = len;
  return build_frame(b, F_ATTACH, &r, err);
}

/* Rank 0's status summary: the report without its tensor arrays. */
static int build_status(const struct build *b, struct tpl__error *err) {
  struct replies *r = b->rep;
  int rc = tpl__report_summary(b->g->report, b->g->report_len, &r->summary,
                               &r->summary_len);
  if (rc != 0)
    return tpl__fail(err, rc, "daemon: status: %s", tpl_strerror(rc));
  return 0;
}

/* A request only rank 0 serves: on another rank a refusal "WHAT is
 * served by rank 0: ask DIR/rank0.sock", on rank 0 the reply `own` (an
 * error, or NULL for ok). */
static int build_rank0_only(const struct build *b, enum frame_id id,
                            const char *what, const char *own,
                            struct tpl__error *err) {
  char msg[PATH_MAX + 64];
  struct tpl__wire_response r = {.error = own};
  if (b->s->cfg->rank != 0) {
    snprintf(msg, sizeof(msg), "%s is served by rank 0: ask %s/rank0.sock",
             what, b->s->dir);
    r.error = msg;
  }
  r.ok = r.error == NULL;
  return build_frame(b, id, &r, err);
}

/* Every reply that does not change while `g` is served.  Rank 0's
 * status with a report is built per request (send_status); F_STATUS is
 * only ever a refusal. */
static int build_frames(const struct build *b, struct tpl__error *err) {
  struct tpl__wire_response ok = {.ok = 1}, busy = {.error = BUSY};
  int rc = build_frame(b, F_HEALTH, &ok, err);
  if (rc == 0)
    rc = build_rank0_only(b, F_STATUS, "status", "rank 0 has no load report",
                          err);
  if (rc == 0) rc = build_rank0_only(b, F_SHUTDOWN, "shutdown", NULL, err);
  if (rc == 0) rc = build_frame(b, F_BUSY, &busy, err);
  if (rc == 0) rc = build_attach(b, err);
  if (rc == 0 && b->s->cfg->rank == 0 && b->g->report != NULL)
    rc = build_status(b, err);
  return rc;
}

static struct replies *replies_hold(struct replies *r) {
  if (r != NULL) r->refs++;
  return r;
}

static void replies_put(struct replies *r) {
  if (r == NULL || --r->refs > 0) return;
  for (int i = 0; i < F_COUNT; i++)
    free(r->frames[i]);
  free(r->summary);
  if (r->table_fd >= 0) close(r->table_fd);
  free(r);
}

/* The replies for serving `g` as generation `generation`, in *out (one
 * reference). */
static int replies_new(const struct server *s, const struct tpl__loaded *g,
                       uint64_t generation, struct replies **out,
                       struct tpl__error *err) {
  struct replies *r = calloc(1, sizeof(*r));
  struct build b = {s, g, generation, r};
  int rc;
  if (r == NULL) return tpl__oom(err);
  r->refs = 1;
  r->table_fd = -1;
  rc = build_frames(&b, err);
  if (rc != 0) {
    replies_put(r);
    return rc;
  }
  *out = r;
  return 0;
}

/* ---- connections ---- */

static void arm_timer(struct conn *c, uint64_t ms);

static void on_conn_closed(uv_handle_t *h) {
  struct conn *c = h->data;
  if (--c->open_handles > 0) return;
  replies_put(c->rep);
  free(c->owned);
  free(c);
}

/* Frees the generation a reload replaced once its store has no export
 * left (an attach still sending its fds holds one); never while a reload
 * runs: the engine is busy on its own thread.  A memfd's exports end as
 * its fds are sent and switch_generation ends those still waiting, so
 * for a memfd this is at once; a kind whose exports last until the
 * consumer detaches would also have to hold the next reload until then
 * (coord.h's retire). */
static void retire_unexported(struct server *s) {
  const struct tpl__coord *co = s->cfg->coord;
  if (s->old == NULL || s->reloading || tpl__store_exports(s->old->store) > 0)
    return;
  s->old = NULL;
  co->retire(co->ctx);
}

/* The connection's attach no longer needs the store's own handles. */
static void end_export(struct conn *c) {
  if (c->exported == NULL) return;
  tpl__store_unexport(c->exported);
  c->exported = NULL;
  retire_unexported(c->srv);
}

static void close_conn(struct conn *c) {
  struct server *s = c->srv;
  if (c->state == C_CLOSING) return;
  c->state = C_CLOSING;
  end_export(c);
  if (s->reload_client == c) s->reload_client = NULL;
  if (c->prev != NULL)
    c->prev->next = c->next;
  else
    s->conns = c->next;
  if (c->next != NULL) c->next->prev = c->prev;
  s->nconns--;
  if (c->attached)
    LOG_AT(s, TPL_LOG_INFO, "client detached (pid %ld)", (long)c->pid);
  else
    LOG_AT(s, TPL_LOG_DEBUG, "client disconnected (pid %ld)", (long)c->pid);
  tpl__frame_reset(&c->fr);
  uv_close((uv_handle_t *)&c->pipe, on_conn_closed);
  uv_close((uv_handle_t *)&c->timer, on_conn_closed);
}

static void stop_reading(struct conn *c) {
  if (c->reading) uv_read_stop((uv_stream_t *)&c->pipe);
  c->reading = 0;
}

/* The reply is out: wait for the next request. */
static void finish_reply(struct conn *c) {
  free(c->owned);
  c->owned = NULL;
  replies_put(c->rep);
  c->rep = NULL;
  if (c->close_after || c->srv->stopping) {
    close_conn(c);
    return;
  }
  c->state = C_READING;
  arm_timer(c, c->srv->timeout_ms);
}

static void on_write(uv_write_t *req, int status) {
  struct conn *c = req->data;
  if (c->state == C_CLOSING) return; /* cancelled by close_conn */
  if (status < 0) {
    close_conn(c);
    return;
  }
  finish_reply(c);
  if (c->state == C_READING) drive(c);
}

/* Queues `len` bytes of `buf` (shared, or c->owned) as the reply. */
static void send_bytes(struct conn *c, const uint8_t *buf, size_t len) {
  uv_buf_t b = uv_buf_init((char *)buf, (unsigned)len);
  stop_reading(c);
  c->state = C_WRITING;
  arm_timer(c, c->srv->timeout_ms);
  c->wreq.data = c;
  if (uv_write(&c->wreq, (uv_stream_t *)&c->pipe, &b, 1, on_write) != 0)
    close_conn(c);
}

static void send_frame(struct conn *c, enum frame_id id) {
  struct replies *r = c->srv->rep;
  replies_put(c->rep);
  c->rep = replies_hold(r);
  send_bytes(c, r->frames[id], r->frame_len[id]);
}

/* Sends `r`, encoded into c->owned; the connection closes after it when
 * `fatal`. */
static void send_owned(struct conn *c, const struct tpl__wire_response *r,
                       int fatal) {
  size_t len;
  free(c->owned);
  c->owned = NULL;
  if (tpl__wire_encode_response(r, &c->owned, &len, NULL) != 0) {
    close_conn(c);
    return;
  }
  c->close_after |= fatal;
  send_bytes(c, c->owned, len);
}

/* Sends an error reply; the connection closes after it when `fatal`. */
static void send_error(struct conn *c, int fatal, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void send_error(struct conn *c, int fatal, const char *fmt, ...) {
  char msg[256];
  struct tpl__wire_response r = {.error = msg};
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  r.rank = c->srv->cfg->rank;
  r.world = c->srv->cfg->world;
  send_owned(c, &r, fatal);
}

/* The reply to a watch or a reload: ok and the generation served, or
 * the failure's message and code. */
static void send_generation(struct conn *c, int code, const char *msg) {
  struct tpl__wire_response r = {.ok = code == 0};
  fill_identity(c->srv, c->srv->cur, c->srv->generation, &r);
  if (code != 0) {
    r.error = msg[0] != '\0' ? msg : tpl_strerror(code);
    r.error_code = code;
  }
  send_owned(c, &r, 0);
}

static void begin_stop(struct server *s);

/* Rank 0's status reply: the load report and the job table (or, for a
 * summary, the report built at start-up without tensors) and this rank's
 * counters, built per request since uptime and clients change.  Other ranks
 * (and a rank 0 without a report) send the prebuilt refusal. */
static void send_status(struct conn *c, int summary) {
  struct server *s = c->srv;
  const struct replies *rep = s->rep;
  struct tpl__wire_response r = {.ok = 1};
  if (s->cfg->rank != 0 || s->cur->report == NULL) {
    send_frame(c, F_STATUS);
    return;
  }
  fill_identity(s, s->cur, s->generation, &r);
  r.status = summary ? rep->summary : s->cur->report;
  r.status_len = summary ? rep->summary_len : s->cur->report_len;
  r.job = summary ? NULL : s->cur->job_table;
  r.job_len = summary ? 0 : s->cur->job_table_len;
  r.uptime_seconds = (double)(uv_hrtime() - s->started_ns) / 1e9;
  if (s->reloading) { /* both stores' sizes while it runs */
    r.reload_model = s->reload_shown;
    r.reload_store_bytes = atomic_load(&s->next_bytes);
  }
  r.clients = (uint32_t)(s->nconns - 1); /* not the one asking */
  r.attaches = s->attaches;
  r.silent = s->silent;
  r.nsilent = s->nsilent;
  r.stall_timeout = s->deadline;
  send_owned(c, &r, 0);
}

/* A refusal while ranks are silent: "WHAT: " and the first one's
 * sentence (wire.h), TPL_EPEER, every silent rank beside. */
static void send_silent(struct conn *c, const char *what) {
  struct server *s = c->srv;
  char one[256], more[48] = "", msg[sizeof(one) + sizeof(more) + 64];
  struct tpl__wire_response r = {.error = msg, .error_code = TPL_EPEER};
  fill_identity(s, s->cur, s->generation, &r);
  tpl__wire_silent_str(&s->silent[0], s->deadline, one, sizeof(one));
  if (s->nsilent > 1)
    snprintf(more, sizeof(more), " (and %zu more)", s->nsilent - 1);
  snprintf(msg, sizeof(msg), "%s: %s%s", what, one, more);
  r.silent = s->silent;
  r.nsilent = s->nsilent;
  r.stall_timeout = s->deadline;
  send_owned(c, &r, 0);
}

/* The client asked for the store: count it, and log its first time. */
static void note_attach(struct conn *c) {
  struct server *s = c->srv;
  s->attaches++;
  if (!c->attached)
    LOG_AT(s, TPL_LOG_INFO, "client attached (pid %ld)", (long)c->pid);
  c->attached = 1;
}

/* This rank's socket and (rank 0) the ready file go at once, whatever
 * the rest waits for: a job whose launcher ends it during a reload (a
 * rank died: mpirun sends the others SIGTERM, then SIGKILL a second
 * later, while the reload still waits for the dead rank) leaves
 * neither behind. */
static void unpublish(struct server *s) {
  if (s->bound) unlink(s->sock_path);
  s->bound = 0;
  if (s->ready_written) tpl__ready_release(s->cfg->ready_file, s->cfg->job_id);
  s->ready_written = 0;
}

/* Asks the whole job to stop, once, and stops this rank.  On rank 0
 * request_shutdown tells every other rank; on another rank (its own
 * SIGTERM/SIGINT/SIGHUP) it asks rank 0 to, so a signal to any one rank ends
 * the job instead of leaving that rank waiting in MPI_Finalize while the others
 * serve. */
static void stop_job(struct server *s) {
  const struct tpl__coord *c = s->cfg->coord;
  if (s->stopping) return; /* no request or signal is handled after this */
  if (s->reloading) {      /* the ranks are busy loading: once it ends */
    s->stop_after_reload = 1;
    unpublish(s);
    return;
  }
  if (c != NULL && c->request_shutdown != NULL &&
      c->request_shutdown(c->ctx) != 0)
    LOG_AT(s, TPL_LOG_INFO, "could not tell the other ranks to shut down");
  begin_stop(s);
}

/* ---- reloads and watches ---- */

/* Stops the loop so that serve() runs the reload (run_reload). */
static void ask_reload(struct server *s, char *model, char *shown, char *plan,
                       int verify_md5) {
  s->reload_asked = 1;
  s->reload_model = model;
  s->reload_shown = shown;
  s->reload_plan = plan;
  s->reload_md5 = verify_md5;
  uv_stop(&s->loop);
}

static int can_reload(const struct server *s) {
  const struct tpl__coord *c = s->cfg->coord;
  return c != NULL && c->reload != NULL;
}

/* Rank 0: `tpload reload`.  The client waits, without a deadline, for
 * the end of the reload; a second one meanwhile is refused (busy). */
static void begin_reload(struct conn *c,
                         const struct tpl__wire_request_args *a) {
  struct server *s = c->srv;
  char *model, *shown, *plan = NULL;
  if (s->cfg->rank != 0) {
    send_error(c, 0, "reload is served by rank 0: ask %s/rank0.sock", s->dir);
    return;
  }
  if (!can_reload(s)) {
    send_error(c, 0, "this daemon cannot reload");
    return;
  }
  if (s->reload_asked || s->reloading) {
    send_generation(c, -EBUSY,
                    "busy: a reload is running already; try again once it "
                    "ends");
    return;
  }
  if (s->nsilent > 0) { /* it would wait for that rank until the deadline */
    send_silent(c, "refused: a rank is silent");
    return;
  }
  model = strdup(a->model != NULL ? a->model : s->source);
  shown = model != NULL ? tpl__url_shown(model) : NULL;
  if (a->plan != NULL) plan = strdup(a->plan);
  if (shown == NULL || (a->plan != NULL && plan == NULL)) {
    free(model);
    free(shown);
    free(plan);
    send_error(c, 0, "out of memory");
    return;
  }
  stop_reading(c);
  uv_timer_stop(&c->timer);
  c->state = C_WAITING;
  c->watching = 0;
  s->reload_client = c;
  LOG_AT(s, TPL_LOG_INFO, "reload: asked by pid %ld: %s", (long)c->pid, shown);
  ask_reload(s, model, shown, plan, a->verify_md5);
}

/* A watch: answered at once when the generation is past `after`, else
 * when it changes (switch_generation) or when its time is up. */
static void begin_watch(struct conn *c,
                        const struct tpl__wire_request_args *a) {
  struct server *s = c->srv;
  if (s->generation > a->after_generation) {
    send_generation(c, 0, "");
    return;
  }
  c->state = C_WAITING;
  c->watching = 1;
  c->watch_after = a->after_generation;
  if (a->timeout_ms >= 0)
    arm_timer(c, (uint64_t)a->timeout_ms);
  else
    uv_timer_stop(&c->timer);
}

/* SIGHUP (rank 0): reload the current MODEL path or URL, which may now
 * name another version (a directory or a symbolic link repointed). */
static void on_sighup(uv_signal_t *h, int signum) {
  struct server *s = h->data;
  char *model, *shown;
  if (s->stopping || !can_reload(s)) return;
  if (s->reload_asked || s->reloading) {
    LOG_AT(s, TPL_LOG_INFO, "SIGHUP: a reload is running already; ignored");
    return;
  }
  if (s->nsilent > 0) {
    char one[256];
    tpl__wire_silent_str(&s->silent[0], s->deadline, one, sizeof(one));
    LOG_AT(s, TPL_LOG_INFO, "SIGHUP: reload refused: a rank is silent: %s",
           one);
    return;
  }
  model = strdup(s->source);
  shown = model != NULL ? tpl__url_shown(model) : NULL;
  if (shown == NULL) {
    free(model);
    return;
  }
  LOG_AT(s, TPL_LOG_INFO, "reload: SIGHUP: %s", shown);
  ask_reload(s, model, shown, NULL, 0);
}

static void handle_args(struct conn *c, int kind,
                        const struct tpl__wire_request_args *a) {
  if (kind == TPL_REQ_RELOAD)
    begin_reload(c, a);
  else
    begin_watch(c, a);
}

static void handle_request(struct conn *c, int kind, unsigned flags) {
  struct server *s = c->srv;
  if (c->health_only && kind != TPL_REQ_HEALTH) {
    send_error(c, 1, BUSY);
    return;
  }
  c->close_after |= c->health_only;
  LOG_AT(s, TPL_LOG_DEBUG, "request %d from pid %ld", kind, (long)c->pid);
  switch (kind) {
  case TPL_REQ_HEALTH: /* prebuilt, unless a rank is silent */
    if (s->nsilent > 0)
      send_silent(c, "a rank is silent");
    else
      send_frame(c, F_HEALTH);
    break;
  case TPL_REQ_STATUS:
    send_status(c, (flags & TPL_REQ_F_SUMMARY) != 0);
    break;
  case TPL_REQ_ATTACH:
    c->fd_deadline = uv_now(&s->loop) + s->timeout_ms;
    note_attach(c);
    replies_put(c->rep);
    c->rep = replies_hold(s->rep); /* the generation it attaches to */
    send_attach(c);
    break;
  case TPL_REQ_SHUTDOWN:
    send_frame(c, F_SHUTDOWN);
    if (s->cfg->rank == 0) stop_job(s);
    break;
  default:
    send_error(c, 0, "unknown request kind %d", kind);
  }
}

static void handle_frame(struct conn *c) {
  struct tpl__error err = {0};
  int kind;
  unsigned flags = 0;
  struct tpl__wire_request_args a = {0};
  int rc = tpl__wire_decode_request(c->fr.body, c->fr.len, &kind, &flags, &err);
  int with_args = kind == TPL_REQ_RELOAD || kind == TPL_REQ_WATCH;
  if (rc == 0 && with_args && !c->health_only)
    rc = tpl__wire_decode_request_args(c->fr.body, c->fr.len, &a, &err);
  tpl__frame_reset(&c->fr);
  if (rc != 0)
    send_error(c, 1, "malformed request: %s", err.msg);
  else if (with_args && !c->health_only)
    handle_args(c, kind, &a);
  else
    handle_request(c, kind, flags);
  tpl__wire_request_args_free(&a);
}

/* Feeds buffered input to the frame reader while the connection is
 * reading; handles a complete frame; resumes reading when all is used. */
static void drive(struct conn *c) {
  while (c->state == C_READING && c->in_off < c->in_len) {
    int started = c->fr.hdr_have > 0, rc;
    size_t used;
    rc = tpl__frame_feed(&c->fr, c->in + c->in_off, c->in_len - c->in_off,
                         &used);
    c->in_off += used;
    if (!started && c->fr.hdr_have > 0) /* a request has this long */
      arm_timer(c, c->health_only ? HEALTH_SLOT_MS : c->srv->timeout_ms);
    if (rc == TPL_ELIMIT)
      send_error(c, 1, "request of %u bytes: expected at most %u", c->fr.len,
                 TPL_WIRE_MAX_REQUEST);
    else if (rc < 0)
      send_error(c, 1, "out of memory");
    else if (rc == 1)
      handle_frame(c);
  }
  if (c->in_off == c->in_len) c->in_off = c->in_len = 0;
  if (c->state == C_READING && !c->reading) start_read(c);
}

static void on_alloc(uv_handle_t *h, size_t hint, uv_buf_t *buf) {
  struct conn *c = h->data;
  buf->base = (char *)c->in + c->in_len;
  buf->len = sizeof(c->in) - c->in_len;
}

static void on_read(uv_stream_t *st, ssize_t n, const uv_buf_t *buf) {
  struct conn *c = st->data;
  if (c->state == C_CLOSING) return;
  if (n < 0) {
    close_conn(c); /* EOF or error: a half request gets no answer */
    return;
  }
  c->in_len += (size_t)n;
  drive(c);
}

static void start_read(struct conn *c) {
  if (uv_read_start((uv_stream_t *)&c->pipe, on_alloc, on_read) != 0) {
    close_conn(c);
    return;
  }
  c->reading = 1;
}

/* The exported store's handles, then the table's memfd, in fds (room
 * for TPL_STORE_EXPORT_FDS + 1); returns how many. */
static size_t attach_fds(const struct conn *c, int *fds) {
  size_t n = c->ex.nfds;
  memcpy(fds, c->ex.fds, n * sizeof(int));
  fds[n++] = c->rep->table_fd;
  return n;
}

/* The attach reply with the store's export (a memfd) and the table's
 * memfd in an SCM_RIGHTS message.  The fds travel with the first byte;
 * whatever the kernel did not take goes through uv_write.  A full socket
 * buffer (a client that has not read) is retried from the timer until
 * the phase deadline.  The export ends once the fds are sent (or cannot
 * be): the consumer's copies keep the memfd's bytes from then on. */
static void send_attach(struct conn *c) {
  struct server *s = c->srv;
  union {
    struct cmsghdr h;
    char buf[CMSG_SPACE((TPL_STORE_EXPORT_FDS + 1) * sizeof(int))];
  } ctl;
  int fds[TPL_STORE_EXPORT_FDS + 1];
  size_t nfd;
  struct iovec iov = {c->rep->frames[F_ATTACH], c->rep->frame_len[F_ATTACH]};
  struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.buf};
  struct cmsghdr *cm;
  uv_os_fd_t fd;
  ssize_t n;
  if (c->exported == NULL &&
      tpl__store_export(s->cur->store, &c->ex, NULL) != 0) {
    close_conn(c);
    return;
  }
  c->exported = s->cur->store;
  nfd = attach_fds(c, fds);
  m.msg_controllen = CMSG_SPACE(nfd * sizeof(int));
  memset(&ctl, 0, sizeof(ctl));
  cm = CMSG_FIRSTHDR(&m);
  cm->cmsg_level = SOL_SOCKET;
  cm->cmsg_type = SCM_RIGHTS;
  cm->cmsg_len = CMSG_LEN(nfd * sizeof(int));
  memcpy(CMSG_DATA(cm), fds, nfd * sizeof(int));
  stop_reading(c);
  if (uv_fileno((uv_handle_t *)&c->pipe, &fd) != 0) {
    close_conn(c);
    return;
  }
  do
    n = sendmsg(fd, &m, MSG_NOSIGNAL | MSG_DONTWAIT);
  while (n < 0 && errno == EINTR);
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
    c->state = C_FD_RETRY;
    arm_timer(c, FD_RETRY_MS);
    return;
  }
  end_export(c);
  if (n < 0) {
    close_conn(c);
  } else if ((size_t)n < iov.iov_len) {
    send_bytes(c, c->rep->frames[F_ATTACH] + n, iov.iov_len - (size_t)n);
  } else {
    finish_reply(c);
  }
}

static void on_conn_timer(uv_timer_t *t) {
  struct conn *c = t->data;
  if (c->state == C_FD_RETRY && uv_now(&c->srv->loop) < c->fd_deadline) {
    send_attach(c);
    if (c->state == C_READING) drive(c);
    return;
  }
  if (c->state == C_WAITING && c->watching) { /* a watch's time is up */
    send_generation(c, 0, "");
    return;
  }
  close_conn(c); /* idle, half a request, or a reply nobody reads */
}

static void arm_timer(struct conn *c, uint64_t ms) {
  uv_timer_start(&c->timer, on_conn_timer, ms, 0);
}

/* Only this user (or root) may talk to the daemon. */
static int peer_allowed(struct conn *c) {
  uv_os_fd_t fd;
  uid_t uid;
  if (uv_fileno((uv_handle_t *)&c->pipe, &fd) != 0) return 0;
  if (tpl__peer_cred(fd, &uid, &c->pid) != 0) return 0;
  return uid == geteuid() || uid == 0;
}

static void on_sink_closed(uv_handle_t *h) {
  struct server *s = h->data;
  s->sink_busy = 0;
}

/* Out of memory: the connection must still be accepted (libuv pauses the
 * listener until it is), so take it into the sink and close it. */
static void refuse_connection(struct server *s, uv_stream_t *listener) {
  if (s->sink_busy) return;
  uv_pipe_init(&s->loop, &s->sink, 0);
  s->sink.data = s;
  s->sink_busy = 1;
  uv_accept(listener, (uv_stream_t *)&s->sink);
  uv_close((uv_handle_t *)&s->sink, on_sink_closed);
}

static void on_connection(uv_stream_t *listener, int status) {
  struct server *s = listener->data;
  size_t reserved = s->cfg->reserve_health ? HEALTH_SLOTS : 0;
  struct conn *c;
  if (status < 0 || s->stopping) return;
  c = calloc(1, sizeof(*c));
  if (c == NULL) {
    refuse_connection(s, listener);
    return;
  }
  c->srv = s;
  tpl__frame_reader_init(&c->fr, TPL_WIRE_MAX_REQUEST);
  uv_pipe_init(&s->loop, &c->pipe, 0);
  uv_timer_init(&s->loop, &c->timer);
  c->pipe.data = c->timer.data = c;
  c->open_handles = 2;
  c->next = s->conns;
  if (s->conns != NULL) s->conns->prev = c;
  s->conns = c;
  s->nconns++;
  if (uv_accept(listener, (uv_stream_t *)&c->pipe) != 0 || !peer_allowed(c)) {
    close_conn(c);
    return;
  }
  if (s->nconns > MAX_CONNS + reserved) {
    uv_buf_t b = uv_buf_init((char *)s->rep->frames[F_BUSY],
                             (unsigned)s->rep->frame_len[F_BUSY]);
    uv_try_write((uv_stream_t *)&c->pipe, &b, 1);
    close_conn(c);
    return;
  }
  /* Clients holding every slot must not make the daemon look dead: a
   * few more connections get one health reply each, then close, and
   * have little time to ask, so nobody can hold them. */
  c->health_only = s->nconns > MAX_CONNS;
  LOG_AT(s, TPL_LOG_DEBUG, "client connected (pid %ld)", (long)c->pid);
  arm_timer(c, c->health_only ? HEALTH_SLOT_MS : s->timeout_ms);
  start_read(c);
}

/* ---- stopping ---- */

static void close_if_open(uv_handle_t *h, void *arg) {
  if (!uv_is_closing(h)) uv_close(h, NULL);
}

static void on_stop_timer(uv_timer_t *t) {
  struct server *s = t->data;
  while (s->conns != NULL)
    close_conn(s->conns);
}

/* Stops accepting, removes the socket, closes idle connections and lets
 * replies in flight finish (for at most STOP_GRACE_MS). */
static void begin_stop(struct server *s) {
  struct conn *c, *next;
  if (s->stopping) return;
  s->stopping = 1;
  LOG_AT(s, TPL_LOG_INFO, "shutdown: stopping, %zu connection(s) open",
         s->nconns);
  if (s->bound) unlink(s->sock_path);
  s->bound = 0;
  uv_close((uv_handle_t *)&s->listener, NULL);
  uv_close((uv_handle_t *)&s->poll_timer, NULL);
  uv_close((uv_handle_t *)&s->sigterm, NULL);
  uv_close((uv_handle_t *)&s->sigint, NULL);
  uv_close((uv_handle_t *)&s->sighup, NULL);
  uv_close((uv_handle_t *)&s->wake, NULL);
  /* Unreferenced: the loop ends as soon as the last connection closes. */
  uv_timer_start(&s->stop_timer, on_stop_timer, STOP_GRACE_MS, 0);
  uv_unref((uv_handle_t *)&s->stop_timer);
  for (c = s->conns; c != NULL; c = next) {
    next = c->next;
    if (c->state == C_WRITING)
      c->close_after = 1;
    else
      close_conn(c);
  }
}

/* Before this rank ends the job from the engine (a lost rank, during a
 * reload too, whose steps run on the engine's thread): its socket and
 * the ready file go first. */
static void on_job_abort(void *arg) {
  unpublish(arg);
}

/* A rank the watch lost (coord.h): this rank's socket and the ready file
 * go, then the job ends naming that rank. */
static void watch_ranks(struct server *s) {
  const struct tpl__coord *c = s->cfg->coord;
  int lost = c != NULL && c->watch != NULL ? c->watch(c->ctx) : -1;
  if (lost < 0) return;
  LOG_AT(s, TPL_LOG_INFO, "rank %d lost: ending the job", lost);
  unpublish(s);
  c->lost(c->ctx, lost);
}

/* Takes what the watch knows of silent ranks; logs when their number
 * changes. */
static void note_silent(struct server *s) {
  const struct tpl__coord *c = s->cfg->coord;
  size_t was = s->nsilent;
  char one[256];
  if (c == NULL || c->silent == NULL || s->silent == NULL) return;
  s->nsilent = c->silent(c->ctx, s->silent, s->cfg->world, &s->deadline);
  if (s->nsilent > s->cfg->world) s->nsilent = s->cfg->world;
  if (s->nsilent == was) return;
  if (s->nsilent == 0) {
    LOG_AT(s, TPL_LOG_INFO, "watch: every rank heard from again");
    return;
  }
  tpl__wire_silent_str(&s->silent[0], s->deadline, one, sizeof(one));
  LOG_AT(s, TPL_LOG_INFO, "watch: %zu rank(s) silent: %s", s->nsilent, one);
}

static void on_poll(uv_timer_t *t) {
  struct server *s = t->data;
  const struct tpl__coord *c = s->cfg->coord;
  if (s->reloading) return; /* MPI is the reload's, on the main thread */
  watch_ranks(s);
  note_silent(s);
  if (c != NULL && c->poll_shutdown != NULL && c->poll_shutdown(c->ctx) != 0)
    begin_stop(s);
  else if (c != NULL && c->poll_reload != NULL && c->poll_reload(c->ctx) > 0)
    ask_reload(s, NULL, NULL, NULL, 0); /* rank 0 started one: join it */
}

static void on_wake(uv_async_t *h) {
  uv_stop(h->loop);
}

/* The socket and the ready file go at once: after a rank ends the job
 * (a lost rank, MPI_Abort), the launcher sends the others SIGTERM and
 * SIGKILL a second later, which a stop's whole sequence may not fit in
 * (seen under the sanitizers: rank 0's socket and the ready file left). */
static void on_signal(uv_signal_t *h, int signum) {
  unpublish(h->data);
  stop_job(h->data);
}

/* ---- the run ---- */

/* Binds and listens under a temporary name, then links the socket to
 * its real name: whoever sees DIR/rank{R}.sock can connect (a client
 * that waits for the file never meets "connection refused"), and link()
 * never replaces a socket another daemon published meanwhile.  A path
 * too long for the temporary name binds in place. */
static int bind_and_listen(struct server *s, char *tmp, size_t len) {
  struct sockaddr_un sa;
  int rc;
  snprintf(tmp, len, "%s/.rank%u.sock.%ld", s->dir, s->cfg->rank,
           (long)getpid());
  if (strlen(tmp) >= sizeof(sa.sun_path))
    snprintf(tmp, len, "%s", s->sock_path);
  unlink(tmp);
  rc = uv_pipe_bind(&s->listener, tmp);
  if (rc == 0) chmod(tmp, 0600);
  if (rc == 0)
    rc = uv_listen((uv_stream_t *)&s->listener, LISTEN_BACKLOG, on_connection);
  if (rc == 0 && strcmp(tmp, s->sock_path) != 0 && link(tmp, s->sock_path) != 0)
    rc = -errno;
  return rc;
}

static int listen_socket(struct server *s, struct tpl__error *err) {
  char tmp[PATH_MAX];
  int rc = clear_stale_socket(s->sock_path, err);
  if (rc != 0) return rc;
  uv_pipe_init(&s->loop, &s->listener, 0);
  s->listener.data = s;
  rc = bind_and_listen(s, tmp, sizeof(tmp));
  s->bound = rc == 0;
  if (strcmp(tmp, s->sock_path) != 0) unlink(tmp);
  if (rc != 0)
    return tpl__fail(err, TPL_EOUTPUT, "%s: cannot listen: %s", s->sock_path,
                     uv_strerror(rc));
  return 0;
}

static int start_handles(struct server *s, struct tpl__error *err) {
  int rc;
  uv_timer_init(&s->loop, &s->poll_timer);
  uv_timer_init(&s->loop, &s->stop_timer);
  uv_signal_init(&s->loop, &s->sigterm);
  uv_signal_init(&s->loop, &s->sigint);
  uv_signal_init(&s->loop, &s->sighup);
  s->poll_timer.data = s->stop_timer.data = s;
  s->sigterm.data = s->sigint.data = s->sighup.data = s;
  rc = uv_async_init(&s->loop, &s->wake, on_wake);
  if (rc == 0) rc = uv_timer_start(&s->poll_timer, on_poll, POLL_MS, POLL_MS);
  if (rc == 0) rc = uv_signal_start(&s->sigterm, on_signal, SIGTERM);
  if (rc == 0) rc = uv_signal_start(&s->sigint, on_signal, SIGINT);
  /* SIGHUP: on rank 0, when it can, a reload; anywhere else (a closed
   * terminal, a supervisor's stop) it ends the job as TERM and INT do,
   * never with a rank's socket or the ready file left. */
  if (rc == 0)
    rc = uv_signal_start(
        &s->sighup, s->cfg->rank == 0 && can_reload(s) ? on_sighup : on_signal,
        SIGHUP);
  if (rc != 0)
    return tpl__fail(err, TPL_EINTERNAL, "daemon: cannot start: %s",
                     uv_strerror(rc));
  return 0;
}

static void free_server(struct server *s) {
  replies_put(s->rep);
  free(s->reload_model);
  free(s->reload_shown);
  free(s->reload_plan);
  free(s->source);
  free(s->silent);
  free(s->dir);
  free(s->sock_path);
}

/* Every rank's start-up result in, the job's worst out: a rank that could
 * not start stops them all (none is left waiting in a barrier). */
static int job_agree(const struct tpl__daemon_config *cfg, int rc,
                     struct tpl__error *err) {
  const struct tpl__coord *c = cfg->coord;
  return c != NULL && c->agree != NULL ? c->agree(c->ctx, rc, err) : rc;
}

/* ---- a reload: the loop in a thread, the load on this one ---- */

static void *loop_thread(void *arg) {
  struct server *s = arg;
  uv_run(&s->loop, UV_RUN_DEFAULT);
  return NULL;
}

/* On the engine's thread once this rank's new store is complete and
 * sealed (coord.h): the replies for serving it, built beside the loop
 * (which only reads the current ones). */
/* On the engine's thread: the new store's size, for status. */
static void note_size(void *ctx, uint64_t bytes) {
  struct server *s = ctx;
  atomic_store(&s->next_bytes, bytes);
}

static int prepare_next(void *ctx, const struct tpl__loaded *l,
                        struct tpl__error *err) {
  struct server *s = ctx;
  s->next = l;
  return replies_new(s, l, s->generation + 1, &s->next_rep, err);
}

/* Writes the ready file again, naming the generation (rank 0). */
static void rewrite_ready(struct server *s) {
  struct tpl__error err = {0};
  const struct tpl__daemon_config *cfg = s->cfg;
  if (!s->ready_written) return;
  if (tpl__ready_write(cfg->ready_file, s->dir, cfg->world, cfg->job_id,
                       s->generation, &err) != 0)
    LOG_AT(s, TPL_LOG_INFO, "reload: %s", err.msg);
}

/* Every rank agreed: from now on the new generation is served.  An
 * attach waiting to send its descriptors gets the new one whole (nothing
 * of it was sent: its export of the old store ends); replies being
 * written keep the old replies alive; the old generation is the
 * engine's to free (retire) once its store has no export left, at once
 * for a memfd: consumers that mapped it keep it as long as they do. */
static void switch_generation(struct server *s) {
  struct replies *old = s->rep;
  s->old = s->cur;
  s->cur = s->next;
  s->next = NULL;
  s->generation++;
  s->rep = s->next_rep;
  s->next_rep = NULL;
  for (struct conn *c = s->conns; c != NULL; c = c->next)
    if (c->state == C_FD_RETRY) {
      end_export(c);
      replies_put(c->rep);
      c->rep = replies_hold(s->rep);
    }
  replies_put(old);
  retire_unexported(s);
  rewrite_ready(s);
  LOG_AT(s, TPL_LOG_INFO, "reload: serving generation %llu (%s)",
         (unsigned long long)s->generation, s->cur->job->model);
  for (struct conn *c = s->conns, *next; c != NULL; c = next) {
    next = c->next;
    if (c->state == C_WAITING && c->watching && s->generation > c->watch_after)
      send_generation(c, 0, "");
  }
}

/* The reload, asked for by a client or SIGHUP on rank 0, or by rank 0 on
 * another rank: the loop goes on answering in a thread (it calls no MPI
 * meanwhile: on_poll and stop_job wait for the end) while this thread
 * runs the engine's reload; then the loop is back here, switched or not. */
static void run_reload(struct server *s) {
  const struct tpl__coord *co = s->cfg->coord;
  struct tpl__reload_hooks hooks = {note_size, prepare_next, s};
  const struct tpl__loaded *next = NULL;
  struct tpl__error err = {0};
  pthread_t t;
  int rc, threaded;
  s->reload_asked = 0;
  s->reloading = 1;
  s->nsilent = 0; /* the watch pauses; its silences start over after */
  atomic_store(&s->next_bytes, 0);
  threaded = pthread_create(&t, NULL, loop_thread, s) == 0;
  if (!threaded)
    LOG_AT(s, TPL_LOG_INFO, "reload: no thread for the loop: clients wait");
  rc = co->reload(co->ctx, s->reload_model, s->reload_plan, s->reload_md5,
                  &hooks, &next, &err);
  if (threaded) {
    uv_async_send(&s->wake);
    pthread_join(t, NULL);
  }
  s->reloading = 0;
  if (rc == 0) {
    switch_generation(s);
  } else {
    replies_put(s->next_rep);
    s->next_rep = NULL;
    s->next = NULL;
    /* Every rank has the message: rank 0 tells it (the others in debug) */
    LOG_AT(s, s->cfg->rank == 0 ? TPL_LOG_INFO : TPL_LOG_DEBUG,
           "reload failed: %s; still serving generation %llu",
           err.msg[0] ? err.msg : tpl_strerror(rc),
           (unsigned long long)s->generation);
  }
  if (s->reload_client != NULL) send_generation(s->reload_client, rc, err.msg);
  s->reload_client = NULL;
  if (rc == 0 && s->reload_model != NULL) { /* rank 0: the next default */
    free(s->source);
    s->source = s->reload_model;
    s->reload_model = NULL;
  }
  free(s->reload_model);
  free(s->reload_shown);
  free(s->reload_plan);
  s->reload_model = s->reload_shown = s->reload_plan = NULL;
  if (s->stop_after_reload) stop_job(s);
}

/* Listens, agrees with the other ranks, publishes the ready file (rank 0)
 * and runs the loop.  `rc` is the result of the steps before; the first
 * agreement happens whatever it is, the ready file's only after a good
 * one (every rank takes the same branch): agreeing an agreed failure
 * again would move its message to rank 0, which has none. */
static int serve(struct server *s, int rc, struct tpl__error *err) {
  const struct tpl__daemon_config *cfg = s->cfg;
  if (rc == 0) rc = listen_socket(s, err);
  if (rc == 0)
    LOG_AT(s, TPL_LOG_INFO, "start: listening on %s (pid %ld)", s->sock_path,
           (long)getpid());
  /* Signals are caught from here on, even while agreeing; the loop acts
   * on them once it runs. */
  if (rc == 0) rc = start_handles(s, err);
  rc = job_agree(cfg, rc, err);
  if (rc != 0) return rc;
  if (cfg->rank == 0 && cfg->ready_file != NULL) {
    rc = tpl__ready_write(cfg->ready_file, s->dir, cfg->world, cfg->job_id,
                          s->generation, err); /* with the job id */
    s->ready_written = rc == 0;
  }
  rc = job_agree(cfg, rc, err);
  if (rc == 0 && cfg->rank == 0)
    LOG_AT(s, TPL_LOG_INFO, "ready: all %u rank(s) serving", cfg->world);
  if (rc == 0 && cfg->coord != NULL && cfg->coord->watch_begin != NULL)
    cfg->coord->watch_begin(cfg->coord->ctx);
  if (rc == 0 && cfg->coord != NULL && cfg->coord->on_abort != NULL)
    cfg->coord->on_abort(cfg->coord->ctx, on_job_abort, s);
  s->started_ns = uv_hrtime();
  while (rc == 0) { /* stopped for a reload, or done */
    uv_run(&s->loop, UV_RUN_DEFAULT);
    if (!s->reload_asked || s->stopping) break;
    run_reload(s);
  }
  if (cfg->coord != NULL && cfg->coord->on_abort != NULL) /* s ends here */
    cfg->coord->on_abort(cfg->coord->ctx, NULL, NULL);
  return rc;
}

int tpl__daemon_run(const struct tpl__daemon_config *cfg,
                    struct tpl__error *err) {
  struct server s;
  const char *model;
  int rc;
  memset(&s, 0, sizeof(s));
  s.cfg = cfg;
  s.cur = cfg->loaded;
  s.generation = 1;
  s.timeout_ms = cfg->timeout_ms ? cfg->timeout_ms : DEFAULT_TIMEOUT_MS;
  signal(SIGPIPE, SIG_IGN);
  model = s.cur->job->model;
  s.source = strdup(cfg->source ? cfg->source : model ? model : "");
  s.silent = calloc(cfg->world, sizeof(*s.silent));
  rc = s.source != NULL && s.silent != NULL ? 0 : tpl__oom(err);
  if (rc == 0) rc = tpl__daemon_prepare_dir(cfg->socket_dir, &s.dir, err);
  if (rc == 0) rc = make_paths(&s, err);
  if (rc == 0) rc = replies_new(&s, s.cur, s.generation, &s.rep, err);
  if (rc == 0 && (rc = uv_loop_init(&s.loop)) != 0)
    rc = tpl__fail(err, TPL_EINTERNAL, "uv_loop_init: %s", uv_strerror(rc));
  else if (rc == 0)
    s.loop_ready = 1;
  rc = serve(&s, rc, err);
  if (s.loop_ready) { /* close what remains, let libuv finish closing it */
    uv_walk(&s.loop, close_if_open, NULL);
    uv_run(&s.loop, UV_RUN_DEFAULT);
    uv_loop_close(&s.loop);
  }
  if (s.bound) unlink(s.sock_path);
  if (s.ready_written) tpl__ready_release(cfg->ready_file, cfg->job_id);
  free_server(&s);
  return rc;
}
