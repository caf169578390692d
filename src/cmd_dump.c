/* cmd_dump.c - `tpload dump SOCKET --out FILE [--tp T] [--pp P]`:
 * attaches to one rank of a running daemon (zero-copy, through the
 * consumer API) and writes what it holds as a safetensors file: tensors in
 * table (checkpoint) order, `__metadata__` the rank's place in the grid
 * (tpl__rank_file_header; the grid the daemon names, or for an older
 * daemon its world seen as --tp x --pp x D, and the job's fingerprint),
 * so
 * the result is byte for byte the rank file `tpload preshard` writes.  Each
 * tensor's checksum is verified on the way out.  The file appears atomically
 * (fileio's tpl__atomic_*): temp name, fsync, rename, directory fsync. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <xxhash.h>

#include "cli.h"
#include "client.h"
#include "cmd_grid.h"
#include "common.h"
#include "dtype.h"
#include "fileio.h"
#include "preshard.h"

static const char dump_help[] =
    "usage: tpload dump SOCKET --out FILE [--force] [--tp T] [--pp P]\n"
    "                   [--daemon-uid UID]\n"
    "\n"
    "Attaches to one rank of a running `tpload serve` (SOCKET is its\n"
    "DIR/rank{R}.sock) and writes the tensors it holds to FILE as\n"
    "safetensors, in checkpoint order, with __metadata__ tp_rank,\n"
    "tp_size and the job's fingerprint: the same bytes `tpload preshard`\n"
    "writes for that rank.\n"
    "Checksums are verified while writing; FILE appears only when complete.\n"
    "\n"
    "  --out FILE   where to write; an existing FILE is refused (73)\n"
    "  --force      replace an existing FILE (atomically)\n"
    "  --tp T, --pp P  the grid the daemon was started with (serve --tp\n"
    "               --pp): the file's metadata gives the rank's (d, p, t)\n"
    "               as preshard's does.  The daemon names its grid, so\n"
    "               these are only checked against it (64 when they\n"
    "               differ); a daemon of an older tpload does not, and\n"
    "               then they say it (default one tensor-parallel group)\n"
    "  --daemon-uid UID  the uid the daemon must run as (default: yours,\n"
    "               or TPLOAD_DAEMON_UID)\n"
    "  --help       show this help\n"
    "\n"
    "Exit codes: 0 ok, 64 usage, 65 checksum mismatch, 69 daemon\n"
    "unreachable, 73 cannot create FILE, 74 I/O error.\n";

/* The safetensors header for everything the attachment holds, rank
 * tpl_shard_rank(s) of grid `g`, with the job fingerprint the daemon
 * names (none from an older daemon). */
static int build_header(const struct tpl_shard *s, const struct tpl__grid *g,
                        uint8_t **hdr, size_t *len, struct tpl__error *err) {
  size_t n = tpl_shard_count(s);
  const char *fp = tpl__shard_fingerprint(s);
  struct tpl__st_out *out = calloc(n ? n : 1, sizeof(*out));
  int rc;
  if (out == NULL) return tpl__oom(err);
  for (size_t i = 0; i < n; i++) {
    struct tpl_tensor_view v;
    tpl_shard_tensor(s, i, &v);
    out[i].name = v.name;
    out[i].dtype = tpl__dtype_from_mlc(v.dtype);
    out[i].ndim = v.ndim;
    out[i].shape = v.shape;
    out[i].nbytes = v.nbytes;
  }
  rc = tpl__rank_file_header(out, n, g, tpl_shard_rank(s), fp[0] ? fp : NULL,
                             hdr, len);
  free(out);
  if (rc != 0)
    return tpl__fail(err, rc, "cannot build the safetensors header: %s",
                     tpl_strerror(rc));
  return 0;
}

/* Writes the header and every tensor's bytes, checking each checksum. */
static int write_body(int fd, const struct tpl_shard *s, const uint8_t *hdr,
                      size_t hlen, const char *path, struct tpl__error *err) {
  int rc = tpl__write_full(fd, hdr, hlen);
  for (size_t i = 0; rc == 0 && i < tpl_shard_count(s); i++) {
    struct tpl_tensor_view v;
    tpl_shard_tensor(s, i, &v);
    if (XXH3_64bits(v.data, (size_t)v.nbytes) != v.xxh3)
      return tpl__fail(err, TPL_EMISMATCH,
                       "tensor '%s': expected xxh3 %016llx, found other "
                       "bytes in the daemon's store",
                       v.name, (unsigned long long)v.xxh3);
    rc = tpl__write_full(fd, v.data, (size_t)v.nbytes);
  }
  if (rc != 0)
    return tpl__fail(err, rc, "%s: cannot write: %s", path, strerror(-rc));
  return 0;
}

/* Keeps err's message under TPL_EOUTPUT (exit 73). */
static int output_error(struct tpl__error *err) {
  err->code = TPL_EOUTPUT;
  return TPL_EOUTPUT;
}

/* A FILE that cannot be created or put in place is exit 73; one that
 * cannot be written or synced is an I/O error. */
static int write_file(const struct tpl_shard *s, const struct tpl__grid *g,
                      const char *path, struct tpl__error *err) {
  char tmp[4096];
  struct tpl__atomic a;
  uint8_t *hdr = NULL;
  size_t hlen;
  int rc = build_header(s, g, &hdr, &hlen, err);
  if (rc != 0) return rc;
  snprintf(tmp, sizeof(tmp), "%s.tmp.%ld", path, (long)getpid());
  rc = tpl__atomic_open(path, tmp, &a, err);
  if (rc != 0) {
    free(hdr);
    return rc == -ENOMEM ? rc : output_error(err);
  }
  rc = write_body(a.fd, s, hdr, hlen, path, err);
  free(hdr);
  if (rc != 0) {
    tpl__atomic_abort(&a);
    return rc;
  }
  rc = tpl__atomic_commit(&a, err);
  return rc != 0 && a.step == TPL__ATOMIC_RENAME ? output_error(err) : rc;
}

/* The grid in the file's metadata: the daemon's own (its reply names
 * it), which --tp / --pp, when given, must match; from a daemon older
 * than that field, --tp x --pp (0: one tensor-parallel group).
 * TPL_EUSAGE with the numbers when they disagree or do not divide. */
static int dump_grid(const struct tpl_shard *s, const char *sock, uint32_t tp,
                     uint32_t pp, struct tpl__grid *g, struct tpl__error *err) {
  uint32_t world = tpl_shard_world(s), dtp, dpp;
  tpl__shard_grid(s, &dtp, &dpp);
  if (dtp != 0 && ((tp != 0 && tp != dtp) || (pp != 0 && pp != dpp)))
    return tpl__fail(err, TPL_EUSAGE,
                     "%s: the daemon serves a grid of tp %u x pp %u (%u "
                     "ranks), not the --tp %u --pp %u given",
                     sock, dtp, dpp, world, tp ? tp : dtp, pp ? pp : dpp);
  if (dtp != 0) {
    tp = dtp;
    pp = dpp;
  }
  return tpl__grid_make(world, tp ? tp : world, pp ? pp : 1, err, g);
}

enum { OPT_OUT, OPT_FORCE, OPT_DAEMON_UID, OPT_TP, OPT_PP };

static const struct tpl__cli_option dump_options[] = {
    [OPT_OUT] = {"out", TPL_CLI_VALUE, 'o'},
    [OPT_FORCE] = {"force", TPL_CLI_FLAG, 0},
    [OPT_DAEMON_UID] = {"daemon-uid", TPL_CLI_VALUE, 0},
    [OPT_TP] = {"tp", TPL_CLI_VALUE, 0},
    [OPT_PP] = {"pp", TPL_CLI_VALUE, 0},
};

static int run(const struct tpl__cli_command *cmd,
               const struct tpl__cli_args *a) {
  struct tpl__error err = {0};
  struct tpl_shard *s = NULL;
  struct tpl__grid g;
  const char *out = a->value[OPT_OUT];
  uint32_t tp, pp;
  int rc;
  if (tpl__cli_daemon_uid(cmd, a->value[OPT_DAEMON_UID]) != 0) return 64;
  if (tpl__cli_grid_count(cmd, "tp", a->value[OPT_TP], &tp) != 0 ||
      tpl__cli_grid_count(cmd, "pp", a->value[OPT_PP], &pp) != 0)
    return 64;
  if (out == NULL) return tpl__cli_usage_error(cmd, "--out is required");
  if (!tpl__cli_has(a, OPT_FORCE) && tpl__exists(out)) {
    tpl__fail(&err, TPL_EOUTPUT, "%s: exists (use --force to replace it)", out);
    return tpl__cli_report(TPL_EOUTPUT, &err);
  }
  rc = tpl__client_attach(a->operands[0], TPL_CLIENT_TIMEOUT_MS, &s, &err);
  if (rc == 0) rc = dump_grid(s, a->operands[0], tp, pp, &g, &err);
  if (rc == 0) rc = write_file(s, &g, out, &err);
  tpl_detach(s);
  return rc == 0 ? 0 : tpl__cli_report(rc, &err);
}

const struct tpl__cli_command tpl__cmd_dump = {
    .name = "dump",
    .summary = "write what one daemon rank holds to a file",
    .options = dump_options,
    .noptions = ARRAY_SIZE(dump_options),
    .min_operands = 1,
    .max_operands = 1,
    .operands_error = "expected one SOCKET argument",
    .help = dump_help,
    .exec = run,
};
