/* libnupp's print callback and the per-thread "last error" message. */
#include <stdio.h>
#include <string.h>

#include "nupp/nupp.h"
#include "nupp_internal.h"

static nupp_print_fn log_print;
static __thread char log_errmsg[1024];

/* Installs the print callback (NULL: silence); returns the previous one. */
nupp_print_fn nupp_set_print(nupp_print_fn fn)
{
	nupp_print_fn old = log_print;

	log_print = fn;
	return old;
}

/* Sends a message to the print callback, if any. */
void nupp_pr(enum nupp_log_level level, const char *fmt, ...)
{
	va_list ap;

	if (!log_print)
		return;
	va_start(ap, fmt);
	log_print(level, fmt, ap);
	va_end(ap);
}

/* Records the message for the failure being returned; returns err for chaining. */
int nupp_fail(int err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(log_errmsg, sizeof(log_errmsg), fmt, ap);
	va_end(ap);
	nupp_pr(NUPP_DEBUG, "error: %s\n", log_errmsg);
	return err;
}

/* The message of the last failure in this thread. */
const char *nupp_errmsg(void)
{
	return log_errmsg[0] ? log_errmsg : "no error recorded";
}

/* libnupp's version string. */
const char *nupp_version(void)
{
	return NUPP_VERSION;
}

/* The LuaJIT build libnupp was made for. */
const char *nupp_luajit_build(void)
{
	static char buf[256];

	if (!buf[0])
		snprintf(buf, sizeof(buf), "LuaJIT 2.1.0-beta3 (Debian %s) + nupp-bpf USDT patch, layout v%u, %s",
			 NUPP_LUAJIT_DEB_VERSION, NUPP_LJ_LAYOUT_VERSION, NUPP_LUAJIT_PREFIX);
	return buf;
}
