/* shard.c - placeholder, being written. */
#include "shard.h"
