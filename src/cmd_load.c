/* cmd_load.c - `tpload load|preshard|serve MODEL`: the MPI commands.
 * Parses the command line, picks the sink (preshard's --layout row,
 * layout.h; serve.c; or none for load), runs the engine, and on rank 0 shows
 * progress, the one-line summary and (--json) the LoadReport. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "cmd_grid.h"
#include "common.h"
#include "engine.h"
#include "jsonu.h"
#include "layout.h"
#include "local_read.h"
#include "log.h"
#include "report.h"
#include "serve.h"
#include "source.h"
#include "stall.h"
#include "store.h"

static const char load_help[] =
    "usage: mpirun -np N tpload load MODEL [options]\n"
    "       mpirun -np N tpload preshard MODEL --out DIR [options]\n"
    "       mpirun -np N tpload serve MODEL --socket-dir DIR [options]\n"
    "\n"
    "Rank 0 reads MODEL once, cuts every tensor into T shards as the plan\n"
    "says (MLC LLM's ShardSingleDim) and delivers each rank its slice.\n"
    "The N ranks are N / (T x P) replicas of T shards x P pipeline stages,\n"
    "rank = (replica x P + stage) x T + shard; each byte leaves rank 0\n"
    "once and is forwarded between the ranks that hold it.\n"
    "  load      deliver, print the job's report, exit\n"
    "  preshard  then every rank writes DIR/rank{R}.safetensors and rank 0\n"
    "            writes DIR/shard-info.json last (or, with --layout mlc,\n"
    "            the presharded tensor cache MLC LLM's runtime loads)\n"
    "  serve     then every rank serves its shard on DIR/rank{R}.sock until\n"
    "            `tpload status SOCK --shutdown`, SIGTERM, SIGINT, or\n"
    "            SIGHUP to any rank but 0; `tpload reload SOCK [MODEL]` or\n"
    "            SIGHUP to rank 0 loads the next version while serving,\n"
    "            then switches\n"
    "\n"
    "options:\n"
    "  --plan P            plan file, preset name or auto (default auto)\n"
    "  --tp T              tensor-parallel shards (default N / P)\n"
    "  --pp P              pipeline stages, layers split as MLC LLM does\n"
    "                      (default 1)\n"
    "  --ep                expert parallelism: every MoE layer's experts\n"
    "                      whole over the T ranks of a TP group (rank t a\n"
    "                      contiguous run of them, vLLM's map), each held\n"
    "                      by its owner only; every other tensor cut as\n"
    "                      without it (not with --layout mlc)\n"
    "  --ep-size E         --ep over E ranks: T (the default, each replica's\n"
    "                      TP group) or T x D (vLLM's ep_size = tp x dp:\n"
    "                      every replica's ranks at a stage, group rank\n"
    "                      d x T + t, each expert held once per stage)\n"
    "  --bias-policy F     row-parallel (scale_bias) biases as engine family\n"
    "                      F expects them: mlc (default) bias/N on every\n"
    "                      rank; vllm whole on every rank (RowParallelLinear\n"
    "                      adds it on tp rank 0), or on rank 0 only with\n"
    "                      zeros elsewhere where vLLM's loader does that\n"
    "                      (gpt-oss's expert down bias); whole: whole on\n"
    "                      every rank.  A plan rule's \"bias\" wins over\n"
    "                      mlc and vllm\n"
    "  --no-bias-scaling   --bias-policy whole\n"
    "  --skip-mtp          leave out the multi-token-prediction layers\n"
    "                      config.json declares (DeepSeek-V3's\n"
    "                      num_nextn_predict_layers): the main model only\n"
    "  --chunk-mib M       rank 0's streaming window in MiB (default 48)\n"
    "  --read R            who reads the files.  mpi: rank 0 reads, MPI\n"
    "                      delivers; local: every rank reads its own slices\n"
    "                      from the files itself (they must be the files\n"
    "                      rank 0 validated, same size and time; else 66 or\n"
    "                      65).  auto (default): local when every rank finds\n"
    "                      every file mostly in its node's page cache (a\n"
    "                      warm reload: nobody copies for another rank),\n"
    "                      else mpi, where one reader is best (a cold disk,\n"
    "                      a shared or slow filesystem, a URL)\n"
    "  --read-gap B        --read local from a URL: two pieces of a rank's\n"
    "                      slice at most B bytes apart are one GET, the\n"
    "                      bytes between fetched too (default 1024 for\n"
    "                      http(s) taking multi-range GETs, 8192 for one\n"
    "                      that refuses them, 262144 for s3:// and hf://,\n"
    "                      whose GETs are priced and rate-limited; 0: a\n"
    "                      GET a piece, the fewest bytes)\n"
    "  --io M              how the files are read: auto (default: a file\n"
    "                      mostly in the page cache buffered, any other\n"
    "                      direct), direct (O_DIRECT through io_uring, many\n"
    "                      large requests in flight; where the file system\n"
    "                      refuses it, buffered with a note) or buffered\n"
    "  --json              print the LoadReport as JSON on stdout (its\n"
    "                      quant: the model's quantization as plan says\n"
    "                      it, also in the summary)\n"
    "  --quiet             no progress and no summary\n"
    "  --progress[=W]      the progress bar: auto (default: when stderr,\n"
    "                      or the stderr of the mpirun/srun that started\n"
    "                      rank 0, is a terminal), always (plain\n"
    "                      --progress) or never (no progress at all)\n"
    "  --verify-md5        MODEL is an MLC weight directory (presharded\n"
    "                      by MLC too): before any\n"
    "                      byte moves, rank 0 reads every params_shard file\n"
    "                      whole and checks it against the md5sum its\n"
    "                      record in tensor-cache.json carries (65 naming\n"
    "                      the file when one differs or none is recorded;\n"
    "                      64 for another format); the report lists them\n"
    "  --stall-timeout S   end the job (69) when a rank sees no progress\n"
    "                      for S seconds, naming the rank it waited for\n"
    "                      (default 300; 0 waits forever)\n"
    "  --out DIR           preshard: output directory\n"
    "  --force             preshard: replace existing output\n"
    "  --layout L          preshard: rank (default: rank{R}.safetensors and\n"
    "                      shard-info.json) or mlc: MODEL must be an MLC\n"
    "                      weight directory; DIR becomes one that MLC LLM\n"
    "                      loads with MLC_INTERNAL_PRESHARD_NUM=T: records\n"
    "                      NAME_shard-K (worker K's cut, as MLC's shard\n"
    "                      functions give it) in params_shard_*.bin files\n"
    "                      of worker K's own, replicated params once under\n"
    "                      their names in shared files, the other files of\n"
    "                      MODEL copied, mlc-chat-config.json with\n"
    "                      tensor_parallel_shards T and\n"
    "                      pipeline_parallel_stages P, tensor-cache.json\n"
    "                      last.  Row-parallel biases are written whole:\n"
    "                      MLC's compiled model divides them itself, so\n"
    "                      --bias-policy mlc and whole both mean that and\n"
    "                      vllm is refused (64), as verify refuses it\n"
    "  --socket-dir DIR    serve: directory for rank{R}.sock (mode 0700)\n"
    "  --ready-file F      serve: written once every rank is serving\n"
    "  --hugetlb W         serve: shard store in hugetlb pages: auto (when\n"
    "                      vm.nr_hugepages reserves enough), on or off\n"
    "  --log-level L       serve: quiet, info (default: start, ready, client\n"
    "                      attach/detach with pid, shutdown on stderr) or\n"
    "                      debug (also one line per request)\n"
    "\n" TPL_CLI_HTTP_HELP
    "From a URL rank 0 fetches every byte once (--read mpi and auto); with\n"
    "--read local every rank fetches its own ranges (each needs the token:\n"
    "pass --token-file, or export TPLOAD_HTTP_TOKEN to the ranks, mpirun\n"
    "-x).\n"
    "\n"
    "Exit codes: 0 ok, 64 usage, 65 invalid model or plan (a file whose\n"
    "md5sum differs included), 66 model missing (HTTP 404 included), 69 a\n"
    "rank or MPI failed, or a server unreachable or failing after the\n"
    "retries, 73 cannot create output, 74 I/O error (disk full included; a\n"
    "remote object that changed), 77 access denied (HTTP 401/403).\n";

struct load_cli {
  struct tpl__load_opts o;
  const struct tpl__cli_command *cmd;
  int json, quiet, bar;
  int progress; /* enum progress_mode */
  double t0, last_line;
  int md5_done; /* --verify-md5's pass ended: the load's progress next */
  struct tpl__outdir_opts out;             /* preshard's sink's options */
  const struct tpl__output_layout *layout; /* preshard's --layout */
  struct tpl__serve_opts serve;
};

#define LOAD_OPTIONS(X)                                                        \
  X(OPT_PLAN, "plan", TPL_CLI_VALUE)                                           \
  X(OPT_TP, "tp", TPL_CLI_VALUE)                                               \
  X(OPT_PP, "pp", TPL_CLI_VALUE)                                               \
  X(OPT_EP, "ep", TPL_CLI_FLAG)                                                \
  X(OPT_EP_SIZE, "ep-size", TPL_CLI_VALUE)                                     \
  X(OPT_NO_BIAS, "no-bias-scaling", TPL_CLI_FLAG)                              \
  X(OPT_BIAS_POLICY, "bias-policy", TPL_CLI_VALUE)                             \
  X(OPT_SKIP_MTP, "skip-mtp", TPL_CLI_FLAG)                                    \
  X(OPT_CHUNK, "chunk-mib", TPL_CLI_VALUE)                                     \
  X(OPT_READ, "read", TPL_CLI_VALUE)                                           \
  X(OPT_READ_GAP, "read-gap", TPL_CLI_VALUE)                                   \
  X(OPT_IO, "io", TPL_CLI_VALUE)                                               \
  X(OPT_JSON, "json", TPL_CLI_FLAG)                                            \
  X(OPT_QUIET, "quiet", TPL_CLI_FLAG)                                          \
  X(OPT_PROGRESS, "progress", TPL_CLI_OPTIONAL)                                \
  X(OPT_OUT, "out", TPL_CLI_VALUE)                                             \
  X(OPT_FORCE, "force", TPL_CLI_FLAG)                                          \
  X(OPT_LAYOUT, "layout", TPL_CLI_VALUE)                                       \
  X(OPT_SOCKET_DIR, "socket-dir", TPL_CLI_VALUE)                               \
  X(OPT_READY, "ready-file", TPL_CLI_VALUE)                                    \
  X(OPT_HUGETLB, "hugetlb", TPL_CLI_VALUE)                                     \
  X(OPT_STALL, "stall-timeout", TPL_CLI_VALUE)                                 \
  X(OPT_LOG_LEVEL, "log-level", TPL_CLI_VALUE)                                 \
  X(OPT_VERIFY_MD5, "verify-md5", TPL_CLI_FLAG)                                \
  TPL_CLI_HTTP_OPTIONS(X)

enum { LOAD_OPTIONS(TPL_CLI_OPTION_ID) };

static const struct tpl__cli_option load_options[] = {
    LOAD_OPTIONS(TPL_CLI_OPTION_ENTRY)};
_Static_assert(ARRAY_SIZE(load_options) <= TPL_CLI_MAX_OPTIONS,
               "raise TPL_CLI_MAX_OPTIONS (cli.h)");

static int usage(struct load_cli *c, const char *fmt, const char *arg) {
  return tpl__cli_usage_error(c->cmd, fmt, arg);
}

enum progress_mode { PROGRESS_AUTO, PROGRESS_ALWAYS, PROGRESS_NEVER };

/* --progress[=W], --hugetlb W and --read R: W's index among the three `names`
 * (in the order of the option's enum) into *out; -1 when it is none of them. */
static int parse_keyword(const char *arg, const char *const names[3],
                         int *out) {
  for (int i = 0; i < 3; i++)
    if (strcmp(arg, names[i]) == 0) {
      *out = i;
      return 0;
    }
  return -1;
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

/* The options whose values need checking (64 when one is bad). */
static int parse_values(struct load_cli *c, const struct tpl__cli_args *a) {
  static const char *const progress[] = {[PROGRESS_AUTO] = "auto",
                                         [PROGRESS_ALWAYS] = "always",
                                         [PROGRESS_NEVER] = "never"};
  static const char *const huge[] = {[TPL_HUGE_AUTO] = "auto",
                                     [TPL_HUGE_HUGETLB] = "on",
                                     [TPL_HUGE_OFF] = "off"};
  const char *const *v = a->value;
  /* A 48 MiB window keeps rank 0 within 64 MiB beyond its shard at 4 ranks
   * with MPI's own buffers (bench: 72 -> 60 MiB; 64 and 48 load alike). */
  unsigned long long stall = TPL_STALL_DEFAULT_S, chunk_mib = 48, tp = 0,
                     pp = 0, ep = 0;
  /* a bare --progress means always */
  if (tpl__cli_has(a, OPT_PROGRESS) &&
      parse_keyword(v[OPT_PROGRESS] ? v[OPT_PROGRESS] : "always", progress,
                    &c->progress) != 0)
    return usage(c, "--progress expects auto, always or never, got '%s'",
                 v[OPT_PROGRESS]);
  if (v[OPT_HUGETLB] != NULL &&
      parse_keyword(v[OPT_HUGETLB], huge, &c->o.huge) != 0)
    return usage(c, "--hugetlb expects auto, on or off, got '%s'",
                 v[OPT_HUGETLB]);
  if (v[OPT_STALL] != NULL &&
      tpl__cli_parse_uint(v[OPT_STALL], 86400 * 365, &stall) != 0)
    return usage(c, "--stall-timeout expects seconds (0 disables), got '%s'",
                 v[OPT_STALL]);
  if (v[OPT_LOG_LEVEL] != NULL &&
      tpl__log_level_parse(v[OPT_LOG_LEVEL], &c->serve.log_level) != 0)
    return usage(c, "--log-level expects quiet, info or debug, got '%s'",
                 v[OPT_LOG_LEVEL]);
  if (v[OPT_IO] != NULL && tpl__io_mode_parse(v[OPT_IO], &c->o.io_mode) != 0)
    return usage(c, "--io expects auto, direct or buffered, got '%s'",
                 v[OPT_IO]);
  if (v[OPT_CHUNK] != NULL &&
      (tpl__cli_parse_uint(v[OPT_CHUNK], 4096, &chunk_mib) != 0 ||
       chunk_mib == 0))
    return usage(c, "--chunk-mib expects 1..4096, got '%s'", v[OPT_CHUNK]);
  if (v[OPT_TP] != NULL &&
      (tpl__cli_parse_uint(v[OPT_TP], UINT32_MAX, &tp) != 0 || tp == 0))
    return usage(c, "--tp expects a shard count >= 1, got '%s'", v[OPT_TP]);
  if (v[OPT_PP] != NULL &&
      (tpl__cli_parse_uint(v[OPT_PP], UINT32_MAX, &pp) != 0 || pp == 0))
    return usage(c, "--pp expects a stage count >= 1, got '%s'", v[OPT_PP]);
  c->o.tp = (uint32_t)tp;
  c->o.pp = (uint32_t)pp;
  if (v[OPT_EP_SIZE] != NULL &&
      (tpl__cli_parse_uint(v[OPT_EP_SIZE], UINT32_MAX, &ep) != 0 || ep == 0))
    return usage(c, "--ep-size expects a rank count >= 1, got '%s'",
                 v[OPT_EP_SIZE]);
  c->o.ep = tpl__cli_has(a, OPT_EP) || ep != 0;
  c->o.ep_size = (uint32_t)ep;
  c->o.stall_timeout = (double)stall;
  c->o.chunk_bytes = chunk_mib << 20;
  return 0;
}

static int check_sink_options(struct load_cli *c,
                              const struct tpl__cli_args *a) {
  int preshard = c->cmd == &tpl__cmd_preshard;
  int serve = c->cmd == &tpl__cmd_serve;
  if (preshard && c->out.dir == NULL)
    return usage(c, "%s needs --out DIR", "preshard");
  if (!preshard && (c->out.dir || c->out.force))
    return usage(c, "%s: --out and --force are for preshard", c->cmd->name);
  if (serve && c->serve.socket_dir == NULL)
    return usage(c, "%s needs --socket-dir DIR", "serve");
  if (!serve &&
      (c->serve.socket_dir || c->serve.ready_file ||
       tpl__cli_has(a, OPT_HUGETLB) || tpl__cli_has(a, OPT_LOG_LEVEL)))
    return usage(c,
                 "%s: --socket-dir, --ready-file, --hugetlb and --log-level "
                 "are for serve",
                 c->cmd->name);
  return 0;
}

/* --read R, its default TPLOAD_READ's (a site's choice, as a module file
 * sets it), else auto.  Rank 0's is the job's (tpl__eng_share_job). */
static int parse_read(struct load_cli *c, const char *v) {
  static const char *const reads[] = {[TPL_READ_AUTO] = "auto",
                                      [TPL_READ_MPI] = "mpi",
                                      [TPL_READ_LOCAL] = "local"};
  const char *env = getenv("TPLOAD_READ");
  c->o.read_mode = TPL_READ_AUTO;
  if (env != NULL && env[0] != '\0' &&
      parse_keyword(env, reads, &c->o.read_mode) != 0)
    return usage(c, "TPLOAD_READ expects auto, mpi or local, got '%s'", env);
  if (v != NULL && parse_keyword(v, reads, &c->o.read_mode) != 0)
    return usage(c, "--read expects auto, mpi or local, got '%s'", v);
  return 0;
}

/* --read-gap BYTES: only with --read local; else the origin's default. */
static int parse_read_gap(struct load_cli *c, const char *v) {
  unsigned long long gap = 0;
  c->o.read_gap = TPL_READ_GAP_AUTO;
  if (v == NULL) return 0;
  if (tpl__cli_parse_uint(v, (unsigned long long)1 << 30, &gap) != 0)
    return usage(c, "--read-gap expects bytes 0..1073741824, got '%s'", v);
  if (c->o.read_mode != TPL_READ_LOCAL)
    return usage(c, "%s: --read-gap is for --read local", c->cmd->name);
  c->o.read_gap = gap;
  return 0;
}

/* --layout L (preshard only): the row of the layout table (layout.h)
 * that names it and accepts this MODEL, grid and bias family; a layout
 * that writes its biases unscaled turns bias scaling off (its engine
 * scales them). */
static int parse_layout(struct load_cli *c, const struct tpl__cli_args *a) {
  const char *v = a->value[OPT_LAYOUT];
  struct tpl__layout_use use = {TPL_LAYOUT_WRITE, c->o.model, c->o.ep,
                                c->o.bias_family};
  struct tpl__error err = {0};
  if (v != NULL && c->cmd != &tpl__cmd_preshard)
    return usage(c, "%s: --layout is for preshard", c->cmd->name);
  if (c->cmd != &tpl__cmd_preshard) return 0;
  if (tpl__layout_parse(v, &use, &c->layout, &err) != 0)
    return usage(c, "%s", err.msg);
  if (c->layout->unscaled_bias) c->o.bias_family = TPL_BIASF_WHOLE;
  return 0;
}

static int parse_args(struct load_cli *c, const struct tpl__cli_args *a) {
  int rc;
  c->o.model = a->operands[0];
  if (tpl__cli_http(c->cmd, a, OPT_RETRIES, &c->o.http) != 0) return 64;
  c->o.plan = a->value[OPT_PLAN] ? a->value[OPT_PLAN] : "auto";
  if (tpl__cli_bias_family(c->cmd, a->value[OPT_BIAS_POLICY],
                           tpl__cli_has(a, OPT_NO_BIAS),
                           &c->o.bias_family) != 0)
    return 64;
  c->o.skip_mtp = tpl__cli_has(a, OPT_SKIP_MTP);
  c->out.dir = a->value[OPT_OUT];
  c->out.model = c->o.model;
  c->out.force = tpl__cli_has(a, OPT_FORCE);
  c->serve.socket_dir = a->value[OPT_SOCKET_DIR];
  c->serve.ready_file = a->value[OPT_READY];
  c->serve.model = c->o.model;
  c->serve.log_level = TPL_LOG_INFO;
  c->o.verify_md5 = tpl__cli_has(a, OPT_VERIFY_MD5);
  c->json = tpl__cli_has(a, OPT_JSON);
  c->quiet = tpl__cli_has(a, OPT_QUIET);
  rc = parse_values(c, a);
  if (rc == 0) rc = parse_read(c, a->value[OPT_READ]);
  if (rc == 0) rc = parse_read_gap(c, a->value[OPT_READ_GAP]);
  if (rc == 0) rc = check_sink_options(c, a);
  return rc != 0 ? rc : parse_layout(c, a);
}

/* Rank 0's progress of a step (`what`: "" for the load, else after the
 * amounts): amounts in the unit the total reaches, the rate in the one
 * it reaches (a slow filesystem's 2 MiB/s is not "0.00 GiB/s"). */
static void progress_line(struct load_cli *c, const char *what, uint64_t done,
                          uint64_t total) {
  double t = tpl__now(), el = t - c->t0, rate = el > 0 ? (double)done / el : 0;
  double eta = rate > 0 ? (double)(total - done) / rate : 0, scale;
  int width = 30, fill = total ? (int)((double)width * done / total) : width;
  const char *unit = tpl__cli_unit((double)total, &scale);
  char speed[32];
  if (c->quiet || c->progress == PROGRESS_NEVER) return;
  tpl__cli_rate(rate, speed, sizeof(speed));
  if (c->bar) {
    fprintf(stderr, "\r[%.*s%*s] %7.2f/%.2f %s %12s ETA %4.0fs%s", fill,
            "==============================", width - fill, "", done / scale,
            total / scale, unit, speed, eta, what);
    if (done >= total) fputc('\n', stderr);
  } else if (t - c->last_line >= 5.0 && done < total) {
    fprintf(stderr, "tpload %s: %.2f/%.2f %s%s, %s, ETA %.0f s\n", c->cmd->name,
            done / scale, total / scale, unit, what, speed, eta);
    c->last_line = t;
  }
}

/* The load's progress: the job's bytes, or rank 0's own reads when
 * every rank reads its own slices (the line says so). */
static void show_progress(void *ctx, uint64_t done, uint64_t total, int own) {
  struct load_cli *c = ctx;
  progress_line(c, own ? " (rank 0's share)" : "", done, total);
}

/* --verify-md5's pass before it: the bytes hashed; once all are, the
 * load's rate starts from there. */
static void show_md5_progress(void *ctx, uint64_t done, uint64_t total) {
  struct load_cli *c = ctx;
  if (c->md5_done) return;
  progress_line(c, " md5 checked", done, total);
  if (done >= total) {
    c->md5_done = 1;
    c->t0 = c->last_line = tpl__now();
  }
}

/* A presharded MODEL's biases held as bias / N come back within an ulp:
 * the load is not bit-exact, and says so. */
static void print_approximate(struct load_cli *c, const struct tpl__report *r) {
  if (r->approximate == 0) return;
  fprintf(stderr,
          "tpload %s: approximate: %u tensors, max error <= 1 ulp (biases "
          "the presharded MODEL holds as bias / N, rebuilt times N; "
          "preshard --no-bias-scaling keeps a directory exact)\n",
          c->cmd->name, r->approximate);
}

/* --verify-md5's pass: which files, how much, how fast. */
static void print_md5(struct load_cli *c, const struct tpl__report *r) {
  double gib = (double)r->md5_bytes / 1073741824.0;
  if (!r->has_md5) return;
  fprintf(stderr,
          "tpload %s: md5sum as the cache records: %zu files, %.3f GiB, "
          "checked in %.3f s (%.2f GiB/s) before the load\n",
          c->cmd->name, r->md5_nfiles, gib, r->md5_seconds,
          r->md5_seconds > 0 ? gib / r->md5_seconds : 0.0);
}

/* The totals, and the model's quantization when its config names one
 * (as `plan` says it). */
static void print_summary(struct load_cli *c, const struct tpl__report *r) {
  double gib = (double)r->bytes_delivered / 1073741824.0;
  char quant[128], safe[TPL_SAFE_LEN(128)];
  fprintf(stderr,
          "tpload %s: %.3f GiB delivered to %u ranks in %.3f s "
          "(%.2f GiB/s), rank 0 peak memory %.0f MiB\n",
          c->cmd->name, gib, r->grid.world, r->seconds,
          r->seconds > 0 ? gib / r->seconds : 0.0,
          (double)r->ranks[0].peak_rss / 1048576.0);
  if (tpl__quant_label(&r->quant, quant, sizeof(quant))[0] != '\0')
    fprintf(stderr, "tpload %s: quantization: %s\n", c->cmd->name,
            tpl__cli_safe(quant, safe, sizeof(safe)));
}

/* Who read the files: when every rank read its own slices, a line
 * saying so (and that --read auto chose it). */
static void print_read_by(struct load_cli *c, const struct tpl__report *r) {
  if (r->read == NULL || strcmp(r->read, "local") != 0) return;
  fprintf(stderr, "tpload %s: every rank read its own slices%s\n", c->cmd->name,
          r->read_auto ? " (--read auto: every file was in the page cache)"
                       : "");
}

/* Rank 0's reads: "read direct: a, b buffered: c" (file names). */
static void print_reads(struct load_cli *c, const struct tpl__report *r) {
  static const char *const modes[] = {"direct", "buffered", "http", "gathered"};
  const struct tpl__rank_report *r0 = &r->ranks[0];
  print_read_by(c, r);
  if (r0->nreads == 0) return;
  fprintf(stderr, "tpload %s: rank 0 read", c->cmd->name);
  for (size_t m = 0; m < ARRAY_SIZE(modes); m++) {
    const char *sep = " ";
    for (size_t k = 0; k < r0->nreads; k++) {
      const char *file = r0->reads[k].file;
      const char *slash = strrchr(file, '/');
      if (strcmp(r0->reads[k].mode, modes[m]) != 0) continue;
      if (sep[0] == ' ') fprintf(stderr, " %s:", modes[m]);
      fprintf(stderr, "%s%s", sep, slash ? slash + 1 : file);
      sep = ", ";
    }
  }
  fputc('\n', stderr);
}

/* A job across hosts: what each node's link carried for the load, as
 * its ranks counted it (tpl__report_nodes), on one line. */
static void print_nodes(struct load_cli *c, const struct tpl__report *r) {
  struct tpl__node_bytes *nodes;
  char host[TPL_SAFE_LEN(64)];
  size_t n;
  if (tpl__report_nodes(r, &nodes, &n) != 0) return;
  if (n > 1) {
    fprintf(stderr, "tpload %s: %zu nodes, bytes in/out:", c->cmd->name, n);
    for (size_t k = 0; k < n; k++)
      fprintf(stderr, "%s %s (%u ranks) %.2f/%.2f MiB", k ? ";" : "",
              tpl__cli_safe(nodes[k].host, host, sizeof(host)), nodes[k].nranks,
              (double)nodes[k].bytes_in / 1048576.0,
              (double)nodes[k].bytes_out / 1048576.0);
    fputc('\n', stderr);
  }
  free(nodes);
}

static void on_report(void *ctx, const uint8_t *packed, size_t len) {
  struct load_cli *c = ctx;
  struct tpl__report *r;
  char grid[256];
  json_t *j;
  if (tpl__report_decode(packed, len, &r, NULL) != 0) return;
  if (c->json && (j = tpl__report_json(r, NULL)) != NULL) {
    json_dumpf(j, stdout, TPL_JSON_REPORT);
    fputc('\n', stdout);
    fflush(stdout);
    json_decref(j);
  }
  if (!c->quiet) {
    print_md5(c, r);
    print_summary(c, r);
    print_approximate(c, r);
    print_reads(c, r);
    print_nodes(c, r);
    tpl__report_grid_line(r, grid, sizeof(grid));
    fprintf(stderr, "tpload %s: %s\n", c->cmd->name, grid);
  }
  tpl__report_free(r);
}

/* preshard's closing line on rank 0: what its layout wrote, where. */
static void print_wrote(const struct load_cli *c, uint32_t world) {
  size_t len = strlen(c->out.dir) + 160;
  char *line = malloc(len);
  if (line == NULL) return;
  c->layout->wrote(line, len, c->out.dir, world);
  fprintf(stderr, "tpload preshard: %s\n", line);
  free(line);
}

/* One line per failure, from the rank whose failure it was: the job's
 * agreement keeps the message on that rank only (coord.h), so rank 0
 * speaks when it holds one (a peer that died or stalls is rank 0's to
 * name) and another rank when it does. */
static void report_failure(int rc, const struct tpl__error *err,
                           uint32_t rank) {
  char safe[TPL_SAFE_LEN(sizeof(err->msg))];
  if (err->msg[0] == '\0') return;
  if (rank == 0)
    tpl__cli_report(rc, err);
  else
    fprintf(stderr, "tpload: rank %u: %s\n", rank,
            tpl__cli_safe(err->msg, safe, sizeof(safe)));
}

static int run(const struct tpl__cli_command *cmd,
               const struct tpl__cli_args *a) {
  struct load_cli c = {.cmd = cmd};
  struct tpl__error err = {0};
  uint32_t rank = 0, world = 1;
  int argc = a->argc, rc;
  char **argv = a->argv;
  rc = parse_args(&c, a);
  if (rc != 0) return rc;
  /* the sink: the command's, with its options */
  if (cmd == &tpl__cmd_preshard) c.o.steps = c.layout->sink(&c.out);
  if (cmd == &tpl__cmd_serve) c.o.steps = tpl__serve_sink(&c.serve);
  rc = tpl__engine_init(&argc, &argv, &rank, &world, &err);
  if (rc != 0) return tpl__cli_report(rc, &err);
  c.bar = want_bar(c.progress);
  c.t0 = tpl__now();
  c.last_line = c.t0;
  if (rank == 0) {
    c.o.progress = show_progress;
    c.o.md5_progress = show_md5_progress;
    c.o.report = on_report;
    c.o.ctx = &c;
  }
  rc = tpl__engine_run(&c.o, &err);
  if (rc != 0) report_failure(rc, &err, rank);
  if (rc == 0 && rank == 0 && !c.quiet && cmd == &tpl__cmd_preshard)
    print_wrote(&c, world);
  tpl__outdir_opts_clear(&c.out);
  /* Last: what a rank prints after MPI_Finalize may never reach mpirun. */
  if (tpl__engine_finalize(rc == 0 ? &err : NULL) != 0 && rc == 0) {
    rc = TPL_EPEER;
    report_failure(rc, &err, rank);
  }
  return tpl_exit_code(rc);
}

#define LOAD_COMMAND(NAME, SUMMARY)                                            \
  {                                                                            \
    .name = NAME, .summary = SUMMARY, .options = load_options,                 \
    .noptions = ARRAY_SIZE(load_options), .min_operands = 1,                   \
    .max_operands = 1, .operands_error = "expected one MODEL",                 \
    .help = load_help, .rank0_speaks = 1, .exec = run,                         \
  }

const struct tpl__cli_command tpl__cmd_load =
    LOAD_COMMAND("load", "(mpirun) deliver every rank its shard, report");
const struct tpl__cli_command tpl__cmd_preshard =
    LOAD_COMMAND("preshard", "(mpirun) load, then write per-rank files");
const struct tpl__cli_command tpl__cmd_serve =
    LOAD_COMMAND("serve", "(mpirun) load, then serve shards on sockets");
