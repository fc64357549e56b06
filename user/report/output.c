/* Outputs that are never lost: formats by name and extension, paths checked before
 * any work, and each output written to a temporary file renamed into place. Where a path
 * leads, and who owns the file, is output_path.c's; this file never opens a path by name. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "nupp/nupp.h"
#include "nupp/profile.h"
#include "core/nupp_internal.h"
#include "output_internal.h"

/* -- Formats ------------------------------------------------------------------------ */

static const struct {
	const char *name;
	enum nupp_format fmt;
} output_names[] = {
	{ "json", NUPP_FMT_JSON },        { "collapsed", NUPP_FMT_COLLAPSED }, { "folded", NUPP_FMT_COLLAPSED },
	{ "svg", NUPP_FMT_SVG },          { "flamegraph", NUPP_FMT_SVG },      { "speedscope", NUPP_FMT_SPEEDSCOPE },
	{ "pprof", NUPP_FMT_PPROF },      { "top", NUPP_FMT_TOP },             { "csv", NUPP_FMT_CSV },
};

/* The format named name, or NUPP_FMT_NONE. */
enum nupp_format nupp_format_by_name(const char *name)
{
	size_t i;

	for (i = 0; i < NUPP_ARRAY_SIZE(output_names); i++)
		if (strcmp(name, output_names[i].name) == 0)
			return output_names[i].fmt;
	return NUPP_FMT_NONE;
}

/* The name of a format. */
const char *nupp_format_name(enum nupp_format fmt)
{
	size_t i;

	for (i = 0; i < NUPP_ARRAY_SIZE(output_names); i++)
		if (output_names[i].fmt == fmt)
			return output_names[i].name;
	return "unknown";
}

/* True if path ends in suffix. */
static bool output_ends(const char *path, const char *suffix)
{
	size_t n = strlen(path), m = strlen(suffix);

	return n > m && strcmp(path + n - m, suffix) == 0;
}

/* The format of an output file by its extension. */
enum nupp_format nupp_format_by_path(const char *path)
{
	if (strcmp(path, "-") == 0)
		return NUPP_FMT_COLLAPSED;
	if (output_ends(path, ".speedscope.json"))
		return NUPP_FMT_SPEEDSCOPE;
	if (output_ends(path, ".json"))
		return NUPP_FMT_JSON;
	if (output_ends(path, ".folded") || output_ends(path, ".collapsed") || output_ends(path, ".txt"))
		return NUPP_FMT_COLLAPSED;
	if (output_ends(path, ".svg"))
		return NUPP_FMT_SVG;
	if (output_ends(path, ".pb.gz") || output_ends(path, ".pprof"))
		return NUPP_FMT_PPROF;
	if (output_ends(path, ".csv"))
		return NUPP_FMT_CSV;
	return NUPP_FMT_NONE;
}

/* -- Paths ---------------------------------------------------------------------------- */

/* Checks that path can be written as an output (the rules of output_path.c). */
int nupp_output_check(const char *path)
{
	struct output_target t;
	int err;

	if (strcmp(path, "-") == 0)
		return 0;
	err = output_resolve(path, &t);
	if (err)
		return err;
	if (t.in_place) {
		if (faccessat(t.dirfd, t.name, W_OK, t.follow ? 0 : AT_SYMLINK_NOFOLLOW) != 0)
			err = nupp_fail(-errno, "cannot write %s: %s", path, strerror(errno));
	} else if (faccessat(t.dirfd, ".", W_OK | X_OK, 0) != 0) {
		err = nupp_fail(-errno, "cannot write %s: %s: %s", path, t.dir,
				errno == EACCES ? "no permission to create files in this folder" : strerror(errno));
	}
	output_target_close(&t);
	return err;
}

/* -- Writing ---------------------------------------------------------------------------- */

/* Fails the output path: with the writer's own message for what is not an I/O error
 * (-EINVAL: the data does not allow the format), else with the cause. */
static int output_failed(const char *path, int err)
{
	char why[1024];

	if (err == -EINVAL) {
		snprintf(why, sizeof(why), "%s", nupp_errmsg());
		return nupp_fail(err, "cannot write %s: %s", path, why);
	}
	return nupp_fail(err, "cannot write %s: %s%s", path, strerror(-err),
			 err == -ENOSPC ? " (nothing was written: free some space or write elsewhere)" : "");
}

/* Runs write_fn on f and flushes; 0 or -errno (the cause of a failed write, not EIO,
 * where the C library kept it in errno). */
static int output_run(FILE *f, int (*write_fn)(FILE *f, void *ctx), void *ctx)
{
	int err;

	errno = 0;
	err = write_fn(f, ctx);
	if (!err && fflush(f) != 0)
		err = -(errno ? errno : EIO);
	if (!err && ferror(f))
		err = -(errno ? errno : EIO);
	if (err == -EIO && errno && errno != EIO)
		err = -errno;
	return err;
}

/* Writes to stdout; a closed pipe is -EPIPE with its own message. */
static int output_stdout(int (*write_fn)(FILE *f, void *ctx), void *ctx)
{
	int err = output_run(stdout, write_fn, ctx);

	if (err == -EPIPE) {
		clearerr(stdout);
		return nupp_fail(err, "cannot write stdout: the reading end of the pipe was closed "
				      "(the output was cut short)");
	}
	if (err) {
		clearerr(stdout);
		return output_failed("stdout", err);
	}
	return 0;
}

/* Writes in place (a device, a FIFO, a /proc fd link: nothing to rename). */
static int output_in_place(const char *path, const struct output_target *t,
			   int (*write_fn)(FILE *f, void *ctx), void *ctx)
{
	/* A regular file behind a /proc fd link (-o /dev/stdout > file) is appended to, as
	 * the shell's own descriptor would write it; a device or a FIFO is opened as fopen "w". */
	int mode = t->follow && S_ISREG(t->st.st_mode) ? O_APPEND : O_TRUNC;
	int fd = openat(t->dirfd, t->name, O_WRONLY | O_CLOEXEC | mode | (t->follow ? 0 : O_NOFOLLOW));
	FILE *f;
	int err;

	if (fd < 0)
		return nupp_fail(-errno, "cannot write %s: %s", path, strerror(errno));
	f = fdopen(fd, "w");
	if (!f) {
		err = -errno;
		close(fd);
		return output_failed(path, err);
	}
	err = output_run(f, write_fn, ctx);
	if (fclose(f) && !err)
		err = -errno;
	return err ? output_failed(path, err) : 0;
}

/* Creates a new temporary file ".NAME.XXXXXX" beside t's file, never through a link;
 * its name in tmp. The fd, or -errno. */
static int output_temp(const struct output_target *t, char *tmp, size_t size)
{
	static const char digits[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
	unsigned char rnd[6];
	int tries, i, fd;

	for (tries = 0; tries < 100; tries++) {
		if (getrandom(rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd))
			return -EIO;
		snprintf(tmp, size, ".%.*s.XXXXXX", NAME_MAX - 8, t->name);
		for (i = 0; i < 6; i++)
			tmp[strlen(tmp) - 6 + i] = digits[rnd[i] % (sizeof(digits) - 1)];
		fd = openat(t->dirfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
		if (fd >= 0 || errno != EEXIST)
			return fd >= 0 ? fd : -errno;
	}
	return -EEXIST;
}

/* Writes one output atomically: a temporary file in the path's own folder, renamed onto
 * the path's own name (a trusted link's target, where the path was one). */
int nupp_output_write(const char *path, int (*write_fn)(FILE *f, void *ctx), void *ctx)
{
	char tmp[NAME_MAX + 16];
	struct output_target t;
	uid_t uid;
	gid_t gid;
	FILE *f;
	int fd, err;

	if (strcmp(path, "-") == 0)
		return output_stdout(write_fn, ctx);
	err = output_resolve(path, &t);
	if (err)
		return err;
	if (t.in_place) {
		err = output_in_place(path, &t, write_fn, ctx);
		output_target_close(&t);
		return err;
	}
	fd = output_temp(&t, tmp, sizeof(tmp));
	if (fd < 0) {
		err = fd == -EACCES ? nupp_fail(fd, "cannot write %s: %s: no permission to create files in this folder",
						path, t.dir)
				    : nupp_fail(fd, "cannot write %s: %s", path, strerror(-fd));
		output_target_close(&t);
		return err;
	}
	/* The owner and mode a file rewritten in place would keep; a new one is ours (the
	 * sudo user's under sudo) with the mode the umask gives. Never set-id bits. */
	output_owner(&t, &uid, &gid);
	if ((uid != geteuid() || gid != getegid()) && fchown(fd, uid, gid)) {
	}
	if (t.exists && fchmod(fd, t.st.st_mode & 0777)) {
	}
	f = fdopen(fd, "w");
	if (!f) {
		err = -errno;
		close(fd);
		goto fail;
	}
	err = output_run(f, write_fn, ctx);
	if (!err && fsync(fileno(f)) != 0 && errno != EINVAL && errno != EROFS)
		err = -errno;
	if (fclose(f) && !err)
		err = -errno;
	if (!err && renameat(t.dirfd, tmp, t.dirfd, t.name) != 0)
		err = -errno;
	if (!err) {
		output_target_close(&t);
		return 0;
	}
fail:
	unlinkat(t.dirfd, tmp, 0);
	output_target_close(&t);
	return output_failed(path, err);
}

/* -- Text ------------------------------------------------------------------------------- */

struct output_text {
	const char *text;
	size_t len;
};

/* write_fn of nupp_write_text_file. */
static int output_text_fn(FILE *f, void *ctx)
{
	const struct output_text *t = ctx;

	return fwrite(t->text, 1, t->len, f) == t->len ? 0 : -(errno ? errno : EIO);
}

/* Writes len bytes of text to path as every output is written. */
int nupp_write_text_file(const char *path, const char *text, size_t len)
{
	struct output_text t = { .text = text, .len = len };

	return nupp_output_write(path, output_text_fn, &t);
}

/* -- Profiles -------------------------------------------------------------------------- */

struct output_ctx {
	const struct nupp_profile *p;
	enum nupp_format fmt;
	const struct nupp_report_opts *o;
};

/* Writes p in format fmt to f. */
int nupp_profile_write(const struct nupp_profile *p, enum nupp_format fmt, const struct nupp_report_opts *o,
		       FILE *f)
{
	switch (fmt) {
	case NUPP_FMT_JSON:
		return nupp_write_profile_json(&p->meta, &p->samples, &p->aborts, f);
	case NUPP_FMT_COLLAPSED:
		return nupp_write_collapsed(&p->samples, f);
	case NUPP_FMT_SVG:
		return nupp_write_svg(p, o, f);
	case NUPP_FMT_SPEEDSCOPE:
		return nupp_write_speedscope(p, f);
	case NUPP_FMT_PPROF:
		return nupp_write_pprof(p, f);
	case NUPP_FMT_TOP:
		return nupp_write_top(p, o, f);
	case NUPP_FMT_CSV:
		return nupp_write_abort_csv(&p->aborts, f);
	case NUPP_FMT_NONE:
		break;
	}
	return nupp_fail(-EINVAL, "unknown output format");
}

/* write_fn of nupp_profile_write_file. */
static int output_profile(FILE *f, void *ctx)
{
	const struct output_ctx *c = ctx;

	return nupp_profile_write(c->p, c->fmt, c->o, f);
}

/* Writes p in format fmt (NONE: by path's extension) to path, atomically. */
int nupp_profile_write_file(const struct nupp_profile *p, const char *path, enum nupp_format fmt,
			    const struct nupp_report_opts *o)
{
	struct output_ctx c = { .p = p, .fmt = fmt ? fmt : nupp_format_by_path(path), .o = o };

	if (!c.fmt)
		return nupp_fail(-EINVAL,
				 "unknown output format for '%s': use .json, .folded or .txt, .svg, "
				 ".speedscope.json, .pb.gz, .csv, or give the format with -f",
				 path);
	return nupp_output_write(path, output_profile, &c);
}

/* Writes the nupp profile JSON document of p to path ("-": stdout), atomically: a
 * temporary file renamed into place, so a failed write leaves nothing half-written. */
int nupp_profile_write_json(const struct nupp_profile *p, const char *path)
{
	return nupp_profile_write_file(p, path, NUPP_FMT_JSON, NULL);
}
