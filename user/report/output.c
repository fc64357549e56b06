/* Outputs that are never lost: formats by name and extension, paths checked before
 * any work, and each output written to a temporary file renamed into place. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "nupp/nupp.h"
#include "nupp/profile.h"
#include "core/nupp_internal.h"

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

/* The folder of path into dir ("." for a bare name). */
static void output_dir(const char *path, char *dir, size_t size)
{
	const char *slash = strrchr(path, '/');

	if (!slash)
		snprintf(dir, size, ".");
	else
		snprintf(dir, size, "%.*s", slash == path ? 1 : (int)(slash - path), path);
}

/* Checks that path can be written as an output. */
int nupp_output_check(const char *path)
{
	char dir[PATH_MAX], real[PATH_MAX];
	struct stat st;

	if (strcmp(path, "-") == 0)
		return 0;
	if (!path[0])
		return nupp_fail(-EINVAL, "cannot write an output with an empty name");
	if (path[strlen(path) - 1] == '/')
		return nupp_fail(-EISDIR, "cannot write %s: it names a folder, not a file", path);
	if (stat(path, &st) == 0) {
		if (S_ISDIR(st.st_mode))
			return nupp_fail(-EISDIR, "cannot write %s: it is a folder (give a file name inside it)", path);
		if (access(path, W_OK) != 0)
			return nupp_fail(-errno, "cannot write %s: %s", path, strerror(errno));
		if (!S_ISREG(st.st_mode))
			return 0; /* a device or a FIFO: written in place */
		if (realpath(path, real))
			path = real; /* a symlink: its target is replaced */
	}
	output_dir(path, dir, sizeof(dir));
	if (stat(dir, &st) != 0) {
		if (errno == ENOENT)
			return nupp_fail(-ENOENT, "cannot write %s: the folder %s does not exist (create it first)", path,
					 dir);
		return nupp_fail(-errno, "cannot write %s: %s: %s", path, dir, strerror(errno));
	}
	if (!S_ISDIR(st.st_mode))
		return nupp_fail(-ENOTDIR, "cannot write %s: %s is not a folder", path, dir);
	if (access(dir, W_OK | X_OK) != 0)
		return nupp_fail(-errno, "cannot write %s: %s: %s", path, dir,
				 errno == EACCES ? "no permission to create files in this folder" : strerror(errno));
	return 0;
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

/* Writes in place (a device or a FIFO: nothing to rename). */
static int output_in_place(const char *path, int (*write_fn)(FILE *f, void *ctx), void *ctx)
{
	FILE *f = fopen(path, "we");
	int err;

	if (!f)
		return nupp_fail(-errno, "cannot write %s: %s", path, strerror(errno));
	err = output_run(f, write_fn, ctx);
	if (fclose(f) && !err)
		err = -errno;
	return err ? output_failed(path, err) : 0;
}

/* Writes one output atomically. */
int nupp_output_write(const char *path, int (*write_fn)(FILE *f, void *ctx), void *ctx)
{
	char real[PATH_MAX], tmp[PATH_MAX + 32];
	const char *target = path, *base;
	struct stat st;
	bool exists;
	mode_t mask;
	FILE *f;
	int fd, err;

	if (strcmp(path, "-") == 0)
		return output_stdout(write_fn, ctx);
	exists = stat(path, &st) == 0;
	if (exists && S_ISDIR(st.st_mode))
		return nupp_fail(-EISDIR, "cannot write %s: it is a folder (give a file name inside it)", path);
	if (exists && !S_ISREG(st.st_mode))
		return output_in_place(path, write_fn, ctx);
	if (exists && realpath(path, real))
		target = real;
	base = strrchr(target, '/');
	if (base)
		snprintf(tmp, sizeof(tmp), "%.*s.%s.XXXXXX", (int)(base + 1 - target), target, base + 1);
	else
		snprintf(tmp, sizeof(tmp), ".%s.XXXXXX", target);
	fd = mkostemp(tmp, O_CLOEXEC);
	if (fd < 0)
		return nupp_fail(-errno, "cannot write %s: %s", path, strerror(errno));
	/* The mode (and owner, for root) a file created or rewritten in place would have. */
	mask = umask(0);
	umask(mask);
	if (fchmod(fd, exists ? (st.st_mode & 07777) : (0666 & ~mask))) {
	}
	if (exists && geteuid() == 0 && fchown(fd, st.st_uid, st.st_gid)) {
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
	if (!err && rename(tmp, target) != 0)
		err = -errno;
	if (!err)
		return 0;
fail:
	unlink(tmp);
	return output_failed(path, err);
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
