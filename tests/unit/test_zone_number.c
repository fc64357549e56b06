/* nupp.zone's current id as BPF reads it (include/nupp/zone_abi.h): the 8 bytes of a Lua
 * number decoded with integer operations into the id, every id nupp.zone can make, and
 * everything else refused; and the two-read lookup through a VM's zone_tv slot, against
 * fake memory. */
#include <check.h>

#include "nupp_check.h"
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

/* Fake target memory: [base, base + sizeof(fake)) reads, everything else faults. */
static unsigned char fake[64];
static const uint64_t base = 0x7f0000001000ull;

static int fake_read(void *dst, size_t size, uint64_t addr)
{
	if (addr < base || addr + size > base + sizeof(fake))
		return -EFAULT;
	memcpy(dst, fake + (addr - base), size);
	return 0;
}
#define NUPP_ZONE_READ(dst, size, addr) fake_read(dst, size, addr)
#include "nupp/zone_abi.h"

/* The bits of a double, as a Lua number's TValue holds them (LJ_DUALNUM 0). */
static uint64_t bits_of(double d)
{
	uint64_t b;

	memcpy(&b, &d, sizeof(b));
	return b;
}

START_TEST(every_id_nupp_zone_makes_decodes_exactly)
{
	__u32 id, slot, n, checked = 0, wrong = 0;

	/* All small ids, then every slot's id range at its ends and across it. */
	for (n = 0; n < (1u << 20); n++, checked++)
		if (nupp_zone_id_of_number(bits_of((double)n), &id) || id != n)
			wrong++;
	for (slot = 0; slot < 16; slot++)
		for (n = 1; n <= NUPP_ZONE_N_MASK; n += (n < 4096 || n > NUPP_ZONE_N_MASK - 4096) ? 1 : 997) {
			__u32 want = (slot + 1) << NUPP_ZONE_SLOT_SHIFT | n;

			checked++;
			if (nupp_zone_id_of_number(bits_of((double)want), &id) || id != want)
				wrong++;
		}
	ck_assert_uint_eq(wrong, 0);
	ck_assert_uint_gt(checked, (1u << 20) + 16 * 8192);
	ck_assert_int_eq(nupp_zone_id_of_number(bits_of(4294967295.0), &id), 0);
	ck_assert_uint_eq(id, 4294967295u);
}
END_TEST

START_TEST(what_is_not_an_id_is_refused)
{
	const uint64_t bad[] = {
		bits_of(4294967296.0), bits_of(1099511627783.0), bits_of(0.5), bits_of(1.5),
		bits_of(16777217.25), bits_of(-1.0), bits_of(-0.0), bits_of(1e-300), 1 /* subnormal */,
		bits_of(INFINITY), bits_of(-INFINITY), bits_of(NAN),
		0xffffffffffffffffull, /* nil in a GC64 TValue (~0) */
		0xfffeffffffffffffull, /* false */
		0xfffa7f0000001000ull, /* a table reference: itype << 47 | pointer */
	};
	size_t i;
	__u32 id = 99;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		ck_assert_msg(nupp_zone_id_of_number(bad[i], &id) == -1, "0x%016llx was taken for an id",
			      (unsigned long long)bad[i]);
		ck_assert_uint_eq(id, 0);
	}
}
END_TEST

START_TEST(read_goes_through_the_slot)
{
	uint64_t slot = base, tv = base + 16, v;
	__u32 id = 7;

	memset(fake, 0, sizeof(fake));
	/* A slot holding 0: the VM has no zone module; id 0, not a failure. */
	ck_assert_int_eq(nupp_zone_read(slot, &id), 0);
	ck_assert_uint_eq(id, 0);
	memcpy(fake, &tv, 8);
	v = bits_of(33554434.0); /* slot 1, path 2 */
	memcpy(fake + 16, &v, 8);
	ck_assert_int_eq(nupp_zone_read(slot, &id), 0);
	ck_assert_uint_eq(id, 33554434u);
	/* A number that is not an id, a slot that cannot be read, a pointer that faults. */
	v = bits_of(2.5);
	memcpy(fake + 16, &v, 8);
	ck_assert_int_eq(nupp_zone_read(slot, &id), -1);
	ck_assert_int_eq(nupp_zone_read(base + sizeof(fake), &id), -1);
	tv = 0x1000;
	memcpy(fake, &tv, 8);
	ck_assert_int_eq(nupp_zone_read(slot, &id), -1);
	ck_assert_uint_eq(id, 0);
}
END_TEST

NUPP_CHECK_MAIN("zone_number", 0, false, false, every_id_nupp_zone_makes_decodes_exactly,
		what_is_not_an_id_is_refused, read_goes_through_the_slot)
