/* Only the daemon unit (src/daemon.c, src/log.c) may include uv.h
 * (DESIGN.md section 4).
 * This directory is on every other unit's include path, ahead of the
 * system's, so the rule is checked by the compiler. */
#error                                                                         \
    "uv.h is reserved for the daemon (src/daemon.c, src/log.c): DESIGN.md section 4"
