/* stubs.c — TEMPORARY weak stand-ins so the tree links while stages are being written.
 * Each owner deletes the stub of a function when the real one lands. This file must be empty
 * (and then removed) before release. */
#include "tilec.h"

#define STUB_WEAK __attribute__((weak))
