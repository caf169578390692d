/* Only the engine (src/engine.c, src/beat.c) may include mpi.h (DESIGN.md
 * section 4).
 * This directory is on every other unit's include path, ahead of MPI's,
 * so the rule is checked by the compiler. */
#error                                                                         \
    "mpi.h is reserved for the engine (src/engine.c, src/beat.c): DESIGN.md section 4"
