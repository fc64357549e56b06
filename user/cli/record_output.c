/* record's outputs and what it prints about them: checking each can be written before
 * recording, writing them all (one failing does not stop the others), the status line
 * while recording, and the summary and warnings at the end. It starts no recording:
 * user/cli/cmd_record.c does. */
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "record.h"

/* -- Writing --------------------------------------------------------------- */

/* The format of output path: forced by -f, else by its extension (NONE: unknown). */
enum nupp_format record_format(const struct record_opts *o, const char *path)
{
	return o->format ? o->format : nupp_format_by_path(path);
}

/* Checks that an output can be written (its folder exists and is writable, it is not a
 * folder), so a profile is never recorded only to be lost at the end; 0, or 1 after
 * the error. */
int record_check_output(const char *path)
{
	if (path && nupp_output_check(path)) {
		cli_error("%s", nupp_errmsg());
		return 1;
	}
	return 0;
}

/* Writes every output and the abort CSV, each on its own (one that fails does not
 * stop the others); failed[i] says which failed (index noutputs: the CSV). Returns
 * how many failed, after printing each error. */
int record_write(const struct record_opts *o, const struct nupp_profile *prof, bool *failed)
{
	struct nupp_report_opts ro = { .sz = sizeof(ro), .top = o->top };
	int i, nfailed = 0;

	for (i = 0; i < o->noutputs; i++) {
		failed[i] = nupp_profile_write_file(prof, o->outputs[i], record_format(o, o->outputs[i]), &ro) != 0;
		if (failed[i]) {
			cli_error("%s", nupp_errmsg());
			nfailed++;
		}
	}
	failed[o->noutputs] = o->aborts_csv && nupp_profile_write_file(prof, o->aborts_csv, NUPP_FMT_CSV, &ro);
	if (failed[o->noutputs]) {
		cli_error("%s", nupp_errmsg());
		nfailed++;
	}
	return nfailed;
}

/* -- What is printed about them -------------------------------------------- */

/* The current folder, for the file:// hint ("." if unknown). */
static const char *record_cwd(void)
{
	static char cwd[PATH_MAX];

	return getcwd(cwd, sizeof(cwd)) ? cwd : ".";
}

/* The status line on stderr while recording on a terminal: elapsed, samples, lost,
 * aborts; rewritten in place (and cleared with done). */
void record_status(struct nupp_session *ses, double secs, bool done)
{
	struct nupp_trace_counters tc = { 0 };
	struct nupp_trace *tr = nupp_session_trace(ses);
	unsigned long long t[9] = { 0 }, lost = 0;
	struct nupp_profile *p;
	int i, err;

	if (done) {
		fputs("\r\033[K", stderr);
		return;
	}
	p = nupp_session_snapshot(ses, &err);
	if (p) {
		nupp_profile_totals(p, t);
		nupp_session_profile_free(p);
	}
	for (i = 3; i < 9; i++)
		lost += t[i];
	if (tr)
		nupp_trace_counters(tr, &tc);
	fprintf(stderr, "\r\033[Knupp-bpf: %.0f s, %llu samples, %llu lost", secs, t[0], lost);
	if (tr)
		fprintf(stderr, ", %llu trace aborts", (unsigned long long)tc.total_aborts);
	fputs(" (Ctrl-C to stop)", stderr);
	fflush(stderr);
}

/* What each loss reason means and what to do about it, in the reasons' order. */
static const char *const lost_what[NUPP_LOST__MAX][2] = {
#define REC_LOST_TEXT(id, name, what, remedy) [NUPP_LOST_##id] = { what, remedy },
	NUPP_LOSTDEF(REC_LOST_TEXT)
#undef REC_LOST_TEXT
};

/* Warns of each reason that lost 1 % or more of the samples (at least 10): what it means
 * and what to do. Fewer are the walks' expected share and only counted. */
static void record_lost_warnings(const struct nupp_sample_set *set, __u64 lost)
{
	__u64 all = set->samples + lost;
	int i;

	for (i = 0; i < NUPP_LOST__MAX; i++)
		if (set->lost[i] >= 10 && set->lost[i] * 100 >= all)
			fprintf(stderr, "nupp-bpf: warning: %.1f %% of the samples were lost as %s (%s): %s\n",
				100.0 * (double)set->lost[i] / (double)all, nupp_lost_name(i), lost_what[i][0],
				lost_what[i][1]);
}

/* Prints the final summary line(s) on stderr: what was written, and what failed. */
void record_summary(const struct record_opts *o, const struct nupp_sample_set *set,
			   const struct nupp_abort_set *ab, double secs, const bool *failed)
{
	char lost[256] = "", files[1024] = "", bad[1024] = "";
	__u64 total = 0;
	int i;

	for (i = 0; i < NUPP_LOST__MAX; i++) {
		total += set->lost[i];
		if (set->lost[i])
			snprintf(lost + strlen(lost), sizeof(lost) - strlen(lost), "%s%s %llu", lost[0] ? ", " : "",
				 nupp_lost_name(i), (unsigned long long)set->lost[i]);
	}
	for (i = 0; i < o->noutputs; i++) {
		char *buf = failed[i] ? bad : files;

		snprintf(buf + strlen(buf), sizeof(files) - strlen(buf), "%s%s", buf[0] ? ", " : "",
			 strcmp(o->outputs[i], "-") == 0 ? "stdout" : o->outputs[i]);
	}
	fprintf(stderr, "nupp-bpf: %s%s%s%s%s: %llu samples in %zu stacks over %.1f s, lost %llu%s%s%s\n",
		files[0] ? "wrote " : "", files, files[0] && bad[0] ? "; " : "", bad[0] ? "FAILED to write " : "", bad,
		(unsigned long long)set->samples, set->n, secs, (unsigned long long)total, lost[0] ? " (" : "", lost,
		lost[0] ? ")" : "");
	record_lost_warnings(set, total);
	if (o->aborts)
		fprintf(stderr, "nupp-bpf: %llu trace aborts, %llu blacklisted, %zu distinct sites%s%s\n",
			(unsigned long long)ab->total_aborts, (unsigned long long)ab->blacklisted, ab->n,
			!o->aborts_csv ? "" : failed[o->noutputs] ? ", FAILED to write " : ", written to ",
			o->aborts_csv ? o->aborts_csv : "");
	for (i = 0; i < o->noutputs; i++)
		if (!failed[i] && record_format(o, o->outputs[i]) == NUPP_FMT_SVG && strcmp(o->outputs[i], "-"))
			fprintf(stderr, "nupp-bpf: open the flame graph in a web browser: xdg-open %s (or file://%s%s%s)\n",
				o->outputs[i], o->outputs[i][0] == '/' ? "" : record_cwd(), o->outputs[i][0] == '/' ? "" : "/",
				o->outputs[i]);
}

/* Prints the warnings of a finished session: children not followed. */
void record_warnings(const struct record_opts *o, struct nupp_session *ses)
{
	unsigned long long forks, too_many;
	const char *c;
	int i;

	if (o->quiet)
		return;
	for (i = 0; (c = nupp_session_unfollowed(ses, i)); i++)
		fprintf(stderr, "nupp-bpf: warning: child process %s ran our LuaJIT and was not followed "
			"(--subprocesses follows it)\n", c);
	nupp_session_not_profiled(ses, &forks, &too_many);
	if (forks)
		fprintf(stderr, "nupp-bpf: warning: %llu forked child process%s ran the Lua VM of %s parent and %s "
			"not followed (--subprocesses follows them)\n", forks, forks == 1 ? "" : "es",
			forks == 1 ? "its" : "their", forks == 1 ? "was" : "were");
	if (too_many)
		fprintf(stderr, "nupp-bpf: warning: %llu process%s not profiled: too many were profiled at once\n",
			too_many, too_many == 1 ? " was" : "es were");
}
