/* The LuaJIT frame walker, static inline code that compiles as BPF and as host C.
 *
 * Every read of target memory goes through NUPP_WALK_READ(dst, size, addr), which the
 * includer defines: bpf_probe_read_user in BPF, a fake-memory reader in unit tests.
 * Offsets and constants come from struct nupp_lj_layout only. A walk starts at the frame
 * the VM state names (nupp_walk_start), steps down the frame links a bounded number of
 * times (nupp_walk_step), and goes on into the coroutine that resumed the one it ends in
 * (nupp_walk_chain). */
#ifndef NUPP_WALK_H
#define NUPP_WALK_H

/* This header owns only the order of the parts, each of which needs the ones before it
 * (and includes them); code goes in the parts, never here:
 * walk_state.h (state, limits, layout checks), walk_stack.h (the stack record and key),
 * walk_cache.h (frame and function caches), walk_read.h (reads shared within a walk),
 * walk_runs.h (repeat and cache runs), walk_frame.h (one frame step, coroutine chaining,
 * the host loop), walk_start.h (where a walk begins, trace samples). */
#include "nupp/walk_state.h"
#include "nupp/walk_stack.h"
#include "nupp/walk_cache.h"
#include "nupp/walk_read.h"
#include "nupp/walk_runs.h"
#include "nupp/walk_frame.h"
#include "nupp/walk_start.h"

#endif /* NUPP_WALK_H */
