/* nupp-bpf dump: where each thread of a LuaJIT process is right now. A thread off CPU
 * (blocked in a system call, waiting, stopped) is read from memory at its saved state
 * (nupp_dump_read); a thread on a CPU is sampled for a moment (--sample-ms), twice at
 * once, naming frames by function and by line, and its most frequent stack is shown with
 * how many of its samples had it. Text (innermost frame first, as a backtrace) or JSON. */
#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "nupp/dump.h"
#include "nupp/nupp.h"
#include "nupp/profile.h"
#include "report/report_internal.h"
#include "cli.h"

struct dump_opts {
	pid_t pid;
	bool locals, json, full_filenames;
	int sample_ms;
};

/* What sampling found for one running thread. */
struct dump_sampled {
	pid_t tid;
	__u64 count, all;  /* samples of the stack shown, of the thread */
	char *names, *lines; /* the stack by function and by line, outermost first */
	char *zone;
	const char *state;
};

static void dump_usage(FILE *f)
{
	fprintf(f,
		"USAGE\n"
		"  nupp-bpf dump [options] -p PID\n\n"
		"Prints, for every thread of a process running our LuaJIT build, the Lua stack it\n"
		"runs now (innermost frame first: function, file:line), its VM state and zone path.\n"
		"A thread off CPU (blocked in a system call, waiting, stopped) is read from memory\n"
		"at its saved state; a thread on a CPU is sampled for a moment and shown with how\n"
		"many of its samples had that stack. The process is not stopped: what is read is\n"
		"the running process's memory, read once.\n\n"
		"OPTIONS\n"
		"  -p, --pid PID        the process\n"
		"      --locals         each Lua frame's local variables (threads read from memory)\n"
		"      --json           one JSON document (frames outermost first)\n"
		"      --sample-ms MS   how long threads on a CPU are sampled (default 300)\n"
		"      --full-filenames name Lua frames by the chunk's full path\n\n"
		"EXAMPLES\n"
		"  sudo nupp-bpf dump -p $(pgrep -n luajit)\n"
		"  sudo nupp-bpf dump --locals --json -p 1234 | jq .\n");
}

static int dump_parse(int argc, char **argv, struct dump_opts *o)
{
	enum { O_LOCALS = 256, O_JSON, O_SAMPLE, O_FULL };
	static const struct option opts[] = {
		{ "pid", required_argument, NULL, 'p' },
		{ "locals", no_argument, NULL, O_LOCALS },
		{ "json", no_argument, NULL, O_JSON },
		{ "sample-ms", required_argument, NULL, O_SAMPLE },
		{ "full-filenames", no_argument, NULL, O_FULL },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	long v;
	int c;

	while ((c = getopt_long(argc, argv, "p:h", opts, NULL)) != -1) {
		switch (c) {
		case 'p':
			if (!cli_pid_opt(optarg, &o->pid))
				return 2;
			break;
		case O_LOCALS:
			o->locals = true;
			break;
		case O_JSON:
			o->json = true;
			break;
		case O_FULL:
			o->full_filenames = true;
			break;
		case O_SAMPLE:
			if (!cli_int(optarg, 10, 60000, &v)) {
				cli_error("invalid --sample-ms '%s': expected 10..60000", optarg);
				return 2;
			}
			o->sample_ms = (int)v;
			break;
		case 'h':
			dump_usage(stdout);
			return -1;
		default:
			dump_usage(stderr);
			return 2;
		}
	}
	if (!o->pid && optind < argc && cli_int(argv[optind], 1, 4194304, &v))
		o->pid = (pid_t)v, optind++;
	if (!o->pid || optind < argc) {
		cli_error(o->pid ? "unexpected argument '%s'" : "nothing to dump: give -p PID", o->pid ? argv[optind] : "");
		dump_usage(stderr);
		return 2;
	}
	return 0;
}

/* -- Sampling the threads on a CPU ------------------------------------------ */

/* The name of the state most of a row's samples were in (the report's legend names). */
static const char *dump_row_state(const struct nupp_sample_row *r)
{
	int i, best = 0;

	for (i = 1; i < NUPP_RS__MAX; i++)
		if (nupp_rstate_of(r, i) > nupp_rstate_of(r, best))
			best = i;
	return nupp_rstate_of(r, best) ? nupp_rstate_label(best) : "unknown";
}

/* Samples pid for ms with two sessions (frames by function, by line) and fills s[i] for
 * each running thread. 0, or 1 after printing the error. */
static int dump_sample(pid_t pid, int ms, bool full, struct dump_sampled *s, int n)
{
	struct nupp_session *ses[2] = { NULL, NULL };
	struct nupp_profile *p[2] = { NULL, NULL };
	char why[512];
	double end;
	int k, i, err = 0, ret = 1;
	size_t r;

	if (nupp_available(-1, why, sizeof(why))) {
		cli_error("cannot sample the threads on a CPU: %s", why);
		return 1;
	}
	for (k = 0; k < 2; k++) {
		struct nupp_session_opts so = { .sz = sizeof(so), .samples = true, .freq_hz = 997, .lines = k == 1,
						.drain_ms = 100, .full_filenames = full };

		ses[k] = nupp_session_open(&so, &err);
		if (!ses[k] || nupp_session_attach(ses[k], pid)) {
			cli_error("cannot sample PID %d: %s", (int)pid, nupp_errmsg());
			goto out;
		}
	}
	for (k = 0; k < 2; k++)
		nupp_session_start(ses[k]);
	end = cli_now() + ms / 1000.0;
	while (cli_now() < end)
		for (k = 0; k < 2; k++)
			nupp_session_poll(ses[k], cli_wait_until(20, end, cli_now()));
	for (k = 0; k < 2; k++) {
		p[k] = nupp_session_stop(ses[k], &err);
		if (!p[k]) {
			cli_error("reading the samples failed: %s", nupp_errmsg());
			goto out;
		}
	}
	for (i = 0; i < n; i++)
		for (k = 0; k < 2; k++) {
			__u64 best = 0, all = 0;
			const struct nupp_sample_row *b = NULL;

			for (r = 0; r < p[k]->samples.n; r++) {
				const struct nupp_sample_row *row = &p[k]->samples.rows[r];

				if (row->tid != s[i].tid)
					continue;
				all += row->count;
				if (row->count > best)
					best = row->count, b = row;
			}
			if (!b)
				continue;
			if (k == 0) {
				s[i].names = strdup(b->stack);
				s[i].zone = strdup(b->zone_path ? b->zone_path : "");
				s[i].state = dump_row_state(b);
				s[i].count = best;
				s[i].all = all;
			} else {
				s[i].lines = strdup(b->stack);
			}
		}
	ret = 0;
out:
	if (ses[0] || ses[1])
		cli_close_later();
	for (k = 0; k < 2; k++) {
		nupp_session_profile_free(p[k]);
		nupp_session_close(ses[k]);
	}
	return ret;
}

/* -- Output ------------------------------------------------------------------ */

/* The frames of a sampled stack "a;b;c" (outermost first) as new strings; their count. */
static int dump_split(const char *stack, char ***out)
{
	int n = 1, i = 0;
	const char *p;
	char **v;

	*out = NULL;
	if (!stack || !*stack)
		return 0;
	for (p = stack; *p; p++)
		n += *p == ';';
	v = calloc((size_t)n, sizeof(*v));
	if (!v)
		return 0;
	for (p = stack; i < n; i++) {
		size_t len = strcspn(p, ";");

		v[i] = strndup(p, len);
		p += len + (p[len] == ';');
	}
	*out = v;
	return n;
}

static void dump_free_split(char **v, int n)
{
	int i;

	for (i = 0; i < n; i++)
		free(v[i]);
	free(v);
}

/* How a thread waits, in words. */
static void dump_how(const struct nupp_dump_thread *t, char *buf, size_t size)
{
	if (t->how == NUPP_DUMP_RUNNING)
		snprintf(buf, size, "on a CPU");
	else if (t->syscall >= 0)
		snprintf(buf, size, "blocked in system call %ld (state %c)", t->syscall, t->state);
	else
		snprintf(buf, size, "off CPU (state %c)", t->state);
}

static void dump_text_thread(const struct nupp_dump_thread *t, const struct dump_sampled *s, bool locals, FILE *f)
{
	char how[96];
	int i, j;

	dump_how(t, how, sizeof(how));
	fprintf(f, "Thread %d \"%s\": %s", (int)t->tid, t->comm, how);
	if (t->how == NUPP_DUMP_RUNNING) {
		char **names = NULL, **lines = NULL;
		int nn, nl;

		if (!s || !s->names) {
			fprintf(f, "; no sample of it in Lua or host code was taken\n\n");
			return;
		}
		nn = dump_split(s->names, &names);
		nl = dump_split(s->lines, &lines);
		fprintf(f, "; sampled: %llu of its %llu samples had this stack; %s", (unsigned long long)s->count,
			(unsigned long long)s->all, s->state);
		if (s->zone && *s->zone)
			fprintf(f, "; zone %s", s->zone);
		fprintf(f, "\n");
		for (i = nn - 1; i >= 0; i--) {
			const char *w = nl == nn && strcmp(lines[i], names[i]) ? lines[i] : NULL;

			if (w)
				fprintf(f, "    %-40s %s\n", names[i], w);
			else
				fprintf(f, "    %s\n", names[i]);
		}
		dump_free_split(names, nn);
		dump_free_split(lines, nl);
		if (locals)
			fprintf(f, "    (locals: not read, the thread was on a CPU)\n");
		fprintf(f, "\n");
		return;
	}
	if (t->how == NUPP_DUMP_HOST) {
		fprintf(f, "; in no Lua VM (host code)\n");
	} else {
		fprintf(f, "; read from memory; VM %#llx, %s", (unsigned long long)t->g, t->vmstate ? t->vmstate : "?");
		if (t->zone && *t->zone)
			fprintf(f, "; zone %s", t->zone);
		fprintf(f, "\n");
	}
	if (t->how == NUPP_DUMP_FAILED)
		fprintf(f, "    (no stack: %s)\n", t->why);
	for (i = t->nframes - 1; i >= 0; i--) {
		const struct nupp_dump_frame *fr = &t->frames[i];

		if (fr->where)
			fprintf(f, "    %-40s %s\n", fr->name, fr->where);
		else
			fprintf(f, "    %s\n", fr->name);
		for (j = 0; j < fr->nlocals; j++)
			fprintf(f, "        %s = %s\n", fr->locals[j].name, fr->locals[j].value);
	}
	fprintf(f, "\n");
}

/* The JSON of one thread, or NULL on ENOMEM. */
static json_t *dump_json_thread(const struct nupp_dump_thread *t, const struct dump_sampled *s)
{
	static const char *const hows[] = { "memory", "sampled", "host", "failed" };
	json_t *o = json_object(), *frames = json_array();
	int i, j;

	if (!o || !frames) {
		json_decref(o);
		json_decref(frames);
		return NULL;
	}
	json_object_set_new(o, "tid", json_integer(t->tid));
	json_object_set_new(o, "name", json_string(t->comm));
	json_object_set_new(o, "state", json_stringn(&t->state, 1));
	json_object_set_new(o, "syscall", t->syscall >= 0 ? json_integer(t->syscall) : json_null());
	json_object_set_new(o, "how", json_string(hows[t->how]));
	if (t->how == NUPP_DUMP_RUNNING) {
		char **names = NULL, **lines = NULL;
		int nn = s ? dump_split(s->names, &names) : 0, nl = s ? dump_split(s->lines, &lines) : 0;

		json_object_set_new(o, "vmState", s && s->names ? json_string(s->state) : json_null());
		json_object_set_new(o, "zonePath", s && s->zone ? json_string(s->zone) : json_null());
		json_object_set_new(o, "samples", json_integer(s ? (json_int_t)s->all : 0));
		json_object_set_new(o, "samplesOfStack", json_integer(s ? (json_int_t)s->count : 0));
		for (i = 0; i < nn; i++) {
			json_t *fr = json_object();

			bool lua = nl == nn && strcmp(lines[i], names[i]);

			/* A frame the line sampler names apart is a Lua function's; no locals are
			 * read for a thread on a CPU. */
			json_object_set_new(fr, "name", json_string(names[i]));
			json_object_set_new(fr, "where", lua ? json_string(lines[i]) : json_null());
			json_object_set_new(fr, "lua", json_boolean(lua));
			json_object_set_new(fr, "locals", json_array());
			json_array_append_new(frames, fr);
		}
		dump_free_split(names, nn);
		dump_free_split(lines, nl);
	} else {
		json_object_set_new(o, "vmState", t->vmstate ? json_string(t->vmstate) : json_null());
		json_object_set_new(o, "zonePath", t->zone ? json_string(t->zone) : json_null());
		if (t->why)
			json_object_set_new(o, "why", json_string(t->why));
		for (i = 0; i < t->nframes; i++) {
			const struct nupp_dump_frame *f = &t->frames[i];
			json_t *fr = json_object(), *locals = json_array();

			json_object_set_new(fr, "name", json_string(f->name));
			json_object_set_new(fr, "where", f->where ? json_string(f->where) : json_null());
			json_object_set_new(fr, "lua", json_boolean(f->lua));
			/* An array: a local may shadow another of the same name. */
			for (j = 0; j < f->nlocals; j++)
				json_array_append_new(locals, json_pack("{s:s,s:s}", "name", f->locals[j].name, "value",
									f->locals[j].value));
			json_object_set_new(fr, "locals", locals);
			json_array_append_new(frames, fr);
		}
	}
	json_object_set_new(o, "frames", frames);
	return o;
}

/* -- The run ------------------------------------------------------------------ */

int cmd_dump(int argc, char **argv)
{
	struct dump_opts o = { .sample_ms = 300 };
	struct nupp_dump_opts dopts = { .sz = sizeof(dopts) };
	struct dump_sampled *s = NULL;
	struct nupp_dump *d = NULL;
	int ret, i, nrun = 0, err;

	ret = dump_parse(argc, argv, &o);
	if (ret)
		return ret < 0 ? 0 : ret;
	signal(SIGPIPE, SIG_IGN);
	if (kill(o.pid, 0) && errno == ESRCH) {
		cli_error("cannot dump PID %d: no such process", (int)o.pid);
		return 1;
	}
	dopts.locals = o.locals;
	dopts.full_filenames = o.full_filenames;
	err = nupp_dump_read(o.pid, &dopts, &d);
	if (err) {
		cli_error("cannot dump PID %d: %s", (int)o.pid, nupp_errmsg());
		fprintf(stderr, "nupp-bpf: 'nupp-bpf doctor -p %d' checks what this machine, these privileges or "
				"the target lack\n", (int)o.pid);
		return 1;
	}
	s = calloc((size_t)d->nthreads + 1, sizeof(*s));
	if (!s) {
		cli_error("out of memory");
		nupp_dump_free(d);
		return 1;
	}
	for (i = 0; i < d->nthreads; i++) {
		s[i].tid = d->threads[i].tid;
		nrun += d->threads[i].how == NUPP_DUMP_RUNNING;
	}
	ret = 0;
	if (nrun && dump_sample(o.pid, o.sample_ms, o.full_filenames, s, d->nthreads))
		ret = 1; /* the threads read from memory are still printed */
	if (o.json) {
		json_t *doc = json_object(), *threads = json_array();

		json_object_set_new(doc, "pid", json_integer(o.pid));
		json_object_set_new(doc, "readFromRunningProcess", json_true());
		for (i = 0; i < d->nthreads; i++)
			json_array_append_new(threads, dump_json_thread(&d->threads[i], &s[i]));
		json_object_set_new(doc, "threads", threads);
		if (json_dumpf(doc, stdout, JSON_INDENT(2)) || fputc('\n', stdout) == EOF)
			ret = 1;
		json_decref(doc);
	} else {
		printf("Process %d: %d thread%s, read from the running process (not stopped)\n\n", (int)o.pid,
		       d->nthreads, d->nthreads == 1 ? "" : "s");
		for (i = 0; i < d->nthreads; i++)
			dump_text_thread(&d->threads[i], &s[i], o.locals, stdout);
	}
	if (fflush(stdout)) {
		cli_error("cannot write the dump: %s", strerror(errno));
		ret = 1;
	}
	for (i = 0; i < d->nthreads; i++) {
		free(s[i].names);
		free(s[i].lines);
		free(s[i].zone);
	}
	free(s);
	nupp_dump_free(d);
	return ret;
}
