/* The profile: the zone/stack aggregate and the abort table, as every channel fills
 * them and every writer (JSON, collapsed, CSV, ...) reads them. Plain data. */
#ifndef NUPP_PROFILE_H
#define NUPP_PROFILE_H

#include <stdbool.h>
#include <stdio.h>
#include <sys/types.h>
#include <linux/types.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Why a sample was not reported as a stack. Every sample not walked is counted. */
enum nupp_lost {
	NUPP_LOST_NO_VM,       /* a VM of a LuaJIT whose probes are not attached (unnamed) */
	NUPP_LOST_READ_FAULT,  /* bpf_probe_read_user failed (page not resident, bad pointer) */
	NUPP_LOST_BAD_FRAME,   /* a frame failed validation: walk refused, never guessed */
	NUPP_LOST_TRUNCATED,   /* a trace's inlined frames would not fit in the stack */
	NUPP_LOST_MAP_FULL,    /* the counts map was full (raise --max-stacks) */
	NUPP_LOST_SYMBOLIZE,   /* userspace could not name a frame (proto freed before drain) */
	NUPP_LOST__MAX
};

/* The name of a loss reason as it appears in reports ("noVm", "readFault", ...). */
const char *nupp_lost_name(enum nupp_lost r);

/* One distinct (zone path, stack) and what landed on it; the seed's profile.Sample. */
struct nupp_sample_row {
	char *zone_path; /* "" when no zone was open */
	char *stack;     /* frames outermost first, ";" between them */
	__u64 count;     /* = compiled + interpreted + ccode + collecting + compiling */
	__u64 compiled, interpreted, ccode, collecting, compiling;
};

/* The sample channel's result. */
struct nupp_sample_set {
	struct nupp_sample_row *rows;
	size_t n, cap;
	__u64 samples;               /* samples reported as stacks (sum of counts) */
	__u64 lost[NUPP_LOST__MAX];  /* samples not reported, by reason */
	/* Samples of host code: threads or moments outside every Lua VM, on "[host];..." rows
	 * (counted here also when those rows are left out). */
	__u64 host_samples;
	__u64 cut_samples; /* samples whose stack was deeper than the depth: "[truncated];..." */
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

/* Adds count (and the state split) to the row (zone, stack), creating it. 0 or -ENOMEM. */
int nupp_sample_set_add(struct nupp_sample_set *s, const char *zone, const char *stack,
			const struct nupp_sample_row *counts);
/* Sorts rows by count descending (ties: zone, then stack, ascending). */
void nupp_sample_set_sort(struct nupp_sample_set *s);
/* Frees the rows. */
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
 * such a frame is kept whole), merging rows that become equal. out must be empty. */
int nupp_sample_set_filter(const struct nupp_sample_set *in, const char *zone_prefix, const char *root,
			   struct nupp_sample_set *out);

/* What a profile file says about how it was made. */
struct nupp_profile_meta {
	const char *command;  /* the nupp-bpf command line */
	const char *target;   /* the profiled command line, or NULL for -p */
	const pid_t *pids;
	int npids;
	int frequency_hz;
	double duration_sec;
	const char *backend;  /* "bpf" */
	const char *luajit;   /* the LuaJIT build (nupp_luajit_build()) */
	int depth;
	bool aborts;          /* the trace channel ran */
	bool include_benign;
	const char *zone_filter, *root;
};

/* A whole profile: how it was made, the sample rows and the abort rows. What `record`
 * and a session's stop produce, what every writer renders and the JSON reader returns. */
struct nupp_profile {
	struct nupp_profile_meta meta;
	struct nupp_sample_set samples;
	struct nupp_abort_set aborts;
};

/* Writes the nupp profile JSON document (version 1): meta, samples, aborts. */
int nupp_write_profile_json(const struct nupp_profile_meta *m, const struct nupp_sample_set *s,
			    const struct nupp_abort_set *a, FILE *f);

/* Writes the rows as collapsed stacks ("a;b;c N\n", count descending, no comments). */
int nupp_write_collapsed(const struct nupp_sample_set *s, FILE *f);
/* Writes the abort rows as RFC 4180 CSV: header severity,count,reason,location,zonePath,
 * CRLF line ends, fields with comma/quote/CR/LF quoted, quotes doubled. */
int nupp_write_abort_csv(const struct nupp_abort_set *a, FILE *f);

#ifdef __cplusplus
}
#endif
#endif /* NUPP_PROFILE_H */
