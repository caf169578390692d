/* cmd_status.c - `tpload status SOCKET [--json] [--health] [--shutdown]`:
 * asks a running daemon for the job's load report and prints it as a
 * table or as JSON, probes it quietly (--health), or asks rank 0 to end
 * the job (--shutdown).  The table asks for the report's summary (no
 * per-tensor ShardInfos: a few hundred bytes instead of megabytes at
 * 20,000 tensors) unless --tensors wants them; --json asks for the whole
 * report unless --summary.  The job-wide requests are answered by rank 0;
 * given another rank's socket, the command asks rank0.sock in the same
 * directory instead. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "client.h"
#include "common.h"
#include "jsonu.h"
#include "report.h"

static const char status_help[] =
    "usage: tpload status SOCKET [--tensors | --json [--summary] | --health |\n"
    "                             --shutdown]\n"
    "\n"
    "Queries a running `tpload serve` through one rank's socket\n"
    "(DIR/rank{R}.sock).  By default prints rank 0's uptime, clients\n"
    "connected and attaches served, the generation served, then its load\n"
    "report: each rank's host, tensors, bytes and timings.\n"
    "Job-wide requests go to rank 0 (rank0.sock next to SOCKET).\n"
    "\n"
    "  --tensors    also every tensor's checksum per rank\n"
    "  --json       print the load report as JSON (as `tpload load --json`)\n"
    "               with \"daemon\": uptime_seconds, clients_connected,\n"
    "               attaches_served, generation (1 for the first load, one\n"
    "               more per reload), plan; while a reload runs, reload:\n"
    "               model, store_bytes (rank 0's new store, 0 until the\n"
    "               model is validated), current_store_bytes\n"
    "  --summary    with --json: without each rank's \"tensors\" list\n"
    "  --health     print nothing; exit 0 when the rank serves, 69 if not\n"
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

/* ---- the table, rendered from the report's JSON form ---- */

static double num(const json_t *o, const char *key) {
  return json_number_value(json_object_get(o, key));
}

static const char *str(const json_t *o, const char *key) {
  const char *s = json_string_value(json_object_get(o, key));
  return s ? s : "";
}

static void print_ranks(const json_t *ranks) {
  size_t i;
  const json_t *r;
  printf("%4s  %-20s %8s %8s %14s %8s %10s  %s\n", "RANK", "HOST", "PID",
         "TENSORS", "BYTES", "SECONDS", "PEAK MiB",
         "read/pack/send/receive/scale s");
  json_array_foreach(ranks, i, r) {
    const json_t *ph = json_object_get(r, "phases");
    printf("%4.0f  %-20s %8.0f %8.0f %14.0f %8.3f %10.1f  "
           "%.3f/%.3f/%.3f/%.3f/%.3f\n",
           num(r, "rank"), str(r, "host"), num(r, "pid"),
           num(r, "tensor_count"), num(r, "bytes"), num(r, "seconds"),
           num(r, "peak_rss_bytes") / 1048576.0, num(ph, "read"),
           num(ph, "pack"), num(ph, "send"), num(ph, "receive"),
           num(ph, "scale"));
  }
}

/* One line per tensor: name, dtype, shape held, checksum on each rank. */
static void print_tensors(const json_t *ranks) {
  const json_t *t0 = json_object_get(json_array_get(ranks, 0), "tensors");
  size_t i, r;
  const json_t *t, *rk;
  char shape[256], name[TPL_SAFE_LEN(TPL_MAX_NAME)];
  printf("\n%-56s %-9s %-20s %s\n", "TENSOR", "DTYPE", "SHAPE (per rank)",
         "XXH3 rank 0..N-1");
  json_array_foreach(t0, i, t) {
    /* a JSON integer array ("[4096,512]") as it stands */
    size_t n = json_dumpb(json_object_get(t, "shape"), shape, sizeof(shape) - 1,
                          JSON_COMPACT);
    shape[n < sizeof(shape) ? n : 0] = '\0';
    printf("%-56s %-9s %-20s",
           tpl__cli_safe(str(t, "name"), name, sizeof(name)), str(t, "dtype"),
           shape);
    json_array_foreach(ranks, r, rk) {
      const json_t *ti = json_array_get(json_object_get(rk, "tensors"), i);
      printf(" %s", ti ? str(ti, "xxh3") : "-");
    }
    printf("\n");
  }
}

/* The daemon's counters, then the load report as a table. */
static void print_table(const json_t *rep, int tensors) {
  const json_t *ranks = json_object_get(rep, "ranks");
  double secs = num(rep, "seconds"), bytes = num(rep, "bytes_delivered");
  const json_t *d = json_object_get(rep, "daemon");
  char model[TPL_SAFE_LEN(4096)], plan[TPL_SAFE_LEN(4096)], grid[256];
  printf("daemon: up %.3f s, %.0f client(s) connected, %.0f attach(es) "
         "served\n",
         num(d, "uptime_seconds"), num(d, "clients_connected"),
         num(d, "attaches_served"));
  printf("model: %s\n", tpl__cli_safe(str(rep, "model"), model, sizeof(model)));
  printf("generation: %.0f (plan %s)\n", num(d, "generation"),
         tpl__cli_safe(str(d, "plan"), plan, sizeof(plan)));
  if (json_object_get(d, "reload") != NULL) {
    const json_t *rl = json_object_get(d, "reload");
    printf("reload running: %s (new store %.0f bytes beside %.0f)\n",
           tpl__cli_safe(str(rl, "model"), plan, sizeof(plan)),
           num(rl, "store_bytes"), num(rl, "current_store_bytes"));
  }
  printf("tensor parallel shards: %.0f, bias scaling: %s\n",
         num(rep, "tensor_parallel_shards"),
         json_is_true(json_object_get(rep, "bias_scaling")) ? "on" : "off");
  /* The daemon serves only after its load found the replicas agreeing. */
  if (tpl__report_grid_line(rep, grid, sizeof(grid)) == 0) printf("%s\n", grid);
  printf("loaded %.0f bytes (read %.0f) in %.3f s, %.2f GiB/s\n\n", bytes,
         num(rep, "bytes_read"), secs,
         secs > 0 ? bytes / secs / 1073741824.0 : 0.0);
  print_ranks(ranks);
  if (tensors) print_tensors(ranks);
}

/* The daemon's own counters (rank 0's), as "daemon" in the JSON form;
 * uptime rounded to milliseconds; the generation served and its plan
 * (the report's "model" is that generation's). */
static json_t *daemon_json(const struct tpl__wire_response *r) {
  json_t *d = json_pack(
      "{s:f, s:I, s:I, s:I, s:s}", "uptime_seconds",
      round(r->uptime_seconds * 1000.0) / 1000.0, "clients_connected",
      (json_int_t)r->clients, "attaches_served", (json_int_t)r->attaches,
      "generation", (json_int_t)r->generation, "plan", r->plan ? r->plan : "");
  if (d != NULL && r->reload_model != NULL) /* a reload runs */
    json_object_set_new(
        d, "reload",
        json_pack("{s:s, s:I, s:I}", "model", r->reload_model, "store_bytes",
                  (json_int_t)r->reload_store_bytes, "current_store_bytes",
                  (json_int_t)r->store_bytes));
  return d;
}

/* A summary's ranks carry no tensors: their counts come beside it (an
 * older daemon sends the whole report, whose counts are right as they
 * are). */
static void set_tensor_counts(json_t *rep, const struct tpl__wire_response *r) {
  const json_t *ranks = json_object_get(rep, "ranks");
  for (size_t i = 0; i < r->ncounts && i < json_array_size(ranks); i++) {
    json_t *rank = json_array_get(ranks, i);
    json_object_set_new(rank, "tensor_count",
                        json_integer((json_int_t)r->tensor_counts[i]));
  }
}

/* `tensors`: the report with every rank's ShardInfos. */
static int run_status(const char *path, int json, int tensors) {
  struct tpl__wire_response r = {0};
  json_t *rep;
  int rc =
      job_request(path, TPL_REQ_STATUS, tensors ? 0 : TPL_REQ_F_SUMMARY, &r);
  if (rc == 0 && r.status == NULL) rc = refused(path, &r);
  if (rc != 0) {
    tpl__wire_response_free(&r);
    return rc;
  }
  rep = tpl__report_json(r.status, r.status_len, tensors);
  if (rep != NULL) json_object_set_new(rep, "daemon", daemon_json(&r));
  if (rep != NULL && !tensors) set_tensor_counts(rep, &r);
  tpl__wire_response_free(&r);
  if (rep == NULL) {
    fprintf(stderr, "tpload: %s: the daemon's load report does not decode\n",
            path);
    return 69;
  }
  if (json) {
    json_dumpf(rep, stdout, TPL_JSON_REPORT);
    fputc('\n', stdout);
  } else {
    print_table(rep, tensors);
  }
  json_decref(rep);
  return 0;
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
