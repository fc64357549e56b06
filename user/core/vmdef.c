/* The names LuaJIT's jit.vmdef gives, per branch: fast functions are numbered by each
 * branch's own library list (luajit2 adds table.isarray, table.clone, table.nkeys ...),
 * while bytecodes, IR ops and trace errors are one table for both (the build checks
 * they are equal). */
#include "nupp_internal.h"
#include "nupp/lj_layout.h"
#include "nupp_vmdef.h"
#include "nupp_vmdef_luajit2.h"

const char *nupp_vmdef_ffname(unsigned branch, __u64 id)
{
	const char *const *tab = nupp_vmdef_ffnames;
	__u64 n = NUPP_VMDEF_FFNAMES_N;

	if (branch == NUPP_LJ_BRANCH_LUAJIT2) {
		tab = nupp_vmdef_luajit2_ffnames;
		n = NUPP_VMDEF_LUAJIT2_FFNAMES_N;
	} else if (branch != NUPP_LJ_BRANCH_LUAJIT) {
		return NULL;
	}
	return id < n && tab[id][0] ? tab[id] : NULL;
}

const char *nupp_lj_branch_name(unsigned branch)
{
	switch (branch) {
	case NUPP_LJ_BRANCH_LUAJIT:
		return "luajit";
	case NUPP_LJ_BRANCH_LUAJIT2:
		return "luajit2";
	}
	return "unknown";
}
