/* affinity.c - helper threads widened from a rank's core to its NUMA node
 * (affinity.h).  Node membership comes from sysfs links
 * (/sys/devices/system/cpu/cpuN/nodeM), so nothing is parsed. */
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <unistd.h>

#include "affinity.h"

#define MAX_NODES 64

static int cpu_on_node(int cpu, int node) {
  char path[80];
  snprintf(path, sizeof(path), "/sys/devices/system/cpu/cpu%d/node%d", cpu,
           node);
  return access(path, F_OK) == 0;
}

static int node_exists(int node) {
  char path[64];
  snprintf(path, sizeof(path), "/sys/devices/system/node/node%d", node);
  return access(path, F_OK) == 0;
}

/* Adds to `wide` every CPU of `node` when one of `mine` is on it. */
static void add_node_if_mine(const cpu_set_t *mine, int node, int ncpu,
                             cpu_set_t *wide) {
  int mine_here = 0;
  if (!node_exists(node)) return; /* nodes may be sparse: keep looking */
  for (int c = 0; c < ncpu && !mine_here; c++)
    mine_here = CPU_ISSET(c, mine) && cpu_on_node(c, node);
  for (int c = 0; mine_here && c < ncpu; c++)
    if (cpu_on_node(c, node)) CPU_SET(c, wide);
}

void tpl__thread_widen_to_node(void) {
  cpu_set_t mine, wide;
  long conf = sysconf(_SC_NPROCESSORS_CONF);
  int ncpu = conf > 0 && conf < CPU_SETSIZE ? (int)conf : CPU_SETSIZE;
  if (pthread_getaffinity_np(pthread_self(), sizeof(mine), &mine) != 0) return;
  CPU_ZERO(&wide);
  for (int node = 0; node < MAX_NODES; node++)
    add_node_if_mine(&mine, node, ncpu, &wide);
  if (CPU_COUNT(&wide) == 0) /* no NUMA information: one node */
    for (int c = 0; c < ncpu; c++)
      CPU_SET(c, &wide);
  pthread_setaffinity_np(pthread_self(), sizeof(wide), &wide);
}
