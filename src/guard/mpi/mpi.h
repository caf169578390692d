/* Only the engine (src/engine.c, src/engine_*.c, src/beat.c: the unit
 * libtplengine) may include mpi.h (DESIGN.md section 4).
 * This directory is on every other unit's include path, ahead of MPI's,
 * so the rule is checked by the compiler (tests/cli/walls.sh holds the
 * unit to those files). */
#error                                                                         \
    "mpi.h is reserved for the engine (src/engine.c, src/engine_*.c, src/beat.c): DESIGN.md section 4"
