/* The nupp-bpf CLI: the command table and helpers shared by the cmd_*.c files. */
#ifndef NUPP_CLI_H
#define NUPP_CLI_H

#include <stdbool.h>
#include <stdio.h>
#include <sys/types.h>

struct cli_cmd {
	const char *name;
	int (*fn)(int argc, char **argv);
	const char *help;
};

extern int cli_verbose;

/* Prints "Error: <message>" on stderr; the one error printer of the CLI. */
void cli_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

struct nupp_profile;

/* Prints why hot code ran interpreted (report --why, record --why; user/cli/why_view.c):
 * text or JSON on f. 0, or 1 after printing the error. */
int cli_why(const struct nupp_profile *p, bool json, FILE *f);

/* Parses a decimal integer option within [lo, hi]; false on error. */
bool cli_int(const char *s, long lo, long hi, long *out);

/* Adds the path of an -o option to outputs (n of at most max); false after printing the error. */
bool cli_output_opt(const char *path, const char **outputs, int *n, int max);

/* Parses -f FMT into *fmt; csv (the abort table) only where allow_csv; false after printing the error. */
bool cli_format_opt(const char *name, bool allow_csv, int *fmt);

/* Parses --top N into *top; false after printing the error. */
bool cli_top_opt(const char *s, int *top);

/* Parse -p PID, -F HZ, --depth N (1..NUPP_SMP_MAX_DEPTH); false after printing the error. */
bool cli_pid_opt(const char *s, pid_t *pid);
bool cli_freq_opt(const char *s, int *hz);
bool cli_depth_opt(const char *s, int *depth);

/* -- The processes the profiling commands start, and their clock (cli_proc.c) -- */

/* Forks the command, blocked on a gate until the probes are attached (run as the
 * invoking user under sudo). Returns the PID, gate write end in *gate. */
pid_t cli_spawn(char **cmd, int *gate, bool stdout_to_stderr);
/* Joins argv into one space-separated string (for the profile's meta). */
char *cli_join(int argc, char **argv);
/* Hands the session's kernel objects to a detached closer process, which releases them
 * right after this process exits. */
void cli_close_later(void);
/* The detached closer, started as "nupp-bpf-detach PIDFD" by cli_close_later. */
void cli_closer(int pidfd) __attribute__((noreturn));
/* wait_ms, or less: no later than time until (now being now). */
int cli_wait_until(int wait_ms, double until, double now);
/* Monotonic seconds. */
double cli_now(void);

/* Subcommands, one file each (user/cmd_<name>.c). */
int cmd_record(int argc, char **argv);
int cmd_report(int argc, char **argv);
int cmd_vms(int argc, char **argv);
int cmd_doctor(int argc, char **argv);
int cmd_diff(int argc, char **argv);
int cmd_top(int argc, char **argv);
int cmd_dump(int argc, char **argv);

/* The command table entries of the subcommands, in the order --help lists them. */
#define CLI_CMDS                                                                                   \
	{ "record", cmd_record, "sample Lua stacks and count JIT trace aborts of a process or command" }, \
	{ "report", cmd_report, "render a saved profile: flame graph, speedscope, pprof, top table, ..." }, \
	{ "top", cmd_top, "a live table of the hottest functions of a running process, or one table" },   \
	{ "dump", cmd_dump, "print where each thread of a process is now: its Lua stack, VM state, locals" }, \
	{ "diff", cmd_diff, "compare profiles; exit 1 on a regression beyond threshold and noise" },      \
	{ "vms", cmd_vms, "list the LuaJIT VMs of a process (g, layout, probes)" },                    \
	{ "doctor", cmd_doctor, "check what record needs here (privileges, kernel, a PID's LuaJIT)" },

#endif /* NUPP_CLI_H */
