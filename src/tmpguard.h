/* tmpguard.h - named temp files that a signal does not leave behind.
 * Where O_TMPFILE is unavailable (NFS, FUSE) preshard writes a rank file
 * under a temp name, and `preshard --layout mlc` writes every .bin file
 * of a rank under one; SIGTERM, SIGINT or SIGHUP during the write would
 * kill the rank with those names in place.  The handler installed here
 * removes every registered temp file with async-signal-safe calls, then
 * dies of the signal as the rank would have.  Inside a held section (the
 * publish steps) a signal is kept and raised when the section ends,
 * whichever thread the kernel gave it to. */
#ifndef TPL_TMPGUARD_H
#define TPL_TMPGUARD_H

/* Installs the handler for SIGTERM, SIGINT and SIGHUP (once; later calls
 * do nothing).  With nothing registered and nothing held, a signal ends
 * the process exactly as the default action does. */
void tpl__tmpguard_install(void);

/* Registers `path` (copied: as the caller opens it, relative to the
 * working directory or absolute) as a file a signal removes, beside any
 * others registered.  Register before creating the file.  Returns 0 or
 * -ENOMEM (nothing registered then). */
int tpl__tmpguard_add(const char *path);

/* Forgets `path` (it was removed or renamed); a path not registered is
 * ignored. */
void tpl__tmpguard_remove(const char *path);

/* From hold to release a signal waits: release raises the one that
 * arrived meanwhile, if any (the process then ends). */
void tpl__tmpguard_hold(void);
void tpl__tmpguard_release(void);

#endif
