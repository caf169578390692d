/* cmd_load.c - `tpload load|preshard|serve MODEL`: the MPI commands.
 * Parses the command line, picks the sink (preshard.c, serve.c, or none
 * for load), runs the engine, and on rank 0 shows progress, the one-line
 * summary and (--json) the LoadReport. */
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "engine.h"
#include "log.h"
#include "preshard.h"
#include "report.h"
#include "serve.h"
#include "stall.h"
#include "store.h"

static const char load_help[] =
    "usage: mpirun -np N tpload load MODEL [options]\n"
    "       mpirun -np N tpload preshard MODEL --out DIR [options]\n"
    "       mpirun -np N tpload serve MODEL --socket-dir DIR [options]\n"
    "\n"
    "Rank 0 reads MODEL once, cuts every tensor into N shards as the plan\n"
    "says (MLC LLM's ShardSingleDim) and delivers each rank its slice.\n"
    "  load      deliver, print the job's report, exit\n"
    "  preshard  then every rank writes DIR/rank{R}.safetensors and rank 0\n"
    "            writes DIR/shard-info.json last\n"
    "  serve     then every rank serves its shard on DIR/rank{R}.sock until\n"
    "            `tpload status SOCK --shutdown`, SIGTERM or SIGINT\n"
    "\n"
    "options:\n"
    "  --plan P            plan file, preset name or auto (default auto)\n"
    "  --no-bias-scaling   deliver scale_bias tensors unscaled\n"
    "  --chunk-mib M       rank 0's streaming window in MiB (default 64)\n"
    "  --json              print the LoadReport as JSON on stdout\n"
    "  --quiet             no progress and no summary\n"
    "  --progress[=W]      the progress bar: auto (default: when stderr,\n"
    "                      or the stderr of the mpirun/srun that started\n"
    "                      rank 0, is a terminal), always (plain\n"
    "                      --progress) or never (no progress at all)\n"
    "  --stall-timeout S   end the job (69) when a rank sees no progress\n"
    "                      for S seconds, naming the rank it waited for\n"
    "                      (default 300; 0 waits forever)\n"
    "  --out DIR           preshard: output directory\n"
    "  --force             preshard: replace existing output\n"
    "  --socket-dir DIR    serve: directory for rank{R}.sock (mode 0700)\n"
    "  --ready-file F      serve: written once every rank is serving\n"
    "  --hugetlb W         serve: shard store in hugetlb pages: auto (when\n"
    "                      vm.nr_hugepages reserves enough), on or off\n"
    "  --log-level L       serve: quiet, info (default: start, ready, client\n"
    "                      attach/detach with pid, shutdown on stderr) or\n"
    "                      debug (also one line per request)\n"
    "\n"
    "Exit codes: 0 ok, 64 usage, 65 invalid model or plan, 66 model\n"
    "missing, 69 a rank or MPI failed, 73 cannot create output, 74 I/O\n"
    "error (disk full included).\n";

struct load_cli {
  struct tpl__load_opts o;
  const char *command;
  int json, quiet, bar, huge_set, log_set;
  int progress; /* enum progress_mode */
  double t0, last_line;
  unsigned long long chunk_mib;
  struct tpl__preshard_opts preshard; /* the sink's options (pick_sink) */
  struct tpl__serve_opts serve;
};

enum {
  OPT_PLAN = 256,
  OPT_NO_BIAS,
  OPT_CHUNK,
  OPT_JSON,
  OPT_QUIET,
  OPT_PROGRESS,
  OPT_OUT,
  OPT_FORCE,
  OPT_SOCKET_DIR,
  OPT_READY,
  OPT_HUGETLB,
  OPT_STALL,
  OPT_LOG_LEVEL,
  OPT_HELP
};

static const struct option load_opts[] = {
    {"plan", required_argument, NULL, OPT_PLAN},
    {"no-bias-scaling", no_argument, NULL, OPT_NO_BIAS},
    {"chunk-mib", required_argument, NULL, OPT_CHUNK},
    {"json", no_argument, NULL, OPT_JSON},
    {"quiet", no_argument, NULL, OPT_QUIET},
    {"progress", optional_argument, NULL, OPT_PROGRESS},
    {"out", required_argument, NULL, OPT_OUT},
    {"force", no_argument, NULL, OPT_FORCE},
    {"socket-dir", required_argument, NULL, OPT_SOCKET_DIR},
    {"ready-file", required_argument, NULL, OPT_READY},
    {"hugetlb", required_argument, NULL, OPT_HUGETLB},
    {"stall-timeout", required_argument, NULL, OPT_STALL},
    {"log-level", required_argument, NULL, OPT_LOG_LEVEL},
    {"help", no_argument, NULL, OPT_HELP},
    {NULL, 0, NULL, 0}};

/* Before MPI is up, only the launcher's rank variable tells rank 0. */
static int env_rank_is_zero(void) {
  const char *vars[] = {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "SLURM_PROCID"};
  for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++) {
    const char *v = getenv(vars[i]);
    if (v != NULL) return strcmp(v, "0") == 0;
  }
  return 1;
}

static int usage(struct load_cli *c, const char *fmt, const char *arg) {
  if (!env_rank_is_zero()) return 64;
  return tpl__cli_usage_error(c->command, fmt, arg);
}

enum progress_mode { PROGRESS_AUTO, PROGRESS_ALWAYS, PROGRESS_NEVER };

/* --progress[=auto|always|never]; a bare --progress means always. */
static int parse_progress(const char *arg, int *mode) {
  if (arg == NULL || strcmp(arg, "always") == 0)
    *mode = PROGRESS_ALWAYS;
  else if (strcmp(arg, "auto") == 0)
    *mode = PROGRESS_AUTO;
  else if (strcmp(arg, "never") == 0)
    *mode = PROGRESS_NEVER;
  else
    return -1;
  return 0;
}

/* Under mpirun (or srun) rank 0's stderr is a pipe to the launcher, which
 * forwards it to its own stderr.  When the launcher is our parent (ranks
 * on the launching node: Open MPI's mpirun/prterun start them directly),
 * its stderr is what the user sees: a terminal there is an honest reason
 * for the bar.  Opened without becoming our controlling terminal; a
 * remote daemon's stderr is not a terminal, so that case stays off. */
static int launcher_stderr_is_tty(void) {
  char path[64];
  int fd, tty;
  snprintf(path, sizeof(path), "/proc/%ld/fd/2", (long)getppid());
  fd = open(path, O_WRONLY | O_NOCTTY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return 0;
  tty = isatty(fd);
  close(fd);
  return tty;
}

/* Whether rank 0 draws the bar (else a line every 5 s). */
static int want_bar(int mode) {
  if (mode != PROGRESS_AUTO) return mode == PROGRESS_ALWAYS;
  return isatty(STDERR_FILENO) || launcher_stderr_is_tty();
}

static int parse_option(struct load_cli *c, int opt, const char *arg) {
  switch (opt) {
  case OPT_PLAN:
    c->o.plan = arg;
    return 0;
  case OPT_NO_BIAS:
    c->o.bias_scaling = 0;
    return 0;
  case OPT_JSON:
    c->json = 1;
    return 0;
  case OPT_QUIET:
    c->quiet = 1;
    return 0;
  case OPT_PROGRESS:
    if (parse_progress(arg, &c->progress) != 0)
      return usage(c, "--progress expects auto, always or never, got '%s'",
                   arg);
    return 0;
  case OPT_OUT:
    c->o.out_dir = arg;
    return 0;
  case OPT_FORCE:
    c->o.force = 1;
    return 0;
  case OPT_SOCKET_DIR:
    c->o.socket_dir = arg;
    return 0;
  case OPT_READY:
    c->o.ready_file = arg;
    return 0;
  case OPT_HUGETLB:
    if (strcmp(arg, "auto") == 0)
      c->o.huge = TPL_HUGE_AUTO;
    else if (strcmp(arg, "on") == 0)
      c->o.huge = TPL_HUGE_HUGETLB;
    else if (strcmp(arg, "off") == 0)
      c->o.huge = TPL_HUGE_OFF;
    else
      return usage(c, "--hugetlb expects auto, on or off, got '%s'", arg);
    c->huge_set = 1;
    return 0;
  case OPT_STALL: {
    unsigned long long s;
    if (tpl__cli_parse_uint(arg, 86400 * 365, &s) != 0)
      return usage(c,
                   "--stall-timeout expects seconds (0 disables), got "
                   "'%s'",
                   arg);
    c->o.stall_timeout = (double)s;
    return 0;
  }
  case OPT_LOG_LEVEL:
    if (tpl__log_level_parse(arg, &c->o.log_level) != 0)
      return usage(c, "--log-level expects quiet, info or debug, got '%s'",
                   arg);
    c->log_set = 1;
    return 0;
  case OPT_CHUNK:
    if (tpl__cli_parse_uint(arg, 4096, &c->chunk_mib) != 0 || c->chunk_mib == 0)
      return usage(c, "--chunk-mib expects 1..4096, got '%s'", arg);
    return 0;
  default:
    return usage(c, "unknown option '%s'", arg);
  }
}

static int check_sink_options(struct load_cli *c) {
  int preshard = c->o.sink == TPL_SINK_PRESHARD;
  int serve = c->o.sink == TPL_SINK_SERVE;
  if (preshard && c->o.out_dir == NULL)
    return usage(c, "%s needs --out DIR", "preshard");
  if (!preshard && (c->o.out_dir || c->o.force))
    return usage(c, "%s: --out and --force are for preshard", c->command);
  if (serve && c->o.socket_dir == NULL)
    return usage(c, "%s needs --socket-dir DIR", "serve");
  if (!serve &&
      (c->o.socket_dir || c->o.ready_file || c->huge_set || c->log_set))
    return usage(c,
                 "%s: --socket-dir, --ready-file, --hugetlb and --log-level "
                 "are for serve",
                 c->command);
  return 0;
}

static int parse_args(struct load_cli *c, int argc, char **argv) {
  int opt, rc;
  optind = 1;
  opterr = 0;
  while ((opt = getopt_long(argc, argv, "", load_opts, NULL)) != -1) {
    if (opt == OPT_HELP) {
      if (env_rank_is_zero()) fputs(load_help, stdout);
      return -1;
    }
    rc = parse_option(c, opt, opt == '?' ? argv[optind - 1] : optarg);
    if (rc != 0) return rc;
  }
  if (optind != argc - 1) return usage(c, "expected one MODEL%s", "");
  c->o.model = argv[optind];
  c->o.chunk_bytes = c->chunk_mib << 20;
  return check_sink_options(c);
}

/* The sink dispatch: the command's sink and its options. */
static void pick_sink(struct load_cli *c) {
  if (c->o.sink == TPL_SINK_PRESHARD) {
    c->preshard.dir = c->o.out_dir;
    c->preshard.force = c->o.force;
    c->o.steps = tpl__preshard_sink(&c->preshard);
  } else if (c->o.sink == TPL_SINK_SERVE) {
    c->serve.socket_dir = c->o.socket_dir;
    c->serve.ready_file = c->o.ready_file;
    c->serve.log_level = c->o.log_level;
    c->o.steps = tpl__serve_sink(&c->serve);
  }
}

static void show_progress(void *ctx, uint64_t done, uint64_t total) {
  struct load_cli *c = ctx;
  double t = tpl__now(), el = t - c->t0, rate = el > 0 ? (double)done / el : 0;
  double eta = rate > 0 ? (double)(total - done) / rate : 0;
  int width = 30, fill = total ? (int)((double)width * done / total) : width;
  if (c->quiet || c->progress == PROGRESS_NEVER) return;
  if (c->bar) {
    fprintf(stderr, "\r[%.*s%*s] %6.2f/%.2f GiB %6.2f GiB/s ETA %4.0fs", fill,
            "==============================", width - fill, "",
            done / 1073741824.0, total / 1073741824.0, rate / 1073741824.0,
            eta);
    if (done >= total) fputc('\n', stderr);
  } else if (t - c->last_line >= 5.0 && done < total) {
    fprintf(stderr, "tpload %s: %.2f/%.2f GiB, %.2f GiB/s, ETA %.0f s\n",
            c->command, done / 1073741824.0, total / 1073741824.0,
            rate / 1073741824.0, eta);
    c->last_line = t;
  }
}

static void print_summary(struct load_cli *c, json_t *r) {
  double secs = json_real_value(json_object_get(r, "seconds"));
  double bytes =
      (double)json_integer_value(json_object_get(r, "bytes_delivered"));
  json_t *r0 = json_array_get(json_object_get(r, "ranks"), 0);
  double rss =
      (double)json_integer_value(json_object_get(r0, "peak_rss_bytes"));
  fprintf(stderr,
          "tpload %s: %.3f GiB delivered to %zu ranks in %.3f s "
          "(%.2f GiB/s), rank 0 peak memory %.0f MiB\n",
          c->command, bytes / 1073741824.0,
          json_array_size(json_object_get(r, "ranks")), secs,
          secs > 0 ? bytes / 1073741824.0 / secs : 0.0, rss / 1048576.0);
}

static void on_report(void *ctx, const uint8_t *packed, size_t len) {
  struct load_cli *c = ctx;
  json_t *r = tpl__report_json(packed, len, 0);
  if (r == NULL) return;
  if (c->json) {
    json_dumpf(r, stdout, JSON_INDENT(1) | JSON_PRESERVE_ORDER);
    fputc('\n', stdout);
    fflush(stdout);
  }
  if (!c->quiet) print_summary(c, r);
  json_decref(r);
}

/* One message per failure: rank 0 says why (or that another rank failed);
 * another rank speaks only when the failure was its own. */
static void report_failure(int rc, const struct tpl_error *err, uint32_t rank) {
  char safe[TPL_SAFE_LEN(sizeof(err->msg))];
  if (rank == 0 && err->msg[0] != '\0')
    tpl__cli_report(rc, err);
  else if (rank == 0)
    fprintf(stderr, "tpload: another rank failed (%s); see its message\n",
            tpl_strerror(rc));
  else if (err->msg[0] != '\0')
    fprintf(stderr, "tpload: rank %u: %s\n", rank,
            tpl__cli_safe(err->msg, safe, sizeof(safe)));
}

int tpl__cmd_load(int argc, char **argv) {
  struct load_cli c = {0};
  struct tpl_error err = {0};
  uint32_t rank = 0, world = 1;
  int rc;
  c.command = argv[0];
  c.o.sink = strcmp(argv[0], "preshard") == 0 ? TPL_SINK_PRESHARD
             : strcmp(argv[0], "serve") == 0  ? TPL_SINK_SERVE
                                              : TPL_SINK_NONE;
  c.o.plan = "auto";
  c.o.bias_scaling = 1;
  c.o.stall_timeout = TPL_STALL_DEFAULT_S;
  c.o.log_level = TPL_LOG_INFO;
  c.chunk_mib = 64;
  rc = parse_args(&c, argc, argv);
  if (rc != 0) return rc < 0 ? 0 : rc;
  pick_sink(&c);
  rc = tpl__engine_init(&argc, &argv, &rank, &world, &err);
  if (rc != 0) return tpl__cli_report(rc, &err);
  c.bar = want_bar(c.progress);
  c.t0 = tpl__now();
  c.last_line = c.t0;
  if (rank == 0) {
    c.o.progress = show_progress;
    c.o.report = on_report;
    c.o.ctx = &c;
  }
  rc = tpl__engine_run(&c.o, &err);
  if (rc != 0) report_failure(rc, &err, rank);
  if (rc == 0 && rank == 0 && !c.quiet && c.o.sink == TPL_SINK_PRESHARD)
    fprintf(stderr,
            "tpload preshard: wrote %u rank files and "
            "shard-info.json to %s\n",
            world, c.o.out_dir);
  /* Last: what a rank prints after MPI_Finalize may never reach mpirun. */
  if (tpl__engine_finalize(rc == 0 ? &err : NULL) != 0 && rc == 0) {
    rc = TPL_EPEER;
    report_failure(rc, &err, rank);
  }
  return tpl_exit_code(rc);
}
