/* trust.h - both sides of the daemon's trust boundary: a socket directory
 * only the expected user (and root) can change, and a peer on a Unix
 * socket that runs as the expected user.  Used by the daemon before it
 * binds and by every client (tpl_attach, status, dump) before it believes
 * a reply. */
#ifndef TPL_TRUST_H
#define TPL_TRUST_H

#include <sys/types.h>

#include "common.h"

/* The uid whose daemon a client trusts: TPLOAD_DAEMON_UID when set (a
 * decimal uid), else the caller's effective uid.  Returns 0 or
 * TPL_EUSAGE when the variable is not a uid. */
int tpl__trusted_uid(uid_t *uid, struct tpl__error *err);

/* Checks that `dir` is a private directory of `uid` that nobody else can
 * swap: `dir` itself is not a symbolic link, is a directory owned by
 * `uid` with no group or other permission bits, and every ancestor of
 * its resolved path is owned by root or `uid` and writable by nobody
 * else (a sticky directory such as /tmp is fine: only an entry's owner
 * may rename it).  Symbolic links in the ancestors are followed once,
 * here: callers must use *resolved (malloc'd, caller frees) from then
 * on, never `dir` again.  Returns 0, -errno when `dir` cannot be opened,
 * or TPL_EOUTPUT with err saying which component is not trusted and
 * why. */
int tpl__check_private_dir(const char *dir, uid_t uid, char **resolved,
                           struct tpl__error *err);

/* The uid and pid of the process at the other end of the connected Unix
 * socket `fd` (SO_PEERCRED: the process that called listen() or connect(),
 * as it was then).  Returns 0 or -errno. */
int tpl__peer_cred(int fd, uid_t *uid, pid_t *pid);

/* Bytes of a job id in hex, without the NUL. */
#define TPL_JOB_ID_LEN 32

/* Fills `out` (TPL_JOB_ID_LEN + 1 bytes) with a new random job id: 128
 * bits from getrandom() in lowercase hex.  Returns 0 or -errno. */
int tpl__new_job_id(char *out);

#endif
