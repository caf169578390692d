/* tmpguard.h - a named temp file that a signal does not leave behind.
 * Where O_TMPFILE is unavailable (NFS, FUSE) preshard writes a rank file
 * under a temp name; SIGTERM, SIGINT or SIGHUP during the write would
 * kill the rank with the name in place.  The handler installed here
 * removes the one registered temp file with async-signal-safe calls,
 * then dies of the signal as the rank would have.  Inside a held section
 * (preshard's publish step) a signal is kept and raised when the section
 * ends, whichever thread the kernel gave it to. */
#ifndef TPL_TMPGUARD_H
#define TPL_TMPGUARD_H

/* Installs the handler for SIGTERM, SIGINT and SIGHUP (once; later calls
 * do nothing).  With nothing registered and nothing held, a signal ends
 * the process exactly as the default action does. */
void tpl__tmpguard_install(void);

/* Registers `name` in the directory `dirfd` (duplicated; the caller keeps
 * its own) as the file a signal removes, replacing any earlier one.
 * `name` is copied and must be shorter than 64 bytes.  Returns 0 or
 * -errno (nothing registered then). */
int tpl__tmpguard_set(int dirfd, const char *name);

/* Forgets the registered file (it was removed or renamed). */
void tpl__tmpguard_clear(void);

/* From hold to release a signal waits: release raises the one that
 * arrived meanwhile, if any (the process then ends). */
void tpl__tmpguard_hold(void);
void tpl__tmpguard_release(void);

#endif
