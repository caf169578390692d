/* engine.c - the engine's entry points: MPI's start and end, and one
 * job (the first generation's load, then the sink's run).  The engine
 * is this file and src/engine_*.c over engine_internal.h, with beat.c
 * the only files that include mpi.h (src/guard/mpi; DESIGN.md section 4).
 *
 * Rank 0 validates the model and plan before anything moves and
 * broadcasts the verdict; on success it broadcasts the job table, from
 * which every rank derives its store layout.  Rank 0 then reads each file
 * sequentially in chunks through a source (source.h: O_DIRECT through
 * io_uring for a cold file, buffered for a cached one), the next chunks'
 * reads in flight while one is delivered (NSLOTS), executes every rank's shard
 * layout over the chunk and sends the bytes with MPI_Isend: a large contiguous
 * part straight from the read buffer, a large strided part packed first, and
 * small parts for the same rank in a row packed together as one message
 * (a batch: many small tensors cost one message, not one each).  A
 * receiver gets its bytes in source order and so only needs byte counts:
 * a message no longer than what the current tensor still needs is that
 * tensor's alone and lands straight in its store; a longer one is a batch
 * and is taken apart from an inbox (engine_recv.c).  Messages never
 * exceed the chunk, so MPI's int counts never matter.  On a TP x PP x DP
 * grid a byte several ranks need (a shard every replica holds, a tensor
 * that is not cut) leaves rank 0 once and goes down a chain of its
 * holders (the chains section of engine_core.c); a rank outside a tensor's
 * pipeline stages gets none of it.  What follows the load is the sink's
 * (coord.h): the engine runs its steps and gives it the job-wide coordination
 * over MPI.  Every MPI call's result goes through tpl__eng_mpi_check().
 *
 * Where each part lives: engine_core.c (checks, waits, agreements, the
 * job table, chains, beats, finishing), engine_read.c (sources, rank 0's
 * stream, --read local, --verify-md5's pass), engine_send.c (a chunk
 * into sends), engine_recv.c (receiving, forwarding), engine_gen.c (one
 * generation's load, report and free), engine_reload.c (coord.h: the
 * sink's run, serve's reloads). */
#include <mpi.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"
#include "engine_internal.h"

/* Whether the launcher put every rank on this one node: mpirun's local
 * and world sizes agree, or a Slurm step spans one node. */
static int single_node_job(void) {
  const char *local = getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
  const char *world = getenv("OMPI_COMM_WORLD_SIZE");
  const char *nodes = getenv("SLURM_STEP_NUM_NODES");
  if (local != NULL && world != NULL) return strcmp(local, world) == 0;
  return nodes != NULL && strcmp(nodes, "1") == 0;
}

int tpl__engine_init(int *argc, char ***argv, uint32_t *rank, uint32_t *world,
                     struct tpl__error *err) {
  int provided, r, w;
  /* Receivers spend the load waiting for rank 0; spinning there takes the
   * CPU rank 0 needs whenever ranks share cores (measured: about twice as
   * slow with 4 ranks on 2 cores).  A user's own setting wins. */
  setenv("OMPI_MCA_mpi_yield_when_idle", "1", 0);
  /* On one node every byte goes through shared memory (ob1 + vader),
   * which is what Open MPI ends up choosing there anyway; naming it skips
   * probing the network layers (UCX, OFI, PSM), a large part of every
   * start.  A user's own --mca pml wins. */
  if (single_node_job()) setenv("OMPI_MCA_pml", "ob1", 0);
  if (tpl__eng_mpi_check(
          MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided), "init",
          err) != 0)
    return TPL_EPEER;
  if (tpl__eng_mpi_check(
          MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN),
          "set error handler", err) != 0)
    return TPL_EPEER;
  if (tpl__eng_mpi_check(MPI_Comm_rank(MPI_COMM_WORLD, &r), "rank", err) != 0)
    return TPL_EPEER;
  if (tpl__eng_mpi_check(MPI_Comm_size(MPI_COMM_WORLD, &w), "size", err) != 0)
    return TPL_EPEER;
  if (tpl__eng_find_node((uint32_t)r, err) != 0) return TPL_EPEER;
  *rank = (uint32_t)r;
  *world = (uint32_t)w;
  return 0;
}

int tpl__engine_finalize(struct tpl__error *err) {
  return tpl__eng_mpi_check(MPI_Finalize(), "finalize", err);
}

int tpl__engine_run(const struct tpl__load_opts *o, struct tpl__error *err) {
  struct engine e = {0};
  int rank, world, rc;
  if (tpl__eng_mpi_check(MPI_Comm_rank(MPI_COMM_WORLD, &rank), "rank", err) !=
      0)
    return TPL_EPEER;
  if (tpl__eng_mpi_check(MPI_Comm_size(MPI_COMM_WORLD, &world), "size", err) !=
      0)
    return TPL_EPEER;
  e.o = o;
  e.rank = (uint32_t)rank;
  e.world = (uint32_t)world;
  e.store.fd = -1;
  e.chunk = o->chunk_bytes / (2 * NSLOTS) ? o->chunk_bytes / (2 * NSLOTS) : 1;
  e.shutdown_req = e.reload_req_mpi = MPI_REQUEST_NULL;
  e.plan_arg = o->plan != NULL ? o->plan : "auto";
  rc = tpl__eng_load(&e, 0, err);
  if (rc == 0) rc = tpl__eng_run_sink(&e, err);
  tpl__eng_free(&e);
  return rc;
}
