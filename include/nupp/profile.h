/* The profile: the zone/stack aggregate and the abort table, as every channel fills
 * them and every writer (JSON, collapsed, CSV, ...) reads them. Plain data. */
#ifndef NUPP_PROFILE_H
#define NUPP_PROFILE_H

#include <stdbool.h>
#include <stdio.h>
#include <sys/types.h>
#include <linux/types.h>

#include "nupp/lost.h"

#ifdef __cplusplus
extern "C" {
#endif


/* The name of a loss reason as it appears in reports ("noVm", "readFault", ...). */
const char *nupp_lost_name(enum nupp_lost r);

/* One distinct (zone path, stack) and what landed on it; the seed's profile.Sample. */
struct nupp_sample_row {
	pid_t pid;       /* the process sampled (0: not known) */
	pid_t tid;       /* the thread sampled (0: not known) */
	char *zone_path; /* "" when no zone was open */
	char *stack;     /* frames outermost first, ";" between them */
	__u64 count;     /* = compiled + interpreted + ccode + collecting + compiling, or more
			  * when the state of some samples is unknown (read from collapsed stacks) */
	__u64 compiled, interpreted, ccode, collecting, compiling;
};

/* Where one Lua function named in the stacks is defined. */
struct nupp_frame_info {
	char *name;     /* the frame name as the stacks hold it ("m.lua:comp", "m.lua:12") */
	char *file;     /* its chunk as frames name it (basename, or full path) */
	int first_line; /* the line of its "function" (GCproto firstline, linedefined) */
	int last_line;  /* the line of its "end" (firstline + numline, lastlinedefined) */
	size_t next;    /* the next entry of the same name + 1 (0: none) */
};

/* The frame table: every distinct (name, file, first_line, last_line) of the Lua frames
 * of the rows. A name given by the caller ("m.lua:comp") may stand for more than one
 * function (two locals named comp), so a name may have several entries. */
struct nupp_frame_table {
	struct nupp_frame_info *v;
	size_t n, cap;
	size_t *index; /* open addressing by name: first entry of the name + 1, 0 = empty */
	size_t nslots;
	/* Given at the first add, unique in the process, kept by copies of the struct, 0
	 * again when freed: a name made for this table (its frames recorded in it) can be
	 * used again for it without recording them again. */
	unsigned long long id;
};

/* Adds (name, file, first_line, last_line) unless it is there; 0 or -ENOMEM. */
int nupp_frame_table_add(struct nupp_frame_table *t, const char *name, const char *file, int first_line,
			 int last_line);
/* Adds every entry of src to t; 0 or -ENOMEM. */
int nupp_frame_table_merge(struct nupp_frame_table *t, const struct nupp_frame_table *src);
/* The first entry of frame name[0..len), or NULL; the others of the name follow with
 * nupp_frame_table_next. */
const struct nupp_frame_info *nupp_frame_table_find(const struct nupp_frame_table *t, const char *name,
						     size_t len);
const struct nupp_frame_info *nupp_frame_table_next(const struct nupp_frame_table *t,
						     const struct nupp_frame_info *e);
/* Frees the entries. */
void nupp_frame_table_free(struct nupp_frame_table *t);

/* The sample channel's result. */
struct nupp_sample_set {
	struct nupp_sample_row *rows;
	size_t n, cap;
	__u64 samples;               /* samples reported as stacks (sum of counts) */
	__u64 lost[NUPP_LOST__MAX];  /* samples not reported, by reason */
	/* nupp_sample_set_add's index of (zone, stack) -> row: open addressing, slot = row
	 * index + 1 (0 empty), nslots a power of two. It covers rows [0, nindexed); rows
	 * added or reordered by other code are indexed again at the next add. */
	size_t *index;
	size_t nslots, nindexed;
	size_t *hashes; /* hash of each row [0, nindexed), so a grown index or a take needs none */
	size_t nhashes; /* room in hashes */
	/* Samples of host code: threads or moments outside every Lua VM, on "[host];..." rows
	 * (counted here also when those rows are left out). */
	__u64 host_samples;
	__u64 cut_samples; /* samples whose stack was deeper than the depth: "[truncated];..." */
	struct nupp_frame_table frames; /* where the Lua functions of the rows are defined */
};

/* Severity of an abort row; the seed's profile.Severity. Ordered for reports. */
enum nupp_severity { NUPP_SEV_BLACKLIST, NUPP_SEV_WARN, NUPP_SEV_INFO };

/* "blacklist", "warn" or "info". */
const char *nupp_severity_name(enum nupp_severity s);

/* One place the JIT gave up, and how often; the seed's profile.AbortSite. */
struct nupp_abort_row {
	enum nupp_severity severity;
	__u64 count;
	char *reason;    /* jit.vmdef.traceerr text with info substituted */
	char *location;  /* "<file>:<line>" as jit.util.funcinfo(fn, pc).loc prints it */
	char *zone_path;
};

/* The trace channel's result. */
struct nupp_abort_set {
	struct nupp_abort_row *rows;
	size_t n, cap;
	__u64 total_aborts; /* abort events counted (benign ones only with include_benign) */
	__u64 blacklisted;  /* blacklist events among them */
};

/* Adds count (and the state split) to the row (counts->pid, counts->tid, zone, stack),
 * creating it.
 * 0 or -ENOMEM. */
int nupp_sample_set_add(struct nupp_sample_set *s, const char *zone, const char *stack,
			const struct nupp_sample_row *counts);
/* Adds row i of src to dst under zone (NULL: the row's own), as nupp_sample_set_add
 * does, but a new row of dst takes the row's strings instead of copying them, and the
 * row's hash is not computed again when its zone is kept. The row is left empty (NULL
 * strings, zero counts): src is only to be freed afterwards. 0 or -ENOMEM (src's row
 * untouched). */
int nupp_sample_set_take(struct nupp_sample_set *dst, struct nupp_sample_set *src, size_t i, const char *zone);
/* Sorts rows by count descending (ties: zone, then stack, ascending). */
void nupp_sample_set_sort(struct nupp_sample_set *s);
/* Frees the rows and the frame table. */
void nupp_sample_set_free(struct nupp_sample_set *s);

/* Adds count to the row (severity, reason, location, zone), creating it. 0 or -ENOMEM. */
int nupp_abort_set_add(struct nupp_abort_set *a, enum nupp_severity sev, const char *reason,
		       const char *location, const char *zone, __u64 count);
/* Sorts rows by severity (blacklist, warn, info), then count descending. */
void nupp_abort_set_sort(struct nupp_abort_set *a);
/* Frees the rows. */
void nupp_abort_set_free(struct nupp_abort_set *a);

/* Keeps the rows whose zone path starts with zone_prefix (NULL: all) and cuts each
 * stack below the outermost frame of module root (NULL: keep whole; a stack without
 * such a frame is kept whole), merging rows that become equal; the frame table is
 * copied. out must be empty. */
int nupp_sample_set_filter(const struct nupp_sample_set *in, const char *zone_prefix, const char *root,
			   struct nupp_sample_set *out);

/* A sampled thread and its name (its comm when it was first seen; "" if not known). */
struct nupp_thread_name {
	pid_t pid, tid;
	const char *name;
};

/* What a profile file says about how it was made. */
struct nupp_profile_meta {
	const char *command;  /* the nupp-bpf command line */
	const char *target;   /* the profiled command line, or NULL for -p */
	const pid_t *pids;
	int npids;
	int frequency_hz;
	double duration_sec;
	double start_time;    /* when recording began: Unix time in seconds (0: not known) */
	const char *backend;  /* "bpf" */
	const char *luajit;   /* the LuaJIT build (nupp_luajit_build()) */
	int depth;
	bool aborts;          /* the trace channel ran */
	bool include_benign;
	const char *zone_filter, *root;
	const char *tool;     /* "nupp-bpf X.Y.Z" that wrote it; NULL: this library's */
	bool lines;           /* Lua frames are module:line (current line), not functions */
	bool full_filenames;  /* Lua frames name the chunk's full path, not its basename */
	const struct nupp_thread_name *threads; /* the names of the threads of the rows */
	int nthreads;
};

/* A whole profile: how it was made, the sample rows and the abort rows. What `record`
 * and a session's stop produce, what every writer renders and the JSON reader returns. */
struct nupp_profile {
	struct nupp_profile_meta meta;
	struct nupp_sample_set samples;
	struct nupp_abort_set aborts;
	void *meta_store; /* the meta's strings and pids when nupp_profile_read made them */
};

/* Frees the rows, and the meta's strings and pids if nupp_profile_read allocated them
 * (a caller that filled meta itself keeps ownership of its strings). Leaves p zeroed. */
void nupp_profile_free(struct nupp_profile *p);

/* -- The nupp profile JSON document -------------------------------------------------
 *
 * Every string a target can put in a name (chunk names, table keys, C symbols) is
 * written losslessly as valid UTF-8: a byte that is not part of a well-formed UTF-8
 * sequence is written as the private-use character U+EF00 + byte (U+EF80..U+EFFF, the
 * mapping MirBSD's OPTU-8 uses), and a character of that range present in the name
 * itself is written as its three bytes mapped the same way, so reading maps every
 * U+EF80..U+EFFF back to one byte and gives back the exact bytes written. */

/* Writes the nupp profile JSON document (version 1): meta, samples, aborts. */
int nupp_write_profile_json(const struct nupp_profile_meta *m, const struct nupp_sample_set *s,
			    const struct nupp_abort_set *a, FILE *f);

/* Reads a profile from f into *p (free it with nupp_profile_free): a nupp profile JSON
 * document (version 1), or collapsed stacks ("frame;frame count" lines, rows with no
 * VM-state split) when the first non-blank byte is not '{'. Rows with the same zone
 * and stack are merged; rows keep the file's order. name names f in messages. 0, or
 * -EINVAL (malformed or truncated: nupp_errmsg() says "name:line:column: what (byte
 * N of M)" or "name: samples[3].count: what"), -EPROTO (another version), -ENOMEM,
 * -errno of the read. */
int nupp_profile_read(FILE *f, const char *name, struct nupp_profile *p);
/* The same from a file ("-": stdin); -errno of open as well. */
int nupp_profile_read_file(const char *path, struct nupp_profile *p);
/* The same from memory. */
int nupp_profile_read_mem(const void *buf, size_t len, const char *name, struct nupp_profile *p);

/* Maps a name to the lossless UTF-8 form written in JSON (see above): a new string,
 * or NULL on ENOMEM. */
char *nupp_bytes_to_utf8(const char *bytes);
/* Maps the lossless UTF-8 form back to the bytes: a new string of *len bytes (NUL
 * terminated), or NULL on ENOMEM. */
char *nupp_utf8_to_bytes(const char *utf8, size_t *len);

/* -- Formats and outputs ------------------------------------------------------------ */

enum nupp_format {
	NUPP_FMT_NONE,       /* not a known format */
	NUPP_FMT_JSON,       /* the nupp profile (.json) */
	NUPP_FMT_COLLAPSED,  /* collapsed stacks (.folded, .collapsed, .txt) */
	NUPP_FMT_SVG,        /* the flame graph (.svg) */
	NUPP_FMT_SPEEDSCOPE, /* speedscope's file format (.speedscope.json) */
	NUPP_FMT_PPROF,      /* gzip'd perftools.profiles.Profile (.pb.gz, .pprof) */
	NUPP_FMT_TOP,        /* the top-functions table (text; .txt only with a forced format) */
	NUPP_FMT_CSV,        /* the abort table (.csv) */
};

/* The format named name ("json", "collapsed" or "folded", "svg" or "flamegraph",
 * "speedscope", "pprof", "top", "csv"), or NUPP_FMT_NONE. */
enum nupp_format nupp_format_by_name(const char *name);
/* The format of an output file by its extension (see enum nupp_format), or NONE. */
enum nupp_format nupp_format_by_path(const char *path);
/* The name of a format ("json", "collapsed", ...). */
const char *nupp_format_name(enum nupp_format fmt);

/* How the writers render (every field optional: zero means the default). */
struct nupp_report_opts {
	size_t sz;          /* sizeof(struct nupp_report_opts) */
	bool inverted;      /* SVG: an icicle graph, roots at the top */
	int top;            /* top table: rows (default 20) */
	bool lines;         /* top table: per source line (needs a profile recorded with lines) */
	const char *title;  /* SVG: the title (default: the profiled command) */
	double min_width;   /* SVG: frames narrower than this many pixels are merged (0.5) */
	const struct nupp_profile *diff_base; /* SVG: a differential flame graph against this
					       * BASE: widths from the profile drawn, each frame
					       * coloured by the change of its share of the samples
					       * (red grew, blue shrank) */
};

/* Writes p in format fmt to f. 0 or -errno (nupp_errmsg() says why). */
int nupp_profile_write(const struct nupp_profile *p, enum nupp_format fmt, const struct nupp_report_opts *o,
		       FILE *f);

/* Checks, before any work, that path can be written as an output: its folder exists
 * and is writable and path is not a folder. "-" (stdout) always passes. 0 or -errno
 * with nupp_errmsg() "cannot write PATH: why". */
int nupp_output_check(const char *path);

/* Writes one output atomically: write_fn fills a new temporary file in path's folder,
 * which is flushed to disk and renamed over path only if everything succeeded;
 * otherwise it is removed, so path is either the complete new output or as it was.
 * "-" writes to stdout (a closed pipe fails with -EPIPE; SIGPIPE must be ignored).
 * 0 or -errno with nupp_errmsg() "cannot write PATH: why". */
int nupp_output_write(const char *path, int (*write_fn)(FILE *f, void *ctx), void *ctx);

/* Writes p in format fmt (NONE: by path's extension) to path, atomically. */
int nupp_profile_write_file(const struct nupp_profile *p, const char *path, enum nupp_format fmt,
			    const struct nupp_report_opts *o);

/* The writers of each format. */
int nupp_write_svg(const struct nupp_profile *p, const struct nupp_report_opts *o, FILE *f);
int nupp_write_speedscope(const struct nupp_profile *p, FILE *f);
int nupp_write_pprof(const struct nupp_profile *p, FILE *f);
/* The top-functions table: self and total share and counts, and the VM-state split of
 * the self samples, hottest first. */
int nupp_write_top(const struct nupp_profile *p, const struct nupp_report_opts *o, FILE *f);

/* Writes the rows as collapsed stacks ("a;b;c N\n", count descending, no comments). */
int nupp_write_collapsed(const struct nupp_sample_set *s, FILE *f);
/* Writes the abort rows as RFC 4180 CSV: header severity,count,reason,location,zonePath,
 * CRLF line ends, fields with comma/quote/CR/LF quoted, quotes doubled. */
int nupp_write_abort_csv(const struct nupp_abort_set *a, FILE *f);

#ifdef __cplusplus
}
#endif
#endif /* NUPP_PROFILE_H */
