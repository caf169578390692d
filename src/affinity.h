/* affinity.h - where a rank's helper threads may run.  Launchers bind
 * each rank to one core (mpirun does for up to two ranks, srun often
 * does), and a helper thread inherits that binding, so it can only take
 * turns with the rank it helps.  Clearing fresh store pages and hashing
 * are memory work with no MPI in them: run beside the rank on a
 * neighbouring core of the same NUMA node, they use that core's idle time
 * while the rank waits or copies, and their first touches still place
 * the store's pages on the rank's node. */
#ifndef TPL_AFFINITY_H
#define TPL_AFFINITY_H

/* Lets the calling thread run on every CPU of each NUMA node that its
 * current CPUs belong to (every CPU where the kernel reports no nodes).
 * Best effort: a failure leaves the thread where it was. */
void tpl__thread_widen_to_node(void);

#endif
