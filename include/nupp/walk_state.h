/* The walker's state and limits: its configuration (read sizes, windows, the sizes and
 * homes of the caches an includer may move out of struct nupp_walk), the result and mode
 * enums, struct nupp_walk and its entries, the layout checks that its one-read buffers
 * hold every field used, and the accessors of those buffers. Static inline code that
 * compiles as BPF and as host C.
 *
 * Owns the types and the NUPP_WALK_* configuration; reads no target memory and changes
 * no walk. Every read of target memory goes through NUPP_WALK_READ(dst, size, addr),
 * which the includer defines before including nupp/walk.h. */
#ifndef NUPP_WALK_STATE_H
#define NUPP_WALK_STATE_H

#include "nupp/sampler_abi.h"

#ifndef NUPP_WALK_READ
#error "define NUPP_WALK_READ(dst, size, addr) before including nupp/walk.h"
#endif
#ifndef NUPP_WALK_INLINE
#define NUPP_WALK_INLINE static inline __attribute__((always_inline))
#endif

/* A read of target memory by a walk, counted in the walk's state (w in scope). */
#define NUPP_WALK_RD(dst, sz, addr) (w->rd_n++, w->rd_bytes += (__u32)(sz), NUPP_WALK_READ(dst, sz, addr))

/* Bytes read at once from a GCfunc and a GCproto (one read each per function instead of
 * one per field); nupp_walk_layout_ok checks that the fields used lie inside. */
#define NUPP_WALK_FN_READ 48
#define NUPP_WALK_PT_READ 80
#define NUPP_WALK_L_READ 96   /* lua_State: base, stack, stacksize, cframe, glref */
#define NUPP_WALK_G_SPAN 248  /* global_State: vmstate .. cur_L, jit_base in one read */
#define NUPP_WALK_GL_READ 512 /* main lua_State and those global_State fields in one read */
#define NUPP_WALK_T_READ 128  /* a GCtrace header, up to its serial and machine code */

/* Target memory does not change while a sample is walked (the sampled thread is the one
 * running the VM, stopped in the sample's interrupt), so one walk reads each thing once:
 * the Lua stack below the start frame in windows of NUPP_WALK_WIN bytes, the bytecode
 * before a return PC in one read of up to NUPP_WALK_CODE bytes (which often holds the
 * caller's GCproto too), and a per-walk memo of functions and CALL instructions. Every
 * copy is of the same bytes a direct read would return, and nothing outlives the walk
 * (nupp_walk_start invalidates the windows and bumps the memo generation). */
#define NUPP_WALK_WIN 2048   /* bytes of the Lua stack per window read (power of two) */
#define NUPP_WALK_CODE 512   /* bytes of bytecode read up to a return PC (power of two) */
#define NUPP_WALK_CODE_AFTER 128 /* ... and after it (later call sites of the function) */
#define NUPP_WALK_PAGE 4096  /* a code read stays in the page of the CALL instruction */
#define NUPP_WALK_MEMO 8     /* per-walk memo entries per kind (power of two) */

/* The frame cache: what a Lua frame emits and where the frame above it lies, kept across
 * walks (per CPU in BPF), so a frame met before costs no read of target memory. An entry
 * is keyed by the frame's GCfunc and its PC, and only filled when the PC was validated
 * inside the function's prototype; it also holds the CALL instruction before that PC
 * when the walk knew it (the PC was the link of the frame above), which places any frame
 * whose link is that PC (frame_prevl): a frame is found by its link, whatever its caller,
 * so a function called from many places takes one entry, not one per caller. Everything
 * the entry holds (the prototype's identity, sizebc, firstline, chunk name, the CALL) is
 * immutable while the prototype lives, and a genuine frame matching the key is a closure
 * of the same prototype: a GCfunc freed and reused for a closure of another live
 * prototype runs with a PC inside that other prototype. So an entry is right while the
 * prototype holding its PC lives: the free generation (below) of the block of its
 * GCproto, taken when it was filled, must be the same when it is used (only the entries
 * of a prototype freed are dropped). That read is skipped while the process's count of
 * prototype frees (fc_pg) is the one the entry was filled or last checked at, which a
 * check that passes brings forward. The includer's tag (fc_tag, 0 = no cache) names the process
 * and a count of VM lifetime events, and an entry with another tag is never used. The
 * cache is 2-way set-associative by PC: two closures of one prototype, or two PCs, share
 * a set. A trace's start frame
 * has no PC (its snapshot has it): its entry is keyed by the function's bytecode address
 * plus 2 instead of a PC (nupp_walk_fc_start_key), never a PC a frame looks up (a PC is
 * 4-byte aligned; a frame at its function's first instruction, rbx = the bytecode in
 * registers mode, is at pos 0, not a start frame's no position), and is only used when
 * the GCfunc, read again, is a Lua function with that bytecode: the prototype it names
 * is one whose facts the tag keeps. */
#ifndef NUPP_WALK_FC
#define NUPP_WALK_FC 256 /* entries, 2 ways per set (power of two) */
#endif
/* Entry i of the cache (i < NUPP_WALK_FC), or 0: the includer may keep the cache out of
 * struct nupp_walk (BPF: a per-CPU array map, larger than a map value may be). */
#ifndef NUPP_WALK_FC_ENTRY
#define NUPP_WALK_FC_IN_STATE 1
#define NUPP_WALK_FC_ENTRY(w, i) (&(w)->fc[(i) & (NUPP_WALK_FC - 1)])
#endif

/* The function cache: what walks read of functions (nupp_walk_fc_fn), kept apart from
 * the frame cache so that neither evicts the other's entries; entries of the same type. */
#ifndef NUPP_WALK_FNC
#define NUPP_WALK_FNC 256 /* entries, 2 ways per set (power of two) */
#endif
#ifndef NUPP_WALK_FNC_ENTRY
#define NUPP_WALK_FNC_IN_STATE 1
#define NUPP_WALK_FNC_ENTRY(w, i) (&(w)->fnc[(i) & (NUPP_WALK_FNC - 1)])
#endif

/* Prototypes met (NUPP_WALK_WATCH, defined by an includer that watches them: BPF reports
 * the free of a watched prototype only): each Lua frame a walk emits without the frame
 * cache is noted, with the key of the cache entry it filled (0: none), at most
 * NUPP_WALK_MET a walk (more: w->unwatched). */
#ifdef NUPP_WALK_WATCH
/* A power of two, at least the deepest stack (NUPP_SMP_MAX_DEPTH): every Lua frame of a
 * walk whose frame cache is cold is noted, and a frame not noted loses the sample. */
#define NUPP_WALK_MET 256
_Static_assert(NUPP_WALK_MET >= NUPP_SMP_MAX_DEPTH, "a note for every frame of the deepest stack");
_Static_assert((NUPP_WALK_MET & (NUPP_WALK_MET - 1)) == 0, "notes are indexed by a mask");
struct nupp_walk_met {
	__u64 pt;  /* GCproto* */
	__u64 fn;  /* the frame's GCfunc and ... */
	__u64 key; /* ... the key of the cache entry it filled (0: none) */
	__u32 gen; /* the free generation of its GCproto's block, read in the walk */
	__u32 pad;
};
#endif

/* Free generations: a table of counters by block of target memory (NUPP_WALK_PGEN_BLOCK
 * bytes, hashed into NUPP_WALK_PGEN slots), and every prototype freed that a cache entry
 * can name adds one to the slot of the block that holds its GCproto (a GCproto is larger
 * than a block, so no two start in one), before its memory can be reused (with
 * NUPP_WALK_WATCH, entries are only of prototypes watched, and only their frees count). A frame cache entry is checked by the
 * slot of the GCproto it names, which holds its PC and the CALL it keeps: a neighbour
 * freed never drops it, and a slot shared by two blocks only costs misses. The includer
 * may keep the table out of struct nupp_walk (BPF: global data, bumped by
 * luajit:proto_free on any CPU); NUPP_WALK_PGEN_AT(w, i) is slot i's counter. */
#define NUPP_WALK_PGEN_BLOCK 64
#ifndef NUPP_WALK_PGEN
#define NUPP_WALK_PGEN 1024 /* slots (power of two) */
#endif
#ifndef NUPP_WALK_PGEN_AT
#define NUPP_WALK_PGEN_IN_STATE 1
#define NUPP_WALK_PGEN_AT(w, i) ((w)->pgen[(i) & (NUPP_WALK_PGEN - 1)])
#endif

/* The trace cache: what nupp_walk_trace found for a trace number of a VM (its GCtrace,
 * serial, machine code and size), kept across walks. An entry is used while the VM's
 * newest trace serial (global_State, read with vmstate) is the one it was filled at:
 * making a trace is the only way a trace number or address gets another trace (a freed
 * trace's number runs nothing until then), and every trace made changes that serial.
 * The includer's tag (tc_tag, 0 = no cache) names the process and a count of VM
 * lifetime events; an entry with another tag is never used. */
#ifndef NUPP_WALK_TC
#define NUPP_WALK_TC 64 /* entries, direct-mapped by trace number (power of two) */
#endif

/* Iterations of a walk of at most depth frames: frames, plus vararg pseudo-frames, dummy
 * frames, separators. A walk that runs out of them keeps what it emitted (a cut stack). */
#define NUPP_WALK_MAX_ITER(depth) (2 * (depth) + 8)

/* Walk result: RUN while walking, then DONE or a loss reason (enum nupp_lost + 1). */
enum nupp_walk_result {
	NUPP_WALK_RUN = 0,
	NUPP_WALK_DONE = 1,
	NUPP_WALK_READ_FAULT = 2, /* NUPP_LOST_READ_FAULT */
	NUPP_WALK_BAD_FRAME = 3,  /* NUPP_LOST_BAD_FRAME */
	NUPP_WALK_TRUNCATED = 4,  /* NUPP_LOST_TRUNCATED */
	/* Not a loss: the sampled thread is not shown to run this VM now (host code). */
	NUPP_WALK_NOT_RUNNING = 16,
};

/* How the start frame and leaf PC were chosen (nupp_walk_start). */
enum nupp_walk_mode { NUPP_WALK_MEM = 0, NUPP_WALK_REGS = 1, NUPP_WALK_TRACE = 2 };

/* What the walk uses of a GCfunc (and of its GCproto for a Lua function). */
struct nupp_walk_fn {
	__u64 fn;        /* GCfunc address (key) */
	__u64 gen;       /* walk generation that filled it */
	__u64 ptr;       /* Lua: proto_bc(pt); C: lua_CFunction */
	__u64 chunk;     /* Lua: GCstr* chunk name */
	__u32 sizebc;    /* Lua */
	__s32 firstline; /* Lua */
	__u32 ffid;
	__u32 pad;
};

/* A CALL instruction before a return PC. */
struct nupp_walk_ins {
	__u64 pc;  /* return PC (key) */
	__u64 gen; /* walk generation that filled it */
	__u32 ins;
	__u32 pad;
};

/* A trace cache entry. */
struct nupp_walk_tc {
	__u64 tag;   /* tc_tag of the walk that filled it (0: empty) */
	__u64 g;     /* key: global_State, and the trace number */
	__u64 T;     /* GCtrace* */
	__u64 mcode; /* T->mcode */
	__u32 traceno;
	__u32 szmcode; /* T->szmcode */
	__u32 spadj;   /* T->spadjust */
	__u32 serial;  /* T's serial */
	__u32 tgen;    /* the VM's newest trace serial when filled */
	__u32 seen;    /* the includer's mark (0 when filled): BPF notes the trace copied */
};

/* A frame cache entry (64 bytes). */
struct nupp_walk_fc {
	__u64 fn, pc;       /* key: GCfunc, its PC (inside its prototype) */
	__u64 tag;          /* fc_tag of the walk that filled it (0: empty) */
	__u64 proto, chunk; /* the frame record: GCproto*, chunk name */
	__u32 sizebc;
	__s32 firstline;
	__s32 pos;
	__u32 ins;     /* the CALL instruction before pc (pc - 4), when pg_ins & 1 */
	__u32 gen;     /* free generation of its GCproto's block when filled */
	__u32 pg_ins;  /* (fc_pg when filled) << 1 | 1 when ins is known */
};

/* The walker's state; the stack it fills is the stacks map value. */
struct nupp_walk {
	__u64 g, L;        /* global_State, the lua_State being walked */
	__u64 frame;       /* address of the current frame's link slot (base - 8) */
	__u64 bot;         /* stop when frame <= bot (tvref(L->stack) + LJ_FR2) */
	__u64 pc_above;    /* return PC (or contpc) from the link of the frame above, 0 none */
	__u64 leaf_pc[2];  /* leaf PC candidates (rbx, SAVE_PC), first frame of a segment only */
	__u64 rbx;         /* interpreter PC register, for the call/return window rule */
	__u64 lbase;       /* L->base at the start (registers and memory modes) */
	__u64 hash;        /* FNV-style hash of the emitted frames */
	/* Mix of the free generations of the blocks of the emitted Lua frames' GCprotos, in
	 * frame order, and the last one mixed (a repeated frame's): with hash, the stack key
	 * (nupp_walk_key) names each prototype's incarnation without the process's count of
	 * frees, which every unrelated free moves. */
	__u64 gmix;
	__u32 last_gen;
	__u32 pad_gen;
	__u32 max_depth;   /* frames to emit at most (<= NUPP_SMP_MAX_DEPTH) */
	__u32 iter;        /* frames visited in the current lua_State (0 = leaf) */
	__u32 mode;        /* enum nupp_walk_mode */
	__u32 skip;        /* the next frame is a vararg pseudo-frame */
	__u64 skip_fn;     /* ... of this function, validated by the frame above (0: none) */
	__s32 result;      /* enum nupp_walk_result */
	__u32 coro;        /* coroutine levels chained */
	__u32 why;         /* source line of the walker that ended the walk (diagnosis) */
	__u32 strict;      /* INTERP (RECORD outside the recorder) but not walked from
			    * registers: the leaf must match rbx */
	__u32 unwatched;   /* a prototype could not be noted or watched (NUPP_WALK_WATCH) */
	__u32 in_vm;       /* the IP lies in the VM's own code (lj_vm.o) */
	__u32 pad_in_vm;
#ifdef NUPP_WALK_WATCH
	__u32 nmet;        /* prototypes noted (met[]) */
	struct nupp_walk_met met[NUPP_WALK_MET];
#else
	__u32 pad_unw;
#endif
	__u64 helper_ra;   /* ... or SAVE_PC, below a call from the interpreter returning here */
	__u64 cf;          /* the running lua_State's C frame (L->cframe, flags masked) */
	__u64 stk_lo, stk_hi; /* the current lua_State's stack [stack, stack + stacksize) */
	__u64 win_lo, win_hi; /* target bytes held in win (win_hi 0: none) */
	__u64 code_lo, code_hi; /* target bytes held in code (code_hi 0: none) */
	__u64 gen;            /* memo generation of this walk (entries of other walks differ) */
	__u64 rep_fn, rep_link; /* last Lua frame met through a Lua link whose PC was that link */
	__u64 rep_gcv;        /* the layout's gcvmask (nupp_walk_repeat has no layout) */
	__u64 rep_delta;      /* ... and the distance to the frame below it (0: none) */
	__u64 fc_tag;         /* frame cache tag set by the includer (0: cache off) */
	__u64 fc_pg;          /* the process's count of prototype frees, set by the includer */
	__u64 tc_tag;         /* trace cache tag set by the includer (0: cache off) */
	__u32 tgen;           /* the VM's newest trace serial, read at the start */
	__u32 tc_slot;        /* the trace cache entry of this walk's trace (mode TRACE) */
	__u32 sweepno;        /* the VM's count of GC sweeps begun, read at the start */
	__u32 fc_fns;         /* functions whose facts came from the frame cache (diagnosis) */
	__u32 fc_fnfills;     /* ... and stored in it */
	__u32 pad_fn;
	/* What this walk did (reset by nupp_walk_start; diagnosis and tests): */
	__u32 fc_hits, fc_fills; /* frames taken from / stored in the frame cache */
	__u32 fc_looks;       /* frame cache set lookups (each one or two entries; counting
				 * the entries too costs the verifier 17k instructions) */
	__u32 fc_stale;       /* entries of the key refused by their free generation */
	__u32 fc_pgreads;     /* free generations read (an entry filled before a free) */
	__u32 rd_n, rd_bytes; /* reads of target memory (NUPP_WALK_RD), bytes read */
	__u32 rd_win, rd_code, rd_fn; /* ... of them: stack windows, bytecode, GCfunc+GCproto */
	__u64 ins_pc;         /* a return PC whose CALL (at ins_pc - 4) this walk knows (0: none) */
	__u32 ins_val;        /* ... that CALL instruction */
	unsigned char gbuf[512 + 128]; /* [main lua_State +] global_State fields read at start */
	unsigned char Lbuf[128 + 8];  /* lua_State (NUPP_WALK_L_READ bytes) */
	unsigned char fnbuf[64 + 8];  /* the current GCfunc (NUPP_WALK_FN_READ bytes) */
	unsigned char ptbuf[128 + 8]; /* the current GCproto (NUPP_WALK_PT_READ bytes) */
	unsigned char win[NUPP_WALK_WIN + 16];   /* a window of the Lua stack */
	unsigned char code[2 * NUPP_WALK_CODE + 256]; /* bytecode (maybe a GCproto) around a PC */
	struct nupp_walk_fn fns[NUPP_WALK_MEMO];     /* functions met in this walk */
	struct nupp_walk_ins insns[NUPP_WALK_MEMO];  /* CALL instructions met in this walk */
	__u64 st_key;         /* the includer's: st's key, sent with it (nupp_smp_stack_rec) */
	struct nupp_smp_stack st;
	struct nupp_walk_tc tc[NUPP_WALK_TC]; /* the trace cache (kept across walks) */
#ifdef NUPP_WALK_FC_IN_STATE
	struct nupp_walk_fc fc[NUPP_WALK_FC]; /* the frame cache (kept across walks) */
#endif
#ifdef NUPP_WALK_FNC_IN_STATE
	struct nupp_walk_fc fnc[NUPP_WALK_FNC]; /* the function cache (kept across walks) */
#endif
#ifdef NUPP_WALK_PGEN_IN_STATE
	__u32 pgen[NUPP_WALK_PGEN]; /* free generations by block (kept across walks) */
#endif
};

/* Lowest byte of the global_State fields read at start. */
NUPP_WALK_INLINE __u32 nupp_walk_g_lo(const struct nupp_lj_layout *lo)
{
	__u32 a = lo->g_vmstate < lo->g_cur_L ? lo->g_vmstate : lo->g_cur_L;

	a = a < lo->g_jit_base ? a : lo->g_jit_base;
	a = a < lo->g_sweepno ? a : lo->g_sweepno;
	return a < lo->g_tserial ? a : lo->g_tserial;
}

/* One past the highest byte of the global_State fields read at start. */
NUPP_WALK_INLINE __u32 nupp_walk_g_hi(const struct nupp_lj_layout *lo)
{
	__u32 a = lo->g_vmstate + 4 > lo->g_cur_L + 8 ? lo->g_vmstate + 4 : lo->g_cur_L + 8;

	a = a > lo->g_jit_base + 8 ? a : lo->g_jit_base + 8;
	a = a > lo->g_sweepno + 4 ? a : lo->g_sweepno + 4;
	return a > lo->g_tserial + 4 ? a : lo->g_tserial + 4;
}

/* Bytes of a GCtrace header read at once: up to the last field the walk uses. */
NUPP_WALK_INLINE __u32 nupp_walk_t_span(const struct nupp_lj_layout *lo)
{
	__u32 a = lo->T_mcode + 8 > lo->T_szmcode + 4 ? lo->T_mcode + 8 : lo->T_szmcode + 4;

	a = a > lo->T_spadjust + 2 ? a : lo->T_spadjust + 2;
	return a > lo->T_serial + 4 ? a : lo->T_serial + 4;
}

/* Can the walker read this layout's fields from its one-read buffers? */
NUPP_WALK_INLINE int nupp_walk_layout_ok(const struct nupp_lj_layout *lo)
{
	__u32 glo = nupp_walk_g_lo(lo);

	return lo->g_vmstate + 4 - glo <= NUPP_WALK_G_SPAN && lo->g_cur_L + 8 - glo <= NUPP_WALK_G_SPAN &&
	       lo->g_jit_base + 8 - glo <= NUPP_WALK_G_SPAN && lo->g_tserial + 4 - glo <= NUPP_WALK_G_SPAN &&
	       lo->g_sweepno + 4 - glo <= NUPP_WALK_G_SPAN &&
	       nupp_walk_t_span(lo) <= NUPP_WALK_T_READ && lo->L_base + 8 <= NUPP_WALK_L_READ &&
	       lo->L_stack + 8 <= NUPP_WALK_L_READ && lo->L_stacksize + 4 <= NUPP_WALK_L_READ &&
	       lo->L_cframe + 8 <= NUPP_WALK_L_READ && lo->fn_gct < NUPP_WALK_FN_READ && lo->fn_ffid < NUPP_WALK_FN_READ &&
	       lo->fn_pc + 8 <= NUPP_WALK_FN_READ && lo->fn_cf + 8 <= NUPP_WALK_FN_READ &&
	       lo->pt_sizebc + 4 <= NUPP_WALK_PT_READ && lo->pt_chunkname + 8 <= NUPP_WALK_PT_READ &&
	       lo->pt_firstline + 4 <= NUPP_WALK_PT_READ && lo->tv_size == 8 && lo->fr2 == 1;
}

/* A 64-bit field of a read buffer (offsets masked for the verifier). */
NUPP_WALK_INLINE __u64 nupp_walk_u64(const unsigned char *b, __u32 off, __u32 mask)
{
	__u64 v;

	__builtin_memcpy(&v, b + (off & mask), 8);
	return v;
}

/* A 32-bit field of a read buffer. */
NUPP_WALK_INLINE __u32 nupp_walk_u32(const unsigned char *b, __u32 off, __u32 mask)
{
	__u32 v;

	__builtin_memcpy(&v, b + (off & mask), 4);
	return v;
}

#endif /* NUPP_WALK_STATE_H */
