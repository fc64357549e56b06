/* Where an output goes, resolved safely for a tool that runs as root: the path is walked
 * one name at a time from open folder descriptors, so nothing another user does between
 * the check and the write can redirect it, and a symbolic link on the way is followed
 * only when it belongs to root, to us or to the user who ran sudo. A link another user
 * planted (ln -s /etc/shadow /tmp/app.svg) is refused with its name and owner, whatever
 * fs.protected_symlinks says. Also the owner a new output gets under sudo.
 * Owns no file format and writes nothing: output.c writes through what this resolves. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>
#include <linux/magic.h>

#include "nupp/profile.h"
#include "core/nupp_internal.h"
#include "output_internal.h"

/* As many links as the kernel follows in one path (MAXSYMLINKS). */
#define OUTPUT_MAX_LINKS 40

/* -- Whom we trust ------------------------------------------------------------------ */

/* The user who ran sudo (SUDO_UID, SUDO_GID) when we run as root under sudo; false
 * otherwise (no sudo, not root, or sudo of root itself). */
bool output_sudo_user(uid_t *uid, gid_t *gid)
{
	const char *su = getenv("SUDO_UID"), *sg = getenv("SUDO_GID");
	char *end;
	unsigned long u, g;

	if (geteuid() != 0 || !su || !sg || !*su || !*sg)
		return false;
	errno = 0;
	u = strtoul(su, &end, 10);
	if (errno || *end || u == 0 || u >= (uid_t)-1)
		return false;
	g = strtoul(sg, &end, 10);
	if (errno || *end || g >= (gid_t)-1)
		return false;
	*uid = (uid_t)u;
	*gid = (gid_t)g;
	return true;
}

/* Whether a link or file owned by uid is ours to follow or keep: root's, our real or
 * effective user's, or that of the user who ran sudo. */
bool output_trusted(uid_t uid)
{
	uid_t su;
	gid_t sg;

	if (uid == 0 || uid == geteuid() || uid == getuid())
		return true;
	return output_sudo_user(&su, &sg) && uid == su;
}

/* -- Resolving ------------------------------------------------------------------------ */

/* Fails path because the link at shown (a path) belongs to another user. */
static int output_untrusted(const char *path, const char *shown, uid_t uid)
{
	struct passwd *pw = getpwuid(uid);
	char who[64];

	if (pw)
		snprintf(who, sizeof(who), "%s (uid %u)", pw->pw_name, (unsigned)uid);
	else
		snprintf(who, sizeof(who), "uid %u", (unsigned)uid);
	if (strcmp(path, shown) == 0)
		return nupp_fail(-EPERM,
				 "cannot write %s: it is a symbolic link owned by %s, another user: refusing to "
				 "follow it (remove the link, or write elsewhere)",
				 path, who);
	return nupp_fail(-EPERM,
			 "cannot write %s: %s is a symbolic link owned by %s, another user: refusing to "
			 "follow it (remove the link, or write elsewhere)",
			 path, shown, who);
}

/* Whether the folder open at dfd is in /proc, whose fd links (/proc/self/fd/1, behind
 * /dev/stdout) name pipes and terminals rather than paths and are opened as they are. */
static bool output_in_proc(int dfd)
{
	struct statfs sf;

	return fstatfs(dfd, &sf) == 0 && sf.f_type == PROC_SUPER_MAGIC;
}

/* Appends name and a slash to the shown folder path s (of size n). */
static void output_shown_add(char *s, size_t n, const char *name, size_t len)
{
	size_t k = strlen(s);

	if (k + len + 2 <= n) {
		memcpy(s + k, name, len);
		s[k + len] = '/';
		s[k + len + 1] = '\0';
	}
}

/* The folder part of a shown path, for messages ("." for none). */
static void output_shown_dir(const char *s, char *dir, size_t n)
{
	size_t k = strlen(s);

	if (!k)
		snprintf(dir, n, ".");
	else if (k == 1)
		snprintf(dir, n, "/");
	else
		snprintf(dir, n, "%.*s", (int)k - 1, s);
}

/* Resolves path into t: the folder its file is in, open, and the file's name there. */
int output_resolve(const char *path, struct output_target *t)
{
	char rest[2 * PATH_MAX], cur[2 * PATH_MAX], link[PATH_MAX], shown[PATH_MAX];
	char name[NAME_MAX + 1] = "";
	const char *p;
	int dfd, links = 0, err;

	memset(t, 0, sizeof(*t));
	t->dirfd = -1;
	if (!path[0])
		return nupp_fail(-EINVAL, "cannot write an output with an empty name");
	if (strlen(path) >= PATH_MAX)
		return nupp_fail(-ENAMETOOLONG, "cannot write %.64s...: the path is too long", path);
	if (path[strlen(path) - 1] == '/')
		return nupp_fail(-EISDIR, "cannot write %s: it names a folder, not a file", path);
	snprintf(rest, sizeof(rest), "%s", path);
	snprintf(shown, sizeof(shown), "%s", path[0] == '/' ? "/" : "");
	dfd = open(path[0] == '/' ? "/" : ".", O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return nupp_fail(-errno, "cannot write %s: %s", path, strerror(errno));
	p = rest;
	for (;;) {
		const char *next;
		struct stat st;
		size_t len;
		bool last;
		int nd;

		while (*p == '/')
			p++;
		next = strchr(p, '/');
		len = next ? (size_t)(next - p) : strlen(p);
		if (next)
			while (*next == '/')
				next++;
		last = !next || !*next;
		if (len > NAME_MAX) {
			err = nupp_fail(-ENAMETOOLONG, "cannot write %s: a name in it is too long", path);
			goto fail;
		}
		memcpy(name, p, len);
		name[len] = '\0';
		p = next ? next : p + len;
		if (last && (strcmp(name, ".") == 0 || strcmp(name, "..") == 0 || !len)) {
			err = nupp_fail(-EISDIR, "cannot write %s: it names a folder, not a file", path);
			goto fail;
		}
		if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0) {
			err = -errno;
			if (err == -ENOENT && last)
				break; /* a new file */
			snprintf(cur, sizeof(cur), "%s%s", shown, name);
			if (err == -ENOENT) {
				const char *slash = strrchr(path, '/');
				int dlen = slash && slash > path ? (int)(slash - path) : 1;

				/* The path's whole folder, as the user named it (mkdir -p makes it). */
				err = nupp_fail(err, "cannot write %s: the folder %.*s does not exist (create it first)",
						path, dlen, path);
			} else {
				err = nupp_fail(err, "cannot write %s: %s: %s", path, cur, strerror(-err));
			}
			goto fail;
		}
		if (S_ISLNK(st.st_mode)) {
			ssize_t n;

			snprintf(cur, sizeof(cur), "%s%s", shown, name);
			if (last && output_in_proc(dfd)) {
				t->exists = t->in_place = t->follow = true;
				if (fstatat(dfd, name, &t->st, 0) != 0) {
					err = nupp_fail(-errno, "cannot write %s: %s", path, strerror(errno));
					goto fail;
				}
				break;
			}
			if (!output_trusted(st.st_uid)) {
				err = output_untrusted(path, cur, st.st_uid);
				goto fail;
			}
			if (++links > OUTPUT_MAX_LINKS) {
				err = nupp_fail(-ELOOP, "cannot write %s: too many symbolic links", path);
				goto fail;
			}
			n = readlinkat(dfd, name, link, sizeof(link) - 1);
			if (n <= 0) {
				err = nupp_fail(n < 0 ? -errno : -ENOENT, "cannot write %s: %s: %s", path, cur,
						strerror(n < 0 ? errno : ENOENT));
				goto fail;
			}
			link[n] = '\0';
			/* The link's text, then what the path had after it. */
			if (strlen(link) + 1 + strlen(p) >= sizeof(cur)) {
				err = nupp_fail(-ENAMETOOLONG, "cannot write %s: the path is too long", path);
				goto fail;
			}
			{
				size_t ln = strlen(link), pn = strlen(p);

				memcpy(cur, link, ln);
				cur[ln] = '/';
				memcpy(cur + ln + (pn ? 1 : 0), p, pn + 1);
				memcpy(rest, cur, ln + pn + 2);
			}
			p = rest;
			if (link[0] == '/') {
				close(dfd);
				dfd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
				if (dfd < 0)
					return nupp_fail(-errno, "cannot write %s: /: %s", path, strerror(errno));
				snprintf(shown, sizeof(shown), "/");
			}
			continue;
		}
		if (last) {
			t->exists = true;
			t->st = st;
			if (S_ISDIR(st.st_mode)) {
				err = nupp_fail(-EISDIR, "cannot write %s: it is a folder (give a file name inside it)",
						path);
				goto fail;
			}
			t->in_place = !S_ISREG(st.st_mode); /* a device or a FIFO */
			break;
		}
		if (!S_ISDIR(st.st_mode)) {
			snprintf(cur, sizeof(cur), "%s%s", shown, name);
			err = nupp_fail(-ENOTDIR, "cannot write %s: %s is not a folder", path, cur);
			goto fail;
		}
		nd = openat(dfd, name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (nd < 0) {
			snprintf(cur, sizeof(cur), "%s%s", shown, name);
			err = nupp_fail(-errno, "cannot write %s: %s: %s", path, cur, strerror(errno));
			goto fail;
		}
		close(dfd);
		dfd = nd;
		output_shown_add(shown, sizeof(shown), name, len);
	}
	snprintf(t->name, sizeof(t->name), "%s", name);
	output_shown_dir(shown, t->dir, sizeof(t->dir));
	t->dirfd = dfd;
	return 0;
fail:
	close(dfd);
	return err;
}

/* Closes what output_resolve opened. */
void output_target_close(struct output_target *t)
{
	if (t->dirfd >= 0)
		close(t->dirfd);
	t->dirfd = -1;
}

/* -- The owner of what we write ------------------------------------------------------ */

/* The owner an output written at t gets: the existing file's when it is trusted (a
 * rewrite keeps it), else the sudo user's, else ours. */
void output_owner(const struct output_target *t, uid_t *uid, gid_t *gid)
{
	*uid = geteuid();
	*gid = getegid();
	if (t->exists && !t->in_place && output_trusted(t->st.st_uid)) {
		*uid = t->st.st_uid;
		*gid = t->st.st_gid;
		return;
	}
	output_sudo_user(uid, gid);
}
