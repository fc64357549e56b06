/* The process follower's BPF ABI (bpf/follow.bpf.c, user/core/session.c): the events it sends
 * when a followed process forks a child or execs a new program. Host C and BPF. */
#ifndef NUPP_FOLLOW_ABI_H
#define NUPP_FOLLOW_ABI_H

#ifndef __VMLINUX_H__
#include <linux/types.h>
#endif

#define NUPP_FOLLOW_MAX_PROCS 4096 /* processes followed at once */
#define NUPP_FOLLOW_PATH_MAX 256   /* bytes of an exec'ed file name kept */

/* The values of the follower's map of processes (tgid -> value), which the trace
 * channel reads as its tgid filter (bpf/trace.bpf.c). */
enum nupp_follow_value {
	NUPP_FOLLOW_PROFILED = 1, /* profiled: the command, and its children with subprocesses */
	NUPP_FOLLOW_WATCHED = 2,  /* only watched for an exec of our LuaJIT (to be named) */
};

enum nupp_follow_kind {
	NUPP_FOLLOW_FORK = 1, /* pid is a new child of ppid (a process, not a thread) */
	NUPP_FOLLOW_EXEC = 2, /* pid exec'ed path */
	NUPP_FOLLOW_EXIT = 3, /* pid's last thread exited */
};

struct nupp_follow_event {
	__u32 kind;
	__u32 pid;
	__u32 ppid;
	__u32 pad;
	char path[NUPP_FOLLOW_PATH_MAX];
};

#endif /* NUPP_FOLLOW_ABI_H */
