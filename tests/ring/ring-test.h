/*
 * ring-test.h: small helpers shared by the ring unit tests: a failure
 * counter with file:line messages, page-aligned "shared" memory, and
 * direct access to the shared indexes (what a peer would see).
 */
#ifndef XBD_TESTS_RING_TEST_H
#define XBD_TESTS_RING_TEST_H

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ring/ring.h"

static int test_failures;

/* Only the first failures are printed; the count says how many there were. */
#define TEST_MAX_PRINTED 30

static inline void test_fail(void)
{
	test_failures++;
}

#define CHECK(cond)                                                              \
	do {                                                                     \
		if (!(cond)) {                                                   \
			if (test_failures < TEST_MAX_PRINTED)                    \
				fprintf(stderr, "%s:%d: FAIL: %s\n", __FILE__,   \
					__LINE__, #cond);                        \
			test_fail();                                             \
		}                                                                \
	} while (0)

#define CHECK_EQ(a, b)                                                              \
	do {                                                                        \
		long long _a = (long long)(a), _b = (long long)(b);                 \
		if (_a != _b) {                                                     \
			if (test_failures < TEST_MAX_PRINTED)                       \
				fprintf(stderr, "%s:%d: FAIL: %s == %s (%lld != %lld)\n", \
					__FILE__, __LINE__, #a, #b, _a, _b);        \
			test_fail();                                                \
		}                                                                   \
	} while (0)

static inline int test_result(const char *name)
{
	if (test_failures) {
		fprintf(stderr, "%s: %d check(s) failed\n", name, test_failures);
		return 1;
	}
	printf("%s: all checks passed\n", name);
	return 0;
}

static inline void *test_pages(unsigned int nr_pages)
{
	void *p = NULL;

	if (posix_memalign(&p, XBD_PAGE_SIZE, (size_t)nr_pages * XBD_PAGE_SIZE) != 0) {
		perror("posix_memalign");
		exit(99);
	}
	memset(p, 0xa5, (size_t)nr_pages * XBD_PAGE_SIZE);
	return p;
}

/* The shared header as the peer sees it: req_prod, req_event, rsp_prod, rsp_event. */
enum { IDX_REQ_PROD, IDX_REQ_EVENT, IDX_RSP_PROD, IDX_RSP_EVENT };

static inline uint32_t *shared_idx(void *sring)
{
	return (uint32_t *)sring;
}

/* A limits struct offering everything, over a 1 GiB disk of 512-byte sectors. */
static inline struct xbd_limits test_limits(void)
{
	struct xbd_limits lim = {
		.nr_sectors = 2097152,
		.sector_size = 512,
		.max_indirect_segs = 256,
		.readonly = false,
		.flush = true,
		.barrier = true,
		.discard = true,
		.discard_secure = true,
	};
	return lim;
}

static const enum xbd_abi test_abis[] = { XBD_ABI_NATIVE, XBD_ABI_X86_32, XBD_ABI_X86_64 };
static const char *const test_abi_names[] = { "native", "x86_32", "x86_64" };

#endif /* XBD_TESTS_RING_TEST_H */
