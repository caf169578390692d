/* cmd_reload.c - `tpload reload SOCKET [MODEL] [--plan P]`: asks a running
 * `tpload serve` to load a new version with the same grid and options
 * while it keeps serving the current one, waits until every rank has
 * switched (or the reload failed, and the current one is still served)
 * and prints the new generation.  Rank 0 runs reloads; given another
 * rank's socket, the command asks rank0.sock in the same directory. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "client.h"
#include "common.h"
#include "fileio.h"
#include "origin.h"

static const char reload_help[] =
    "usage: tpload reload SOCKET [MODEL] [--plan P] [--verify-md5]\n"
    "\n"
    "Asks the `tpload serve` job behind SOCKET (any rank's\n"
    "DIR/rank{R}.sock; the request goes to rank 0) to load MODEL as its\n"
    "next generation, with the job's grid and options.  Every rank keeps\n"
    "serving the current generation while the new one is validated and\n"
    "delivered as a first load is; only when every rank holds its whole,\n"
    "checksummed new shard do all ranks switch.  Consumers attached keep\n"
    "their generation until they detach; new attaches get the new one.\n"
    "MODEL is a path or an http(s)://, s3:// or hf:// URL, as for serve\n"
    "(the daemon's environment gives the credentials; an hf:// branch is\n"
    "resolved to its commit again).  Without MODEL, the path or URL the\n"
    "current generation came from (a presigned URL's query included) is\n"
    "loaded again (what SIGHUP to rank 0 does): a directory, symbolic\n"
    "link or object that now names another version.\n"
    "Each rank needs the memory of a\n"
    "second store meanwhile (checked before any byte moves).  Prints the\n"
    "new generation once every rank serves it.\n"
    "\n"
    "  --plan P     plan file, preset name or auto (default: the current\n"
    "               generation's)\n"
    "  --verify-md5 MODEL is an MLC weight directory: rank 0 checks every\n"
    "               params_shard file against the md5sum its record\n"
    "               carries before the new version loads (a job served\n"
    "               with --verify-md5 checks every reload anyway)\n"
    "  --daemon-uid UID  the uid the daemon must run as (default: yours,\n"
    "               or TPLOAD_DAEMON_UID)\n"
    "  --help       show this help\n"
    "\n"
    "Exit codes: 0 switched, 64 usage (--verify-md5 of a model that is not\n"
    "an MLC directory included), 65 invalid model or plan, or a file whose\n"
    "md5sum differs (the current generation is still served), 66 model\n"
    "missing, 69 daemon unreachable or refusing (a rank silent for half\n"
    "the job's stall deadline, named), or the job ended during\n"
    "the reload (a rank stopped or died), 70 a rank has no memory for a\n"
    "second store, 74 I/O error, 75 busy (another reload is running).\n";

/* MODEL as the daemon's rank 0 will open it: a local path absolute (its
 * working directory is not ours), symbolic links kept (SIGHUP reloads the
 * same path later); a URL as it is, its query included.  malloc'd; NULL
 * on ENOMEM. */
static char *absolute(const char *model) {
  char cwd[PATH_MAX];
  if (model[0] == '/' || !tpl__origin_for(model)->paths ||
      getcwd(cwd, sizeof(cwd)) == NULL)
    return strdup(model);
  return tpl__path_join(cwd, model);
}

static int report(const char *path, const struct tpl__wire_response *r) {
  char safe[TPL_SAFE_LEN(1024)], model[TPL_SAFE_LEN(4096)];
  if (!r->ok) {
    fprintf(stderr, "tpload: %s: reload failed: %s\n", path,
            tpl__cli_safe(r->error ? r->error : "no reason given", safe,
                          sizeof(safe)));
    return r->error_code != 0 ? tpl_exit_code(r->error_code) : 69;
  }
  printf("generation %llu: %s\n", (unsigned long long)r->generation,
         tpl__cli_safe(r->model ? r->model : "", model, sizeof(model)));
  return 0;
}

#define RELOAD_OPTIONS(X)                                                      \
  X(OPT_PLAN, "plan", TPL_CLI_VALUE)                                           \
  X(OPT_VERIFY_MD5, "verify-md5", TPL_CLI_FLAG)                                \
  X(OPT_DAEMON_UID, "daemon-uid", TPL_CLI_VALUE)

enum { RELOAD_OPTIONS(TPL_CLI_OPTION_ID) };

static const struct tpl__cli_option reload_options[] = {
    RELOAD_OPTIONS(TPL_CLI_OPTION_ENTRY)};

static int run(const struct tpl__cli_command *cmd,
               const struct tpl__cli_args *a) {
  const char *path = a->operands[0];
  struct tpl__wire_request_args args = {0};
  struct tpl__client_req q = {TPL_REQ_RELOAD, 0, NULL, TPL_CLIENT_TIMEOUT_MS,
                              INT_MAX}; /* the reply: when the reload ends */
  struct tpl__wire_response r = {0};
  struct tpl__error err = {0};
  int rc;
  if (tpl__cli_daemon_uid(cmd, a->value[OPT_DAEMON_UID]) != 0) return 64;
  if (a->noperands > 1 && (args.model = absolute(a->operands[1])) == NULL)
    return tpl__cli_report(-ENOMEM, NULL);
  args.plan = (char *)a->value[OPT_PLAN];
  args.verify_md5 = tpl__cli_has(a, OPT_VERIFY_MD5);
  q.args = &args;
  rc = tpl__client_job_call(path, &q, &r, &err);
  free(args.model);
  rc = rc != 0 ? tpl__cli_report(rc, &err) : report(path, &r);
  tpl__wire_response_free(&r);
  return rc;
}

const struct tpl__cli_command tpl__cmd_reload = {
    .name = "reload",
    .summary = "load a new version into a running daemon, then switch",
    .options = reload_options,
    .noptions = ARRAY_SIZE(reload_options),
    .min_operands = 1,
    .max_operands = 2,
    .operands_error = "expected SOCKET and at most one MODEL",
    .help = reload_help,
    .exec = run,
};
