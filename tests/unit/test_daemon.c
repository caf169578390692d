/* test_daemon.c - the daemon without MPI: a forked child runs
 * tpl__daemon_run (world 1) over a store built here, and the test talks
 * to it as well-behaved clients (health, attach, status, the
 * status and dump commands) and as hostile ones (random bytes, a 4 GiB
 * length, a half frame held open, one byte per write, 300 connections),
 * then checks every way of stopping leaves no socket or ready file.
 * Expected bytes are the fill pattern below; checksums come from
 * xxhash.h directly.  No verdict depends on the machine's speed: the test
 * waits for conditions (a ready file, a socket that accepts, a child that
 * exited, a connection closed), each bound by HANG_MS, which only catches
 * a hang. */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>

#include "cli.h"
#include "client.h"
#include "daemon.h"
#include "dtype.h"
#include "job.h" /* TPL_STORE_ALIGN */
#include "report.h"
#include "store.h"
#include "table_map.h"
#include "tap.h"

/* TPL_TEST_SLOWDOWN (4 under the sanitizer build, see Makefile.am)
 * scales every bound. */
static int slowdown(void) {
  const char *s = getenv("TPL_TEST_SLOWDOWN");
  int k = s != NULL ? atoi(s) : 1;
  return k > 0 ? k : 1;
}

/* The bound on any wait, reply or child: only a hang reaches it. */
#define HANG_MS (120000 * slowdown())
/* The daemon's per-phase timeout here: a connection idle this long is
 * closed (the truncated-frame case waits for it), so it is well above any
 * stall of a busy machine between a client's steps. */
#define TEST_TIMEOUT_MS (5000 * slowdown())

struct spec {
  const char *name;
  int dtype;
  int ndim;
  uint64_t shape[2];
  uint64_t nbytes;
};

static const struct spec specs[] = {
    {"model.embed.weight", TPL_DT_F32, 2, {4, 8}, 128},
    {"model.norm.bias", TPL_DT_BF16, 1, {3}, 6},
    {"lm_head.weight", TPL_DT_F64, 2, {2, 3}, 48},
    {"scalar", TPL_DT_I8, 0, {0}, 1},
};
#define NT ARRAY_SIZE(specs)

/* The job's LoadReport (host "h") and job table, as the engine packs
 * them. */
static uint8_t *report, *job_table;
static size_t report_len, job_table_len;

static char tmp[256], sockdir[300], sock[320], ready[300];
static struct tpl__store store;
static struct tpl__job_tensor jtensors[NT];
static struct tpl__job job;
static uint64_t offsets[NT];
static pid_t child = -1;
static int stop_pipe[2] = {-1, -1};

static uint8_t pattern(size_t t, size_t i) {
  return (uint8_t)(i * 7 + t * 31 + 3);
}

/* The job table describing the store: what `serve` hands the daemon. */
static void build_job(void) {
  uint64_t off = 0;
  job.grid = (struct tpl__grid){1, 1, 1, 1, 0};
  job.model = "m";
  job.plan_source = "";
  job.ntensors = NT;
  job.tensors = jtensors;
  for (size_t t = 0; t < NT; t++) {
    struct tpl__job_tensor *jt = &jtensors[t];
    offsets[t] = off;
    off = (off + specs[t].nbytes + TPL_STORE_ALIGN - 1) / TPL_STORE_ALIGN *
          TPL_STORE_ALIGN;
    jt->name = (char *)specs[t].name;
    jt->dtype = specs[t].dtype;
    jt->ndim = specs[t].ndim;
    memcpy(jt->shape, specs[t].shape, sizeof(specs[t].shape));
    memcpy(jt->rank_shape, specs[t].shape, sizeof(specs[t].shape));
    jt->stages = (struct tpl__stages){0, 1};
    jt->store_offset = offsets[t];
    jt->rank_bytes = specs[t].nbytes;
  }
  job.store_size = off;
}

static void build_store(void) {
  build_job();
  if (tpl__store_create_huge(&store, job.store_size, NT, TPL_HUGE_AUTO, NULL) !=
      0)
    abort();
  for (size_t t = 0; t < NT; t++) {
    uint8_t *p = store.base + offsets[t];
    for (size_t i = 0; i < specs[t].nbytes; i++)
      p[i] = pattern(t, i);
    store.xxh3[t] = XXH3_64bits(p, specs[t].nbytes);
  }
  if (tpl__store_seal(&store, NULL) != 0) abort();
}

/* What the engine gives the daemon: one rank's report, gathered. */
static void build_report(void) {
  struct tpl__rank_stats st = {.rank = 0, .pid = 1};
  uint8_t *mine = NULL;
  size_t len = 0;
  snprintf(st.host, sizeof(st.host), "h");
  if (tpl__rank_report_pack(&job, &store, &st, &mine, &len) != 0 ||
      tpl__load_report_pack(&job, &mine, &len, 1.0, 0, NULL, &report,
                            &report_len, NULL) != 0 ||
      tpl__job_pack(&job, &job_table, &job_table_len) != 0)
    abort();
  free(mine);
}

/* The checksum of tensor t's expected bytes, computed from the pattern. */
static uint64_t expected_xxh3(size_t t) {
  uint8_t buf[256];
  for (size_t i = 0; i < specs[t].nbytes; i++)
    buf[i] = pattern(t, i);
  return XXH3_64bits(buf, specs[t].nbytes);
}

static int noop_agree(void *ctx, int rc, struct tpl__error *err) {
  return rc;
}

static int pipe_says_stop(void *ctx) {
  struct pollfd p = {.fd = stop_pipe[0], .events = POLLIN};
  return poll(&p, 1, 0) > 0;
}

/* Forks a daemon for `rank` of `world` (rank 0 writes the ready file and
 * has the report); it stops when stop_pipe's write end is written to or
 * closed.  exit(), not _exit(): under ASan the child's leaks count. */
static pid_t spawn(uint32_t rank, uint32_t world) {
  pid_t p;
  if (pipe(stop_pipe) != 0) abort();
  fflush(stdout);
  p = fork();
  if (p == 0) {
    struct tpl__error err = {0};
    struct tpl__coord coord = {.rank = rank,
                               .world = world,
                               .agree = noop_agree,
                               .poll_shutdown = pipe_says_stop};
    struct tpl__daemon_config cfg = {.socket_dir = sockdir,
                                     .rank = rank,
                                     .world = world,
                                     .store = &store,
                                     .coord = &coord,
                                     .job = &job,
                                     .timeout_ms = TEST_TIMEOUT_MS};
    int rc;
    if (rank == 0) {
      cfg.ready_file = ready;
      cfg.status = report;
      cfg.status_len = report_len;
      cfg.job_table = job_table;
      cfg.job_table_len = job_table_len;
    }
    close(stop_pipe[1]);
    rc = tpl__daemon_run(&cfg, &err);
    if (rc != 0) printf("# daemon: %s\n", err.msg);
    fflush(stdout);
    exit(rc == 0 ? 0 : 1);
  }
  close(stop_pipe[0]);
  return p;
}

static int64_t now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

/* A connected socket to `path`, or -1. */
static int connect_to(const char *path) {
  struct sockaddr_un sa = {.sun_family = AF_UNIX};
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  memcpy(sa.sun_path, path, strlen(path) + 1);
  if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

/* 1 when a client can connect to `path`: the daemon listens there (its
 * socket file exists from bind(), before listen()). */
static int accepts(const char *path) {
  int fd = connect_to(path);
  if (fd >= 0) close(fd);
  return fd >= 0;
}

/* Waits until `path` accepts and, when `ready_path` is given, that file
 * exists (rank 0 writes it after listening); 0 when they do, -1 on a hang
 * or when child `p` ended first. */
static int wait_serving(pid_t p, const char *path, const char *ready_path) {
  int64_t end = now_ms() + HANG_MS;
  while (!accepts(path) ||
         (ready_path != NULL && access(ready_path, F_OK) != 0)) {
    if (now_ms() >= end || waitpid(p, NULL, WNOHANG) == p) return -1;
    usleep(10000);
  }
  return 0;
}

static void start_daemon(void) {
  child = spawn(0, 1);
  if (wait_serving(child, sock, ready) != 0)
    printf("# the daemon does not serve %s\n", sock);
}

/* Waits (at most HANG_MS) for the child; returns its exit status or -1. */
static int wait_child(void) {
  int st;
  for (int64_t end = now_ms() + HANG_MS; now_ms() < end;) {
    pid_t p = waitpid(child, &st, WNOHANG);
    if (p == child) {
      child = -1;
      close(stop_pipe[1]);
      return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    }
    usleep(10000);
  }
  kill(child, SIGKILL);
  waitpid(child, &st, 0);
  child = -1;
  return -1;
}

/* ---- raw clients ---- */

static int raw_connect(void) {
  return connect_to(sock);
}

/* Keeps the descriptors a message passed in the free slots of fds[0..2)
 * (all closed when fds is NULL or full). */
static void keep_fds(struct msghdr *m, int *fds) {
  for (struct cmsghdr *c = CMSG_FIRSTHDR(m); c != NULL; c = CMSG_NXTHDR(m, c))
    for (size_t i = 0; c->cmsg_type == SCM_RIGHTS &&
                       i < (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
         i++) {
      int d;
      memcpy(&d, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
      if (fds != NULL && fds[0] < 0)
        fds[0] = d;
      else if (fds != NULL && fds[1] < 0)
        fds[1] = d;
      else
        close(d);
    }
}

/* Reads n bytes within ms, the descriptors passed along as keep_fds does;
 * returns bytes read (short on EOF/timeout). */
static size_t read_for(int fd, uint8_t *buf, size_t n, int *fds, int ms) {
  size_t got = 0;
  while (got < n) {
    union {
      struct cmsghdr h;
      char b[CMSG_SPACE(4 * sizeof(int))];
    } ctl;
    struct iovec iov = {buf + got, n - got};
    struct msghdr m = {.msg_iov = &iov,
                       .msg_iovlen = 1,
                       .msg_control = ctl.b,
                       .msg_controllen = sizeof(ctl.b)};
    struct pollfd p = {.fd = fd, .events = POLLIN};
    ssize_t k;
    if (poll(&p, 1, ms) <= 0) break;
    k = recvmsg(fd, &m, MSG_CMSG_CLOEXEC);
    if (k <= 0) break;
    keep_fds(&m, fds);
    got += (size_t)k;
  }
  return got;
}

/* Reads one frame (of at most 1 MiB) with its length header into *frame
 * (malloc'd) and its descriptors into fds (two slots at -1, or NULL);
 * returns its length, or 0. */
static size_t raw_frame(int fd, uint8_t **frame, int *fds, int ms) {
  uint8_t hdr[4];
  uint32_t len;
  *frame = NULL;
  if (read_for(fd, hdr, 4, fds, ms) != 4) return 0;
  len = (uint32_t)hdr[0] << 24 | hdr[1] << 16 | hdr[2] << 8 | hdr[3];
  if (len > (1u << 20)) return 0;
  *frame = malloc(len + 4);
  memcpy(*frame, hdr, 4);
  return read_for(fd, *frame + 4, len, fds, ms) == len ? len + 4 : 0;
}

/* Reads one reply frame, its descriptors into fds as raw_frame does;
 * returns 0 and fills *r, or -1. */
static int raw_reply_fds(int fd, struct tpl__wire_response *r, int *fds,
                         int ms) {
  uint8_t *frame;
  size_t len = raw_frame(fd, &frame, fds, ms);
  int rc =
      len > 0 ? tpl__wire_decode_response(frame + 4, len - 4, r, NULL) : -1;
  free(frame);
  return rc;
}

static int raw_reply(int fd, struct tpl__wire_response *r, int ms) {
  return raw_reply_fds(fd, r, NULL, ms);
}

/* Sends an attach request with `flags` on fd; 0 when it went whole. */
static int raw_attach(int fd, unsigned flags) {
  uint8_t *frame;
  size_t len;
  int ok;
  if (tpl__wire_encode_request_args(TPL_REQ_ATTACH, flags, NULL, &frame,
                                    &len) != 0)
    return -1;
  ok = write(fd, frame, len) == (ssize_t)len;
  free(frame);
  return ok ? 0 : -1;
}

/* 1 when the daemon closes the connection (within HANG_MS). */
static int closed(int fd) {
  uint8_t b[256];
  int64_t end = now_ms() + HANG_MS;
  for (;;) {
    struct pollfd p = {.fd = fd, .events = POLLIN};
    int64_t left = end - now_ms();
    if (left <= 0 || poll(&p, 1, (int)left) <= 0) return 0;
    ssize_t k = read(fd, b, sizeof(b));
    if (k == 0 || (k < 0 && errno == ECONNRESET)) return 1;
  }
}

static int health_ok(void) {
  struct tpl__wire_response r = {0};
  int rc =
      tpl__client_request_flags(sock, TPL_REQ_HEALTH, 0, HANG_MS, &r, NULL);
  int ok = rc == 0 && r.ok;
  tpl__wire_response_free(&r);
  return ok;
}

/* 1 once a health request succeeds (the daemon may still be closing
 * connections just dropped, answering "busy"), within HANG_MS. */
static int health_ok_again(void) {
  int64_t end = now_ms() + HANG_MS;
  while (!health_ok()) {
    if (now_ms() >= end) return 0;
    usleep(10000);
  }
  return 1;
}

/* ---- well-behaved clients ---- */

static void test_start_and_ready_file(void) {
  struct stat st;
  json_t *j;
  char real[PATH_MAX];
  start_daemon();
  CHECK(child > 0);
  j = json_load_file(ready, 0, NULL);
  CHECK(j != NULL);
  CHECK(realpath(sockdir, real) != NULL);
  CHECK_STR_CONTAINS(json_string_value(json_object_get(j, "socket_dir")), real);
  CHECK_EQ_INT(json_integer_value(json_object_get(j, "world_size")), 1);
  CHECK_EQ_INT(json_integer_value(json_object_get(j, "pid")), child);
  json_decref(j);
  CHECK_EQ_INT(stat(sockdir, &st), 0);
  CHECK_EQ_INT(st.st_mode & 0777, 0700);
  CHECK_EQ_INT(lstat(sock, &st), 0);
  CHECK(S_ISSOCK(st.st_mode));
}

static void test_health(void) {
  struct tpl__wire_response r = {0};
  CHECK_EQ_INT(
      tpl__client_request_flags(sock, TPL_REQ_HEALTH, 0, HANG_MS, &r, NULL), 0);
  CHECK_EQ_INT(r.ok, 1);
  CHECK_EQ_U64(r.rank, 0);
  CHECK_EQ_U64(r.world, 1);
  CHECK_EQ_U64(r.tp, 1); /* the job's grid */
  CHECK_EQ_U64(r.pp, 1);
  CHECK_EQ_U64(r.store_bytes, store.size);
  tpl__wire_response_free(&r);
}

/* The whole status carries the job table its report's arrays index. */
static void test_status_job_table(void) {
  struct tpl__wire_response r = {0};
  struct tpl__job *got = NULL;
  CHECK_EQ_INT(
      tpl__client_request_flags(sock, TPL_REQ_STATUS, 0, HANG_MS, &r, NULL), 0);
  CHECK(r.job != NULL);
  CHECK_EQ_INT(r.job ? tpl__job_unpack(r.job, r.job_len, &got, NULL) : -1, 0);
  CHECK_EQ_U64(got ? got->ntensors : 0, NT);
  for (size_t t = 0; got != NULL && t < NT && t < got->ntensors; t++) {
    CHECK(strcmp(got->tensors[t].name, specs[t].name) == 0);
    CHECK_EQ_INT(got->tensors[t].dtype, specs[t].dtype);
    CHECK_EQ_U64(got->tensors[t].rank_bytes, specs[t].nbytes);
  }
  tpl__job_free(got);
  tpl__wire_response_free(&r);
}

static void check_attached(const char *path) {
  struct tpl_shard *s = NULL;
  struct tpl_tensor_view v;
  char msg[256];
  CHECK_EQ_INT(tpl_attach(path, &s, msg, sizeof(msg)), 0);
  if (s == NULL) {
    printf("# attach: %s\n", msg);
    return;
  }
  CHECK_EQ_U64(tpl_shard_count(s), NT);
  CHECK_EQ_U64(tpl_shard_bytes(s), store.size);
  CHECK_EQ_U64(tpl_shard_world(s), 1);
  for (size_t t = 0; t < NT; t++) {
    int same = 1;
    CHECK_EQ_INT(tpl_shard_find(s, specs[t].name, &v), 0);
    CHECK_EQ_U64(v.nbytes, specs[t].nbytes);
    CHECK_EQ_INT(v.ndim, specs[t].ndim);
    for (size_t i = 0; v.data != NULL && i < v.nbytes; i++)
      same &= ((const uint8_t *)v.data)[i] == pattern(t, i);
    CHECK(v.data != NULL && same);
    CHECK(v.data != store.base + offsets[t]); /* our own mapping */
    CHECK_EQ_U64(XXH3_64bits(v.data, v.nbytes), v.xxh3);
    CHECK_EQ_INT(tpl_shard_tensor(s, t, &v), 0);
    CHECK(strcmp(v.name, specs[t].name) == 0);
  }
  CHECK_EQ_INT(tpl_shard_find(s, "no.such.tensor", &v), -ENOENT);
  CHECK_EQ_INT(tpl_shard_tensor(s, NT, &v), -ERANGE);
  tpl_detach(s);
}

static void test_attach_lookup_every_tensor(void) {
  check_attached(sock);
}

static void test_status_report_bytes(void) {
  struct tpl__wire_response r = {0};
  CHECK_EQ_INT(
      tpl__client_request_flags(sock, TPL_REQ_STATUS, 0, HANG_MS, &r, NULL), 0);
  CHECK_EQ_INT(r.ok, 1);
  CHECK_EQ_U64(r.status_len, report_len);
  CHECK(r.status != NULL && memcmp(r.status, report, report_len) == 0);
  tpl__wire_response_free(&r);
}

/* The summary a plain `tpload status` asks for: the report without its
 * per-tensor arrays, each rank's tensor count kept, and no job table. */
static void test_status_summary(void) {
  struct tpl__wire_response r = {0};
  struct tpl__report *rep = NULL;
  CHECK_EQ_INT(tpl__client_request_flags(sock, TPL_REQ_STATUS,
                                         TPL_REQ_F_SUMMARY, HANG_MS, &r, NULL),
               0);
  CHECK_EQ_INT(r.ok, 1);
  CHECK(r.job == NULL);
  CHECK(r.status_len > 0 && r.status_len < report_len);
  CHECK_EQ_INT(r.status ? tpl__report_decode(r.status, r.status_len, &rep, NULL)
                        : -1,
               0);
  CHECK_EQ_U64(rep ? rep->ntensors : 1, 0);
  CHECK_EQ_U64(rep ? rep->ranks[0].tensor_count : 0, NT);
  CHECK(rep != NULL && strcmp(rep->ranks[0].host, "h") == 0);
  tpl__report_free(rep);
  tpl__wire_response_free(&r);
}

/* Reads all of a memfd from its start. */
static uint8_t *read_memfd(int fd, size_t len) {
  uint8_t *b = malloc(len + 1);
  if (b != NULL && pread(fd, b, len, 0) != (ssize_t)len) {
    free(b);
    b = NULL;
  }
  return b;
}

/* The TPLM table of the specs, laid out here from what the test put in
 * the store (malloc'd). */
static uint8_t *expected_table(size_t *len) {
  static const char *mlc[] = {"float32", "bfloat16", "float64", "int8"};
  struct tpl__tmap_tensor t[NT];
  uint8_t *b = NULL;
  for (size_t i = 0; i < NT; i++) {
    t[i] = (struct tpl__tmap_tensor){
        specs[i].name, mlc[i],          specs[i].ndim,   {0},
        offsets[i],    specs[i].nbytes, expected_xxh3(i)};
    memcpy(t[i].shape, specs[i].shape, sizeof(specs[i].shape));
  }
  return tpl__tmap_build(t, NT, &b, len, NULL) == 0 ? b : NULL;
}

/* Every attach reply: two sealed fds, the store's and the table's, whose
 * bytes are the table of what the store holds.  Both attaches go over
 * one connection, which keeps serving after a reply that carried
 * descriptors; an attach with 0.1.0's table_fd flag (field 3, reserved)
 * is answered the same. */
static void test_attach_table_memfd(void) {
  static const uint8_t with_flag[] = {0, 0, 0, 4, 0x08, 0x03, 0x18, 0x01};
  struct tpl__wire_response r = {0}, again = {0};
  int fds[2] = {-1, -1}, fds2[2] = {-1, -1}, s = raw_connect();
  uint8_t *mine = NULL, *theirs = NULL;
  size_t len = 0;
  REQUIRE(s >= 0);
  CHECK_EQ_INT(raw_attach(s, 0), 0);
  CHECK_EQ_INT(raw_reply_fds(s, &r, fds, HANG_MS), 0);
  CHECK_EQ_INT(write(s, with_flag, sizeof(with_flag)), sizeof(with_flag));
  CHECK_EQ_INT(raw_reply_fds(s, &again, fds2, HANG_MS), 0);
  close(s);
  CHECK(fds[0] >= 0 && fds[1] >= 0);
  CHECK(fds2[0] >= 0 && fds2[1] >= 0);
  CHECK_EQ_U64(again.table_bytes, r.table_bytes);
  CHECK_EQ_INT(fcntl(fds[1], F_GET_SEALS) & (F_SEAL_WRITE | F_SEAL_GROW),
               F_SEAL_WRITE | F_SEAL_GROW);
  mine = expected_table(&len);
  CHECK_EQ_U64(r.table_bytes, len);
  if (fds[1] >= 0 && r.table_bytes == len) theirs = read_memfd(fds[1], len);
  CHECK(theirs != NULL && mine != NULL && memcmp(theirs, mine, len) == 0);
  free(mine);
  free(theirs);
  for (int i = 0; i < 2; i++) {
    if (fds[i] >= 0) close(fds[i]);
    if (fds2[i] >= 0) close(fds2[i]);
  }
  tpl__wire_response_free(&r);
  tpl__wire_response_free(&again);
}

/* After test_attach_lookup_every_tensor and test_attach_table_memfd:
 * three attaches counted and an uptime.  (Clients connected is not checked: the
 * attaching client's close may reach the daemon after this request.) */
static void test_status_counters(void) {
  struct tpl__wire_response r = {0};
  CHECK_EQ_INT(
      tpl__client_request_flags(sock, TPL_REQ_STATUS, 0, HANG_MS, &r, NULL), 0);
  CHECK_EQ_INT(r.ok, 1);
  CHECK(r.uptime_seconds >= 0);
  CHECK_EQ_U64(r.attaches, 3); /* tpl_attach, and the two raw ones */
  tpl__wire_response_free(&r);
}

/* Runs a command with stdout sent to `out`; returns its exit code. */
static int run_cmd(const struct tpl__cli_command *cmd, char **argv,
                   const char *out) {
  int saved, fd, rc, argc = 0;
  while (argv[argc] != NULL)
    argc++;
  fflush(stdout);
  saved = dup(1);
  fd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  dup2(fd, 1);
  close(fd);
  rc = tpl__cli_exec(cmd, argc, argv);
  fflush(stdout);
  dup2(saved, 1);
  close(saved);
  return rc;
}

/* A command's output (malloc'd, at most 64 KiB), or NULL. */
static char *output_of(const char *out) {
  FILE *f = fopen(out, "r");
  char *text = calloc(1, 65536);
  if (f != NULL && text != NULL) fread(text, 1, 65535, f);
  if (f != NULL) fclose(f);
  return text;
}

/* The table is the summary unless --tensors; --json the whole report
 * unless --summary, which keeps each rank's tensor count. */
static void test_status_command_tensors(void) {
  char out[300], *text;
  char *table_argv[] = {"status", sock, NULL};
  char *tensors_argv[] = {"status", sock, "--tensors", NULL};
  char *summary_argv[] = {"status", sock, "--json", "--summary", NULL};
  char *lone_argv[] = {"status", sock, "--summary", NULL};
  snprintf(out, sizeof(out), "%s/status.out", tmp);
  CHECK_EQ_INT(run_cmd(&tpl__cmd_status, table_argv, out), 0);
  text = output_of(out);
  CHECK(text != NULL && strstr(text, "XXH3 rank") == NULL);
  CHECK_STR_CONTAINS(text, "TENSORS");
  free(text);
  CHECK_EQ_INT(run_cmd(&tpl__cmd_status, tensors_argv, out), 0);
  text = output_of(out);
  CHECK_STR_CONTAINS(text, "XXH3 rank");
  CHECK_STR_CONTAINS(text, "model.norm.bias");
  CHECK_STR_CONTAINS(text, "[2,3]"); /* lm_head's shape */
  free(text);
  CHECK_EQ_INT(run_cmd(&tpl__cmd_status, summary_argv, out), 0);
  text = output_of(out);
  CHECK(text != NULL && strstr(text, "\"params\"") == NULL);
  CHECK_STR_CONTAINS(text, "\"tensor_count\": 4");
  free(text);
  CHECK_EQ_INT(run_cmd(&tpl__cmd_status, lone_argv, out), 64);
}

static void test_status_command(void) {
  char out[300], *text = NULL, missing[340];
  char *json_argv[] = {"status", sock, "--json", NULL};
  char *health_argv[] = {"status", sock, "--health", NULL};
  char *table_argv[] = {"status", sock, NULL};
  char *miss_argv[] = {"status", missing, "--health", NULL};
  char *usage_argv[] = {"status", sock, "--health", "--json", NULL};
  size_t n = 0;
  FILE *f;
  snprintf(out, sizeof(out), "%s/status.out", tmp);
  snprintf(missing, sizeof(missing), "%s/rank7.sock", sockdir);
  CHECK_EQ_INT(run_cmd(&tpl__cmd_status, json_argv, out), 0);
  f = fopen(out, "r");
  if (f != NULL) {
    text = calloc(1, 65536);
    n = fread(text, 1, 65535, f);
    fclose(f);
  }
  CHECK(n > 0);
  CHECK_STR_CONTAINS(text, "\"model\": \"m\"");
  CHECK_STR_CONTAINS(text, "\"host\": \"h\"");
  CHECK_STR_CONTAINS(text, "\"params\""); /* the whole report */
  CHECK_STR_CONTAINS(text, "\"name\": \"lm_head.weight\"");
  free(text);
  CHECK_EQ_INT(run_cmd(&tpl__cmd_status, table_argv, out), 0);
  CHECK_EQ_INT(run_cmd(&tpl__cmd_status, health_argv, out), 0);
  CHECK_EQ_INT(run_cmd(&tpl__cmd_status, miss_argv, out), 69);
  CHECK_EQ_INT(run_cmd(&tpl__cmd_status, usage_argv, out), 64);
}

static void test_dump_command(void) {
  char out[300], file[300];
  char *argv[] = {"dump", sock, "--out", file, NULL};
  const char *meta = "{\"__metadata__\":{\"tp_rank\":\"0\",\"tp_size\":\"1\"}";
  uint8_t *buf = NULL;
  size_t got = 0, total = 0, hlen = 0, pos;
  FILE *f;
  snprintf(out, sizeof(out), "%s/dump.out", tmp);
  snprintf(file, sizeof(file), "%s/rank0.safetensors", tmp);
  CHECK_EQ_INT(run_cmd(&tpl__cmd_dump, argv, out), 0);
  for (size_t t = 0; t < NT; t++)
    total += specs[t].nbytes;
  f = fopen(file, "rb");
  REQUIRE(f != NULL);
  buf = calloc(1, 8192);
  got = fread(buf, 1, 8192, f);
  fclose(f);
  for (int i = 7; i >= 0; i--)
    hlen = hlen << 8 | buf[i];
  CHECK_EQ_U64(got, 8 + hlen + total);
  CHECK_EQ_U64((8 + hlen) % 8, 0);
  CHECK(hlen < 8000 && memcmp(buf + 8, meta, strlen(meta)) == 0);
  /* Tensor bytes back to back, in table order, after the header. */
  pos = 8 + hlen;
  for (size_t t = 0; t < NT && pos <= got; t++) {
    int same = 1;
    for (size_t i = 0; i < specs[t].nbytes && pos + i < got; i++)
      same &= buf[pos + i] == pattern(t, i);
    CHECK(same);
    pos += specs[t].nbytes;
  }
  free(buf);
}

static void test_dump_needs_out(void) {
  char out[300];
  char *argv[] = {"dump", sock, NULL};
  snprintf(out, sizeof(out), "%s/dump.out", tmp);
  CHECK_EQ_INT(run_cmd(&tpl__cmd_dump, argv, out), 64);
}

/* A second daemon as rank 1 of 2 next to rank 0: job-wide requests are
 * refused there with a pointer to rank 0, and `tpload status` follows it. */
static void test_rank1_refers_to_rank0(void) {
  char out[300], r1[340];
  char *argv[] = {"status", r1, "--json", NULL};
  struct tpl__wire_response r = {0};
  int st, saved_pipe = stop_pipe[1];
  pid_t p;
  snprintf(r1, sizeof(r1), "%s/rank1.sock", sockdir);
  snprintf(out, sizeof(out), "%s/status1.out", tmp);
  p = spawn(1, 2);
  CHECK_EQ_INT(wait_serving(p, r1, NULL), 0);
  CHECK_EQ_INT(
      tpl__client_request_flags(r1, TPL_REQ_STATUS, 0, HANG_MS, &r, NULL), 0);
  CHECK_EQ_INT(r.ok, 0);
  CHECK_EQ_U64(r.rank, 1);
  CHECK_EQ_U64(r.world, 2);
  CHECK_STR_CONTAINS(r.error, "rank0.sock");
  tpl__wire_response_free(&r);
  CHECK_EQ_INT(
      tpl__client_request_flags(r1, TPL_REQ_SHUTDOWN, 0, HANG_MS, &r, NULL), 0);
  CHECK_EQ_INT(r.ok, 0);
  tpl__wire_response_free(&r);
  CHECK_EQ_INT(run_cmd(&tpl__cmd_status, argv, out), 0); /* via rank 0 */
  close(stop_pipe[1]); /* the job says stop: rank 1 exits cleanly */
  stop_pipe[1] = saved_pipe;
  CHECK_EQ_INT(waitpid(p, &st, 0), p);
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  CHECK(access(r1, F_OK) != 0);
  CHECK(health_ok()); /* rank 0 untouched */
}

static void test_pipelined_requests(void) {
  /* HEALTH (empty body) and STATUS (08 01) in one write. */
  static const uint8_t two[] = {0, 0, 0, 0, 0, 0, 0, 2, 0x08, 0x01};
  struct tpl__wire_response a = {0}, b = {0};
  int fd = raw_connect();
  CHECK(fd >= 0);
  CHECK_EQ_INT(write(fd, two, sizeof(two)), sizeof(two));
  CHECK_EQ_INT(raw_reply(fd, &a, HANG_MS), 0);
  CHECK_EQ_INT(raw_reply(fd, &b, HANG_MS), 0);
  CHECK_EQ_INT(a.ok, 1);
  CHECK(a.status == NULL);
  CHECK(b.ok && b.status != NULL);
  tpl__wire_response_free(&a);
  tpl__wire_response_free(&b);
  close(fd);
}

/* ---- hostile clients ---- */

static void test_random_bytes(void) {
  uint8_t junk[64];
  uint32_t x = 12345;
  int fd = raw_connect();
  for (size_t i = 0; i < sizeof(junk); i++) {
    x = x * 1103515245u + 12345u;
    junk[i] = (uint8_t)(x >> 16);
  }
  junk[0] = 0x9c; /* a length far above the cap */
  CHECK(fd >= 0);
  CHECK_EQ_INT(write(fd, junk, sizeof(junk)), sizeof(junk));
  CHECK(closed(fd));
  close(fd);
  CHECK(health_ok());
}

static void test_four_gib_length(void) {
  static const uint8_t hdr[] = {0xff, 0xff, 0xff, 0xff};
  struct tpl__wire_response r = {0};
  int fd = raw_connect();
  CHECK(fd >= 0);
  CHECK_EQ_INT(write(fd, hdr, 4), 4);
  CHECK_EQ_INT(raw_reply(fd, &r, HANG_MS), 0);
  CHECK_EQ_INT(r.ok, 0);
  CHECK_STR_CONTAINS(r.error, "request of 4294967295 bytes");
  CHECK_STR_CONTAINS(r.error, "at most 65536");
  CHECK(closed(fd));
  tpl__wire_response_free(&r);
  close(fd);
  CHECK(health_ok());
}

static void test_malformed_protobuf(void) {
  static const uint8_t fr[] = {0, 0, 0, 2, 0xff, 0xff};
  struct tpl__wire_response r = {0};
  int fd = raw_connect();
  CHECK(fd >= 0);
  CHECK_EQ_INT(write(fd, fr, sizeof(fr)), sizeof(fr));
  CHECK_EQ_INT(raw_reply(fd, &r, HANG_MS), 0);
  CHECK_EQ_INT(r.ok, 0);
  CHECK_STR_CONTAINS(r.error, "malformed request");
  CHECK(closed(fd));
  tpl__wire_response_free(&r);
  close(fd);
}

static void test_unknown_kind_keeps_connection(void) {
  static const uint8_t fr[] = {0, 0, 0, 2, 0x08, 0x63, 0, 0, 0, 0};
  struct tpl__wire_response a = {0}, b = {0};
  int fd = raw_connect();
  CHECK(fd >= 0);
  CHECK_EQ_INT(write(fd, fr, sizeof(fr)), sizeof(fr));
  CHECK_EQ_INT(raw_reply(fd, &a, HANG_MS), 0);
  CHECK_EQ_INT(a.ok, 0);
  CHECK_STR_CONTAINS(a.error, "unknown request kind 99");
  CHECK_EQ_INT(raw_reply(fd, &b, HANG_MS), 0);
  CHECK_EQ_INT(b.ok, 1);
  tpl__wire_response_free(&a);
  tpl__wire_response_free(&b);
  close(fd);
}

static void test_truncated_frame_times_out(void) {
  static const uint8_t half[] = {0, 0, 0, 16, 0x08};
  int fd = raw_connect();
  CHECK(fd >= 0);
  CHECK_EQ_INT(write(fd, half, sizeof(half)), sizeof(half));
  CHECK(health_ok()); /* others are served meanwhile */
  CHECK(closed(fd));
  close(fd);
}

static void test_one_byte_per_write(void) {
  static const uint8_t fr[] = {0, 0, 0, 2, 0x08, 0x01}; /* STATUS */
  struct tpl__wire_response r = {0};
  int fd = raw_connect();
  CHECK(fd >= 0);
  for (size_t i = 0; i < sizeof(fr); i++) {
    CHECK_EQ_INT(write(fd, fr + i, 1), 1);
    usleep(20000);
  }
  CHECK_EQ_INT(raw_reply(fd, &r, HANG_MS), 0);
  CHECK_EQ_INT(r.ok, 1);
  CHECK_EQ_U64(r.status_len, report_len);
  tpl__wire_response_free(&r);
  close(fd);
}

static void test_300_connections(void) {
  enum { N = 300, LIMIT = 256 };
  static const uint8_t health[] = {0, 0, 0, 0};
  static int fds[N];
  struct rlimit rl;
  int ok = 0, busy = 0, other = 0;
  getrlimit(RLIMIT_NOFILE, &rl);
  if (rl.rlim_cur < 1024 && rl.rlim_max >= 1024) rl.rlim_cur = 1024;
  setrlimit(RLIMIT_NOFILE, &rl);
  for (int i = 0; i < N; i++)
    fds[i] = raw_connect();
  for (int i = 0; i < N; i++)
    if (fds[i] >= 0) send(fds[i], health, 4, MSG_NOSIGNAL);
  for (int i = 0; i < N; i++) {
    struct tpl__wire_response r = {0};
    if (fds[i] >= 0 && raw_reply(fds[i], &r, HANG_MS) == 0) {
      if (r.ok)
        ok++;
      else if (r.error && strstr(r.error, "busy"))
        busy++;
      else
        other++;
    } else {
      other++;
    }
    tpl__wire_response_free(&r);
  }
  CHECK_EQ_INT(ok, LIMIT);
  CHECK_EQ_INT(busy, N - LIMIT);
  CHECK_EQ_INT(other, 0);
  for (int i = 0; i < N; i++)
    if (fds[i] >= 0) close(fds[i]);
  CHECK(health_ok_again());
  check_attached(sock);
}

static void test_other_uid_refused(void) {
  pid_t p;
  int st = -1;
  if (geteuid() != 0) {
    printf("# not root: cannot connect as another uid; own uid only\n");
    CHECK(health_ok());
    return;
  }
  /* Open the directory and socket to everyone for a moment, so only
   * SO_PEERCRED stands between another user and the daemon. */
  chmod(tmp, 0711);
  chmod(sockdir, 0711);
  chmod(sock, 0666);
  fflush(stdout);
  p = fork();
  if (p == 0) {
    static const uint8_t health[] = {0, 0, 0, 0};
    struct tpl__wire_response r = {0};
    int fd;
    if (setgid(65534) != 0 || setuid(65534) != 0) _exit(3);
    fd = raw_connect();
    if (fd < 0) _exit(2);
    send(fd, health, 4, MSG_NOSIGNAL);
    if (raw_reply(fd, &r, HANG_MS) == 0) _exit(1);
    _exit(closed(fd) ? 0 : 4);
  }
  waitpid(p, &st, 0);
  chmod(tmp, 0700);
  chmod(sockdir, 0700);
  chmod(sock, 0600);
  CHECK(WIFEXITED(st));
  CHECK_EQ_INT(WEXITSTATUS(st), 0); /* connected, closed, no reply */
  CHECK(health_ok());
}

static void test_live_socket_refused(void) {
  struct tpl__error err = {0};
  struct tpl__daemon_config cfg = {.socket_dir = sockdir,
                                   .rank = 0,
                                   .world = 1,
                                   .store = &store,
                                   .job = &job};
  alarm((unsigned)(HANG_MS / 1000));
  CHECK_EQ_INT(tpl__daemon_run(&cfg, &err), TPL_EOUTPUT);
  alarm(0);
  CHECK_STR_CONTAINS(err.msg, "another daemon is serving");
  CHECK(health_ok());
}

static void test_open_dir_refused(void) {
  struct tpl__error err = {0};
  char dir[300];
  struct tpl__daemon_config cfg = {
      .socket_dir = dir, .rank = 0, .world = 1, .store = &store, .job = &job};
  snprintf(dir, sizeof(dir), "%s/open", tmp);
  mkdir(dir, 0755);
  chmod(dir, 0755);
  CHECK_EQ_INT(tpl__daemon_run(&cfg, &err), TPL_EOUTPUT);
  CHECK_STR_CONTAINS(err.msg, "expected mode 0700");
  rmdir(dir);
}

/* ---- stopping ---- */

static void check_clean_exit(void) {
  CHECK_EQ_INT(wait_child(), 0);
  CHECK(access(sock, F_OK) != 0);
  CHECK(access(ready, F_OK) != 0);
}

static void test_shutdown_request(void) {
  struct tpl__wire_response r = {0};
  CHECK_EQ_INT(
      tpl__client_request_flags(sock, TPL_REQ_SHUTDOWN, 0, HANG_MS, &r, NULL),
      0);
  CHECK_EQ_INT(r.ok, 1);
  tpl__wire_response_free(&r);
  check_clean_exit();
}

static void test_stale_socket_replaced(void) {
  struct sockaddr_un sa = {.sun_family = AF_UNIX};
  int fd = socket(AF_UNIX, SOCK_STREAM, 0);
  memcpy(sa.sun_path, sock, strlen(sock) + 1);
  CHECK_EQ_INT(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
  close(fd); /* the file stays, nobody listens: a dead daemon's socket */
  start_daemon();
  CHECK(health_ok());
}

static void test_sigterm(void) {
  CHECK(child > 0);
  kill(child, SIGTERM);
  check_clean_exit();
}

static void test_job_shutdown_poll(void) {
  start_daemon();
  CHECK(health_ok());
  CHECK_EQ_INT(write(stop_pipe[1], "x", 1), 1);
  check_clean_exit();
}

int main(void) {
  char *base = getenv("TMPDIR");
  snprintf(tmp, sizeof(tmp), "%s/tpl-daemon.XXXXXX", base ? base : "/tmp");
  if (mkdtemp(tmp) == NULL) return 1;
  snprintf(sockdir, sizeof(sockdir), "%s/sock", tmp);
  snprintf(sock, sizeof(sock), "%s/rank0.sock", sockdir);
  snprintf(ready, sizeof(ready), "%s/ready.json", tmp);
  signal(SIGPIPE, SIG_IGN);
  build_store();
  build_report();
  RUN(test_start_and_ready_file);
  RUN(test_health);
  RUN(test_status_job_table);
  RUN(test_attach_lookup_every_tensor);
  RUN(test_status_report_bytes);
  RUN(test_status_summary);
  RUN(test_attach_table_memfd);
  RUN(test_status_counters);
  RUN(test_status_command);
  RUN(test_status_command_tensors);
  RUN(test_dump_command);
  RUN(test_dump_needs_out);
  RUN(test_rank1_refers_to_rank0);
  RUN(test_pipelined_requests);
  RUN(test_random_bytes);
  RUN(test_four_gib_length);
  RUN(test_malformed_protobuf);
  RUN(test_unknown_kind_keeps_connection);
  RUN(test_truncated_frame_times_out);
  RUN(test_one_byte_per_write);
  RUN(test_300_connections);
  RUN(test_other_uid_refused);
  RUN(test_live_socket_refused);
  RUN(test_open_dir_refused);
  RUN(test_shutdown_request);
  RUN(test_stale_socket_replaced);
  RUN(test_sigterm);
  RUN(test_job_shutdown_poll);
  if (child > 0) {
    kill(child, SIGKILL);
    waitpid(child, NULL, 0);
  }
  tpl__store_free(&store);
  free(report);
  free(job_table);
  {
    char cmd[400];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmp);
    if (system(cmd) != 0) printf("# could not remove %s\n", tmp);
  }
  return tap_done();
}
