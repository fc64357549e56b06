/* Internals of the output writer (output.c) and its path resolution (output_path.c):
 * where an output goes and who owns it. */
#ifndef NUPP_OUTPUT_INTERNAL_H
#define NUPP_OUTPUT_INTERNAL_H

#include <limits.h>
#include <stdbool.h>
#include <sys/stat.h>
#include <sys/types.h>

struct output_target {
	int dirfd;               /* the folder the file is in (O_PATH), or -1 */
	char name[NAME_MAX + 1]; /* the file's name in it */
	char dir[PATH_MAX];      /* the folder as a path, for messages */
	bool exists;             /* the name exists: st is its status */
	bool in_place;           /* a device, a FIFO or a /proc fd link: opened and written as
				  * it is, not replaced by a rename */
	bool follow;             /* opening it follows a /proc fd link */
	struct stat st;
};

/* Resolves path: its folder walked one name at a time, following only symbolic links
 * owned by root, by us or by the sudo user; the last name must not be a folder. 0, or
 * -errno with nupp_errmsg() "cannot write PATH: why" (-EPERM: a link another user owns). */
int output_resolve(const char *path, struct output_target *t);
void output_target_close(struct output_target *t);

/* Whether something owned by uid is trusted: root, our real or effective user, the sudo user. */
bool output_trusted(uid_t uid);
/* The user who ran sudo, when we run as root under sudo. */
bool output_sudo_user(uid_t *uid, gid_t *gid);
/* The owner an output at t gets. */
void output_owner(const struct output_target *t, uid_t *uid, gid_t *gid);

#endif
