/* verify_mlc.c */
#include "verify_mlc.h"
