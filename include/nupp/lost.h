/* The reasons a sample is not reported as a stack: one table, read by the BPF programs
 * (the counters' indexes), by libnupp (the enum, the names in every report) and by the
 * CLI (what each means and what to do about it). Plain macros and an enum: no types
 * beyond C's, so BPF objects include it too. */
#ifndef NUPP_LOST_H
#define NUPP_LOST_H

/* _(ID, name in reports, what happened, what to do about a large share of them).
 * The order is the reports' order and the BPF counters' indexes. */
#define NUPP_LOSTDEF(_)                                                                        \
	_(NO_VM, "noVm", "a thread ran a LuaJIT VM whose probes were not attached",            \
	  "run the program with our LuaJIT build (nupp-bpf doctor -p PID says what it runs)")  \
	_(READ_FAULT, "readFault", "the target's memory could not be read (a page not "        \
	  "resident, or the process exiting)", "nupp-bpf record -v says where walks failed")   \
	_(BAD_FRAME, "badFrame", "a frame failed validation: the walk was refused, never "     \
	  "guessed", "nupp-bpf -vv record says where walks failed")                            \
	_(TRUNCATED, "truncated", "a trace's inlined frames did not fit in one stack",         \
	  "nupp-bpf -vv record says where walks failed")                                       \
	_(MAP_FULL, "mapFull", "the kernel's counts map, or the ring that carries new "        \
	  "stacks, was full", "raise --max-stacks")                                            \
	_(SYMBOLIZE, "symbolize", "a frame could not be named with proof: its function was "   \
	  "freed before a drain named it, a trace snapshot was not decoded, or the stack's "   \
	  "record was lost", "profile for longer (a function that lives longer than a drain " \
	  "is named); nupp-bpf -v record names the cause of each, -vv each trace snapshot")

/* Why a sample was not reported as a stack. Every sample not walked is counted. */
enum nupp_lost {
#define NUPP_LOST_ENUM(id, name, what, remedy) NUPP_LOST_##id,
	NUPP_LOSTDEF(NUPP_LOST_ENUM)
#undef NUPP_LOST_ENUM
	NUPP_LOST__MAX
};

#endif
