/* libnupp internals shared between user/ files: logging, errors, ELF helpers. */
#ifndef NUPP_INTERNAL_H
#define NUPP_INTERNAL_H

#include <stddef.h>
#include <linux/types.h>
#include <sys/types.h>

#include "nupp/nupp.h"

#define NUPP_ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/* Sends a message to the print callback, if any. */
void nupp_pr(enum nupp_log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Records the message for the failure being returned; returns err. */
int nupp_fail(int err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* -- ELF (user/elf.c) -------------------------------------------------------- */

/* Looks up a symbol (dynsym, then symtab) in an ELF file: 0 and value/size, or -errno. */
int nupp_elf_sym(const char *path, const char *name, __u64 *value, __u64 *size);
/* Translates a virtual address of the ELF file into a file offset (via PT_LOAD). */
int nupp_elf_vaddr_to_off(const char *path, __u64 vaddr, __u64 *off);

/* -- /proc/PID/maps (user/elf.c) --------------------------------------------- */

struct nupp_map {
	__u64 start, end, offset;
	char perms[5];
	char path[512];
};

/* Reads /proc/PID/maps into a malloc'ed array; count or -errno. */
int nupp_maps_read(pid_t pid, struct nupp_map **maps);
/* The runtime address of a file offset of path in pid's maps, or 0. */
__u64 nupp_maps_addr(const struct nupp_map *maps, int n, const char *path, __u64 off);

#endif /* NUPP_INTERNAL_H */
