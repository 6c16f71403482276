/*
 * xenbus-path.c: building and splitting the xenstore paths of the xenbus
 * device convention (/local/domain/N/backend/TYPE/D/DEV and
 * /local/domain/D/device/TYPE/DEV), and the numbers read from the nodes
 * (xbd_xs_parse_uint).  Pure string work, no xenstore calls.
 */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "xenstore/xenbus-internal.h"

int xbd_xs_pathf(char *buf, size_t len, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(buf, len, fmt, ap);
	va_end(ap);
	if (n < 0)
		return -EINVAL;
	if ((size_t)n >= len)
		return -ENAMETOOLONG;
	return 0;
}

int xbd_xs_parse_uint(const char *s, uint64_t min, uint64_t max, uint64_t *out)
{
	uint64_t v = 0;
	const char *p;

	/*
	 * Stricter than blkback's %u (which skips blanks and takes a sign):
	 * every value a frontend writes is hostile, and "1 " or "-1" or
	 * "0x10" in a node means a broken or malicious writer, not a number.
	 */
	if (!s || !*s)
		return -EINVAL;
	for (p = s; *p; p++) {
		unsigned int d;

		if (*p < '0' || *p > '9')
			return -EINVAL;
		d = (unsigned int)(*p - '0');
		if (v > (UINT64_MAX - d) / 10) {
			/* Keep checking the syntax: "99999999999999999999x" is EINVAL. */
			for (; *p; p++)
				if (*p < '0' || *p > '9')
					return -EINVAL;
			return -ERANGE;
		}
		v = v * 10 + d;
	}
	if (v < min || v > max)
		return -ERANGE;
	*out = v;
	return 0;
}

/* A path element we are willing to put into a path: no '/', not empty. */
static bool valid_element(const char *s)
{
	return s && *s && !strchr(s, '/');
}

int xbd_xs_domain_dir(char *buf, size_t len, uint32_t domid)
{
	return xbd_xs_pathf(buf, len, "/local/domain/%u", domid);
}

int xbd_xs_backend_dir(char *buf, size_t len, uint32_t backend_domid, const char *type,
		       uint32_t domid, uint32_t devid)
{
	if (!valid_element(type))
		return -EINVAL;
	return xbd_xs_pathf(buf, len, "/local/domain/%u/backend/%s/%u/%u", backend_domid, type,
			    domid, devid);
}

int xbd_xs_frontend_dir(char *buf, size_t len, uint32_t domid, const char *type, uint32_t devid)
{
	if (!valid_element(type))
		return -EINVAL;
	return xbd_xs_pathf(buf, len, "/local/domain/%u/device/%s/%u", domid, type, devid);
}

int xbd_xs_join(char *buf, size_t len, const char *dir, const char *key)
{
	if (!dir || !*dir || !key || !*key)
		return -EINVAL;
	return xbd_xs_pathf(buf, len, "%s/%s", dir, key);
}

/* Take one '/'-terminated (or final) element from *p as a strict uint32. */
static int take_u32(const char **p, bool last, uint32_t *out)
{
	char num[16];
	const char *end = strchr(*p, '/');
	size_t n;
	uint64_t v;
	int ret;

	if (last != (end == NULL))
		return -EINVAL;
	n = end ? (size_t)(end - *p) : strlen(*p);
	if (n == 0 || n >= sizeof(num))
		return -EINVAL;
	memcpy(num, *p, n);
	num[n] = '\0';
	ret = xbd_xs_parse_uint(num, 0, UINT32_MAX, &v);
	if (ret)
		return -EINVAL;
	*out = (uint32_t)v;
	*p += n + (end ? 1 : 0);
	return 0;
}

int xbd_xs_parse_backend_dir(const char *path, uint32_t *backend_domid, char *type,
			     size_t type_len, uint32_t *domid, uint32_t *devid)
{
	static const char prefix[] = "/local/domain/";
	const char *p = path, *end;
	size_t n;

	if (strncmp(p, prefix, sizeof(prefix) - 1))
		return -EINVAL;
	p += sizeof(prefix) - 1;
	if (take_u32(&p, false, backend_domid))
		return -EINVAL;
	if (strncmp(p, "backend/", 8))
		return -EINVAL;
	p += 8;
	end = strchr(p, '/');
	if (!end || end == p)
		return -EINVAL;
	n = (size_t)(end - p);
	if (n >= type_len)
		return -EINVAL;
	memcpy(type, p, n);
	type[n] = '\0';
	p = end + 1;
	if (take_u32(&p, false, domid) || take_u32(&p, true, devid))
		return -EINVAL;
	return 0;
}
