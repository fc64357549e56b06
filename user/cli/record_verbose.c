/* record -v: the statistics printed at the end (trace copies, walks, the BPF programs'
 * kernel cost, record's own CPU time). Read-only: they print and change nothing. */
#include <stdio.h>
#include <sys/resource.h>

#include "nupp/sampler_abi.h"
#include "record.h"

/* Prints what became of the traces sampled: copied whole by BPF at their first sample
 * (named from the copy), or why not (then read from the target); and the prototypes
 * watched (met by samples) and their frees reported. */
void record_trace_copies(struct nupp_sampler *smp)
{
	__u64 tc[NUPP_SMP_TC_N], watched = 0, freed = 0, dead = 0;
	int i;

	nupp_sampler_trace_copies(smp, tc, NUPP_SMP_TC_N);
	fprintf(stderr, "nupp-bpf: traces sampled: %llu copied by bpf; not copied:", (unsigned long long)tc[0]);
	for (i = 1; i < NUPP_SMP_TC_N; i++)
		fprintf(stderr, " %s %llu", nupp_sampler_tcopy_name(i), (unsigned long long)tc[i]);
	fprintf(stderr, "\n");
	nupp_sampler_proto_counts(smp, &watched, &freed);
	nupp_sampler_proto_dead(smp, &dead);
	fprintf(stderr, "nupp-bpf: prototypes: %llu freed, %llu watched (met by a sample or a trace copy), %llu of "
		"their frees reported\n", (unsigned long long)dead, (unsigned long long)watched,
		(unsigned long long)freed);
}

/* Prints why samples were lost as 'symbolize', cause by cause. */
void record_symbolize_causes(struct nupp_sampler *smp)
{
	const char *why[32];
	__u64 n[32];
	int i, k = nupp_sampler_symbolize_causes(smp, why, n, 32);

	for (i = 0; i < k; i++)
		fprintf(stderr, "nupp-bpf: lost as symbolize: %llu samples: %s\n", (unsigned long long)n[i], why[i]);
}

/* Prints what the samples' walks did: frames from the frame cache, reads, new stacks. */
void record_walk_stats(struct nupp_sampler *smp)
{
	__u64 v[NUPP_SMP_WS_N];
	double n;

	if (nupp_sampler_walk_stats(smp, v, NUPP_SMP_WS_N) || !v[NUPP_SMP_WS_SAMPLES])
		return;
	n = (double)v[NUPP_SMP_WS_SAMPLES];
	fprintf(stderr,
		"nupp-bpf: walks: %llu samples, %.1f frames each, %.1f %% from the frame cache (%llu filled, "
		"%.1f lookups, %.1f functions not read, %.2f free generations read, %.2f refused by a prototype "
		"free a sample), %.1f reads of %.0f bytes a sample, %.1f %% new stacks\n",
		(unsigned long long)v[NUPP_SMP_WS_SAMPLES], (double)v[NUPP_SMP_WS_FRAMES] / n,
		v[NUPP_SMP_WS_FRAMES] ? 100.0 * (double)v[NUPP_SMP_WS_HITS] / (double)v[NUPP_SMP_WS_FRAMES] : 0.0,
		(unsigned long long)v[NUPP_SMP_WS_FILLS], (double)v[NUPP_SMP_WS_LOOKS] / n,
		(double)v[NUPP_SMP_WS_FNHITS] / n,
		(double)v[NUPP_SMP_WS_PGREADS] / n, (double)v[NUPP_SMP_WS_STALE] / n, (double)v[NUPP_SMP_WS_READS] / n,
		(double)v[NUPP_SMP_WS_RBYTES] / n, 100.0 * (double)v[NUPP_SMP_WS_NEWSTACK] / n);
	fprintf(stderr, "nupp-bpf: %llu samples not counted: time the hypervisor took from the CPU (steal)\n",
		(unsigned long long)v[NUPP_SMP_WS_STOLEN]);
}

/* Prints the kernel cost of the BPF programs (needs kernel.bpf_stats_enabled=1). */
void record_stats(struct nupp_sampler *smp, struct nupp_trace *tr)
{
	__u64 ns = 0, cnt = 0, tns = 0, tcnt = 0, pns = 0, pcnt = 0;

	nupp_sampler_stats(smp, &ns, &cnt);
	nupp_sampler_proto_stats(smp, &pns, &pcnt);
	if (tr)
		nupp_trace_stats(tr, &tns, &tcnt);
	if (!cnt && !tcnt) {
		fprintf(stderr, "nupp-bpf: bpf statistics are off (sysctl kernel.bpf_stats_enabled=1 turns them on)\n");
		return;
	}
	fprintf(stderr,
		"nupp-bpf: bpf sampler %llu runs, %.0f ns/run (trace copies included); trace %llu runs, %.0f ns/run; "
		"prototype events %llu runs, %.0f ns/run\n",
		(unsigned long long)cnt, cnt ? (double)ns / cnt : 0.0, (unsigned long long)tcnt,
		tcnt ? (double)tns / tcnt : 0.0, (unsigned long long)pcnt, pcnt ? (double)pns / pcnt : 0.0);
}

/* CPU seconds this process used so far (all its threads), user and system; 0 when
 * unknown. */
double record_cpu(double *user, double *sys)
{
	struct rusage ru;

	*user = *sys = 0;
	if (getrusage(RUSAGE_SELF, &ru))
		return 0;
	*user = (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6;
	*sys = (double)ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
	return *user + *sys;
}

/* Prints the CPU time this process used, start to now, and the part of it spent before
 * recording began (start_cpu: loading and attaching): the target's own (and the kernel's
 * work for it, BPF programs included) is not in it, nor that of the command's
 * descendants or of the detached closer. */
void record_own_cpu(double start_cpu)
{
	double u, k, all = record_cpu(&u, &k);

	fprintf(stderr, "nupp-bpf: own CPU %.3f s (user %.3f s, system %.3f s), %.3f s of it before recording began\n",
		all, u, k, start_cpu);
}
