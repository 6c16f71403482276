/*
 * common/size.h: a size or a byte rate as people write it: a decimal
 * number of bytes, or one with K, M, G or T after it (either case) for
 * that many KiB, MiB, GiB or TiB: powers of 1024, as truncate(1), QEMU's
 * sizes and fio take them.  Header only (static inline), for every
 * program that reads one: xbd-back's settings, its null:SIZE params,
 * xbd-front bench.  Nothing else is a size: no sign, space, fraction,
 * hex or second letter ("100MB" is refused, not guessed at).
 */
#ifndef XBD_COMMON_SIZE_H
#define XBD_COMMON_SIZE_H

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

/* What the suffixes are, for the message that refuses a value. */
#define XBD_SIZE_SUFFIXES "K, M, G or T for KiB, MiB, GiB or TiB"

/* s as bytes into *out: 0, or -EINVAL (not a size) or -ERANGE (past 2^64). */
static inline int xbd_parse_size(const char *s, uint64_t *out)
{
	unsigned long long v;
	unsigned int shift = 0;
	char *end;

	if (*s < '0' || *s > '9')
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno)
		return -ERANGE;
	switch (*end) {
	case '\0': break;
	case 'k': case 'K': shift = 10; break;
	case 'm': case 'M': shift = 20; break;
	case 'g': case 'G': shift = 30; break;
	case 't': case 'T': shift = 40; break;
	default: return -EINVAL;
	}
	if (shift && end[1])
		return -EINVAL;
	if (shift && v > (UINT64_MAX >> shift))
		return -ERANGE;
	*out = (uint64_t)v << shift;
	return 0;
}

#endif /* XBD_COMMON_SIZE_H */
