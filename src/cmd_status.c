/* cmd_status.c - `tpload status SOCKET [--json] [--health] [--shutdown]`:
 * asks a running daemon for the job's load report and prints it as a
 * table or as JSON, probes it quietly (--health), or asks rank 0 to end
 * the job (--shutdown).  The table asks for the report's summary (no
 * per-tensor facts: a few hundred bytes instead of megabytes at 20,000
 * tensors) unless --tensors wants them; --json asks for the whole report
 * (with the job table its per-tensor arrays index) unless --summary.  The
 * job-wide requests are answered by rank 0; given another rank's socket, the
 * command asks rank0.sock in the same directory instead. */
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "client.h"
#include "common.h"
#include "dtype.h"
#include "jsonu.h"
#include "report.h"

static const char status_help[] =
    "usage: tpload status SOCKET [--tensors | --json [--summary] | --health |\n"
    "                             --shutdown]\n"
    "\n"
    "Queries a running `tpload serve` through one rank's socket\n"
    "(DIR/rank{R}.sock).  By default prints rank 0's uptime, clients\n"
    "connected and attaches served, a line per rank it has heard no\n"
    "heartbeat from for half the job's stall deadline (\"rank R (host H):\n"
    "no heartbeat for S s of the T s deadline\": the job ends at the\n"
    "deadline unless it beats again), the generation served, then its load\n"
    "report: each rank's host, tensors, bytes and timings.\n"
    "Job-wide requests go to rank 0 (rank0.sock next to SOCKET).\n"
    "\n"
    "  --tensors    also every tensor's checksum per rank\n"
    "  --json       print the load report as JSON (as `tpload load --json`)\n"
    "               with \"daemon\": uptime_seconds, clients_connected,\n"
    "               attaches_served, generation (1 for the first load, one\n"
    "               more per reload), plan, stall_timeout_seconds,\n"
    "               silent_ranks: [{rank, host, seconds_silent}]; while a\n"
    "               reload runs, reload: model, store_bytes (rank 0's new\n"
    "               store, 0 until the model is validated),\n"
    "               current_store_bytes; and\n"
    "               \"params\": every tensor as shard-info.json has it,\n"
    "               its holders' nbytes and xxh3 under \"ranks\"\n"
    "  --summary    with --json: without \"params\"\n"
    "  --health     print nothing; exit 0 when the rank serves and hears\n"
    "               every other rank, 69 if not (no answer, or a rank\n"
    "               silent for half the job's stall deadline)\n"
    "  --shutdown   ask rank 0 to stop every rank of the job\n"
    "  --daemon-uid UID  the uid the daemon must run as (default: yours,\n"
    "               or TPLOAD_DAEMON_UID); its socket directory must be\n"
    "               private to that uid\n"
    "  --help       show this help\n"
    "\n"
    "Exit codes: 0 ok, 64 usage, 69 daemon unreachable or refusing,\n"
    "70 internal error.\n";

static int refused(const char *path, const struct tpl__wire_response *r) {
  char safe[TPL_SAFE_LEN(256)];
  fprintf(stderr, "tpload: %s: daemon refused: %s\n", path,
          tpl__cli_safe(r->error ? r->error : "no reason given", safe,
                        sizeof(safe)));
  return 69;
}

/* Sends a job-wide request; a rank other than 0 refers us to rank 0.
 * Returns 0 for an accepted request, else the exit code after saying
 * why.  The caller frees *resp either way. */
static int job_request(const char *path, int kind, unsigned flags,
                       struct tpl__wire_response *resp) {
  struct tpl__client_req q = {kind, flags, NULL, TPL_CLIENT_TIMEOUT_MS,
                              TPL_CLIENT_TIMEOUT_MS};
  struct tpl__error err = {0};
  int rc = tpl__client_job_call(path, &q, resp, &err);
  if (rc != 0) return tpl__cli_report(rc, &err);
  return resp->ok ? 0 : refused(path, resp);
}

static int run_health(const char *path) {
  struct tpl__wire_response r = {0};
  int rc = tpl__client_request_flags(path, TPL_REQ_HEALTH, 0,
                                     TPL_CLIENT_TIMEOUT_MS, &r, NULL);
  int ok = rc == 0 && r.ok;
  tpl__wire_response_free(&r);
  return ok ? 0 : 69;
}

static int run_shutdown(const char *path) {
  struct tpl__wire_response r = {0};
  int rc = job_request(path, TPL_REQ_SHUTDOWN, 0, &r);
  if (rc == 0) printf("shutdown requested: %u rank(s) stopping\n", r.world);
  tpl__wire_response_free(&r);
  return rc;
}

/* ---- the table, printed from the decoded report ---- */

static void print_ranks(const struct tpl__report *rep) {
  printf("%4s  %-20s %8s %8s %14s %8s %10s %13s  %s\n", "RANK", "HOST", "PID",
         "TENSORS", "BYTES", "SECONDS", "PEAK MiB", "CPU user/sys",
         "read/pack/send/receive/scale s");
  for (uint32_t k = 0; k < rep->grid.world; k++) {
    const struct tpl__rank_report *r = &rep->ranks[k];
    const struct tpl__phase_times *ph = &r->times;
    char host[TPL_SAFE_LEN(64)];
    printf("%4u  %-20s %8d %8u %14llu %8.3f %10.1f %6.2f/%-6.2f  "
           "%.3f/%.3f/%.3f/%.3f/%.3f\n",
           r->rank, tpl__cli_safe(r->host, host, sizeof(host)), r->pid,
           r->tensor_count, (unsigned long long)r->bytes, r->seconds,
           (double)r->peak_rss / 1048576.0, r->cpu_user, r->cpu_sys, ph->read,
           ph->pack, ph->send, ph->receive, ph->scale);
  }
}

/* One line per tensor: name, dtype, shape held, checksum on each rank
 * ("-" where another stage holds it). */
static void print_tensors(const struct tpl__report *rep,
                          const struct tpl__job *job) {
  char shape[256], name[TPL_SAFE_LEN(TPL_MAX_NAME)];
  printf("\n%-56s %-9s %-20s %s\n", "TENSOR", "DTYPE", "SHAPE (per rank)",
         "XXH3 rank 0..N-1");
  for (size_t i = 0; i < job->ntensors; i++) {
    const struct tpl__job_tensor *t = &job->tensors[i];
    tpl__shape_str_compact(t->rank_shape, t->ndim, shape, sizeof(shape));
    printf("%-56s %-9s %-20s", tpl__cli_safe(t->name, name, sizeof(name)),
           tpl__dtype_mlc_name(t->dtype), shape);
    for (uint32_t r = 0; r < rep->grid.world; r++)
      if (tpl__job_holds(job, i, r))
        printf(" %016llx",
               (unsigned long long)rep->infos[i * rep->grid.world + r].xxh3);
      else
        printf(" -");
    printf("\n");
  }
}

/* A line per rank serve's watch has not heard from for half the
 * deadline: lost at the deadline unless it beats again. */
static void print_silent(const struct tpl__wire_response *d) {
  char line[320], safe[TPL_SAFE_LEN(320)];
  for (size_t i = 0; i < d->nsilent; i++) {
    tpl__wire_silent_str(&d->silent[i], d->stall_timeout, line, sizeof(line));
    printf("%s\n", tpl__cli_safe(line, safe, sizeof(safe)));
  }
}

/* The daemon's counters, then the load report as a table. */
static void print_table(const struct tpl__wire_response *d,
                        const struct tpl__report *rep,
                        const struct tpl__job *job) {
  double gib = (double)rep->bytes_delivered / 1073741824.0;
  char model[TPL_SAFE_LEN(4096)], plan[TPL_SAFE_LEN(4096)], grid[256];
  printf("daemon: up %.3f s, %u client(s) connected, %llu attach(es) "
         "served\n",
         d->uptime_seconds, d->clients, (unsigned long long)d->attaches);
  print_silent(d);
  printf("model: %s\n", tpl__cli_safe(rep->model, model, sizeof(model)));
  printf("generation: %llu (plan %s)\n", (unsigned long long)d->generation,
         tpl__cli_safe(d->plan ? d->plan : "", plan, sizeof(plan)));
  if (d->reload_model != NULL)
    printf("reload running: %s (new store %llu bytes beside %llu)\n",
           tpl__cli_safe(d->reload_model, plan, sizeof(plan)),
           (unsigned long long)d->reload_store_bytes,
           (unsigned long long)d->store_bytes);
  printf("tensor parallel shards: %u, bias scaling: %s (bias policy %s)\n",
         rep->grid.tp, rep->bias_scaling ? "on" : "off",
         tpl__bias_family_name(rep->bias_family));
  /* The daemon serves only after its load found the replicas agreeing. */
  tpl__report_grid_line(rep, grid, sizeof(grid));
  printf("%s\n", grid);
  printf("loaded %llu bytes (read %llu) in %.3f s, %.2f GiB/s\n\n",
         (unsigned long long)rep->bytes_delivered,
         (unsigned long long)rep->bytes_read, rep->seconds,
         rep->seconds > 0 ? gib / rep->seconds : 0.0);
  print_ranks(rep);
  if (job != NULL) print_tensors(rep, job);
}

static double ms_round(double seconds) {
  return round(seconds * 1000.0) / 1000.0;
}

/* The watch's silent ranks as "silent_ranks": [{rank, host,
 * seconds_silent}] (empty when every rank beats). */
static json_t *silent_json(const struct tpl__wire_response *r) {
  json_t *a = json_array();
  for (size_t i = 0; a != NULL && i < r->nsilent; i++) {
    const struct tpl__wire_silent *p = &r->silent[i];
    json_array_append_new(a, json_pack("{s:I, s:s, s:f}", "rank",
                                       (json_int_t)p->rank, "host",
                                       p->host ? p->host : "", "seconds_silent",
                                       ms_round(p->seconds)));
  }
  return a;
}

/* The daemon's own counters (rank 0's), as "daemon" in the JSON form;
 * uptime rounded to milliseconds; the generation served and its plan
 * (the report's "model" is that generation's); the watch's deadline and
 * the ranks it has not heard from for half of it. */
static json_t *daemon_json(const struct tpl__wire_response *r) {
  json_t *d = json_pack("{s:f, s:I, s:I, s:I, s:s, s:f, s:o}", "uptime_seconds",
                        ms_round(r->uptime_seconds), "clients_connected",
                        (json_int_t)r->clients, "attaches_served",
                        (json_int_t)r->attaches, "generation",
                        (json_int_t)r->generation, "plan",
                        r->plan ? r->plan : "", "stall_timeout_seconds",
                        r->stall_timeout, "silent_ranks", silent_json(r));
  if (d != NULL && r->reload_model != NULL) /* a reload runs */
    json_object_set_new(
        d, "reload",
        json_pack("{s:s, s:I, s:I}", "model", r->reload_model, "store_bytes",
                  (json_int_t)r->reload_store_bytes, "current_store_bytes",
                  (json_int_t)r->store_bytes));
  return d;
}

static int print_json(const struct tpl__wire_response *d,
                      const struct tpl__report *rep,
                      const struct tpl__job *job) {
  json_t *o = tpl__report_json(rep, job);
  if (o == NULL) return -ENOMEM;
  json_object_set_new(o, "daemon", daemon_json(d));
  json_dumpf(o, stdout, TPL_JSON_REPORT);
  fputc('\n', stdout);
  json_decref(o);
  return 0;
}

/* The report, and with `tensors` the job table its arrays index. */
static int decode_status(const char *path, const struct tpl__wire_response *r,
                         int tensors, struct tpl__report **rep,
                         struct tpl__job **job) {
  struct tpl__error err = {0};
  int rc = tpl__report_decode(r->status, r->status_len, rep, &err);
  if (rc == 0 && tensors && r->job == NULL)
    rc = tpl__fail(&err, TPL_EPEER, "the reply has no job table");
  if (rc == 0 && tensors) rc = tpl__job_unpack(r->job, r->job_len, job, &err);
  if (rc == 0 && tensors && (*rep)->ntensors != (*job)->ntensors)
    rc = tpl__fail(&err, TPL_EPEER, "report of %zu tensors, job of %zu",
                   (*rep)->ntensors, (*job)->ntensors);
  if (rc == 0) return 0;
  fprintf(stderr, "tpload: %s: the daemon's load report does not decode: %s\n",
          path, err.msg);
  return 69;
}

/* `tensors`: the report with every tensor's facts and the job table. */
static int run_status(const char *path, int json, int tensors) {
  struct tpl__wire_response r = {0};
  struct tpl__report *rep = NULL;
  struct tpl__job *job = NULL;
  int rc =
      job_request(path, TPL_REQ_STATUS, tensors ? 0 : TPL_REQ_F_SUMMARY, &r);
  if (rc == 0 && r.status == NULL) rc = refused(path, &r);
  if (rc == 0) rc = decode_status(path, &r, tensors, &rep, &job);
  if (rc == 0 && json && print_json(&r, rep, job) != 0)
    rc = tpl__cli_report(-ENOMEM, NULL);
  else if (rc == 0 && !json)
    print_table(&r, rep, job);
  tpl__job_free(job);
  tpl__report_free(rep);
  tpl__wire_response_free(&r);
  return rc;
}

#define STATUS_OPTIONS(X)                                                      \
  X(OPT_JSON, "json", TPL_CLI_FLAG)                                            \
  X(OPT_HEALTH, "health", TPL_CLI_FLAG)                                        \
  X(OPT_SHUTDOWN, "shutdown", TPL_CLI_FLAG)                                    \
  X(OPT_DAEMON_UID, "daemon-uid", TPL_CLI_VALUE)                               \
  X(OPT_TENSORS, "tensors", TPL_CLI_FLAG)                                      \
  X(OPT_SUMMARY, "summary", TPL_CLI_FLAG)

enum { STATUS_OPTIONS(TPL_CLI_OPTION_ID) };

static const struct tpl__cli_option status_options[] = {
    STATUS_OPTIONS(TPL_CLI_OPTION_ENTRY)};

static int run(const struct tpl__cli_command *cmd,
               const struct tpl__cli_args *a) {
  const char *path = a->operands[0];
  int json;
  if (a->count[OPT_JSON] + a->count[OPT_HEALTH] + a->count[OPT_SHUTDOWN] > 1)
    return tpl__cli_usage_error(cmd, "--json, --health and --shutdown "
                                     "exclude each other");
  if (a->count[OPT_SUMMARY] + a->count[OPT_TENSORS] > 0 &&
      a->count[OPT_HEALTH] + a->count[OPT_SHUTDOWN] > 0)
    return tpl__cli_usage_error(cmd, "--tensors and --summary go with the "
                                     "report, not --health or --shutdown");
  if (tpl__cli_has(a, OPT_SUMMARY) &&
      (!tpl__cli_has(a, OPT_JSON) || tpl__cli_has(a, OPT_TENSORS)))
    return tpl__cli_usage_error(cmd, "--summary goes with --json, without "
                                     "--tensors");
  if (tpl__cli_daemon_uid(cmd, a->value[OPT_DAEMON_UID]) != 0) return 64;
  if (tpl__cli_has(a, OPT_HEALTH)) return run_health(path);
  if (tpl__cli_has(a, OPT_SHUTDOWN)) return run_shutdown(path);
  json = tpl__cli_has(a, OPT_JSON);
  return run_status(path, json,
                    tpl__cli_has(a, OPT_TENSORS) ||
                        (json && !tpl__cli_has(a, OPT_SUMMARY)));
}

const struct tpl__cli_command tpl__cmd_status = {
    .name = "status",
    .summary = "query a running daemon",
    .options = status_options,
    .noptions = ARRAY_SIZE(status_options),
    .min_operands = 1,
    .max_operands = 1,
    .operands_error = "expected one SOCKET argument",
    .help = status_help,
    .exec = run,
};
