/*
 * xenbus.c: the xenstore connection of libxbdxenbus, typed reads and writes
 * with strict parsing and range checks, and transactions retried on
 * EAGAIN.  Watches live in xenbus-watch.c, the XenbusState machine in
 * xenbus-state.c, path helpers in xenbus-path.c.
 */
#include "config.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "xenstore/xenbus-internal.h"

int xbd_xs_open(struct xbd_xs **out)
{
	struct xbd_xs *xs;
	int ret;

	xs = calloc(1, sizeof(*xs));
	if (!xs)
		return -ENOMEM;
	/*
	 * No XS_UNWATCH_FILTER: its filtering frees queued events without
	 * their bodies (a leak under LeakSanitizer).  Events of removed
	 * watches are dropped by token in xbd_xs_dispatch instead.
	 */
	xs->h = xs_open(0);
	if (!xs->h) {
		ret = xbd_xs_errno();
		goto err;
	}
	/* Create the watch pipe now, so the fd is stable from the start. */
	xs->fd = xs_fileno(xs->h);
	if (xs->fd < 0) {
		ret = xbd_xs_errno();
		goto err;
	}
	*out = xs;
	return 0;

err:
	if (xs->h)
		xs_close(xs->h);
	free(xs);
	return ret;
}

void xbd_xs_close(struct xbd_xs *xs)
{
	struct xbd_xs_watch *w, *next;

	if (!xs)
		return;
	/* Closing the connection drops the daemon's watches with it. */
	xs_close(xs->h);
	for (w = xs->watches; w; w = next) {
		next = w->next;
		free(w->path);
		free(w);
	}
	free(xs);
}

struct xs_handle *xbd_xs_handle(struct xbd_xs *xs)
{
	return xs->h;
}

int xbd_xs_fd(struct xbd_xs *xs)
{
	return xs->fd;
}

/* Read a node; a value with an embedded NUL is not a string we accept. */
static int read_raw(struct xbd_xs *xs, xs_transaction_t t, const char *path, char **out)
{
	unsigned int len;
	char *v;

	v = xs_read(xs->h, t, path, &len);
	if (!v)
		return xbd_xs_errno();
	if (strlen(v) != len) {
		free(v);
		return -EINVAL;
	}
	*out = v;
	return 0;
}

int xbd_xs_read_str(struct xbd_xs *xs, xs_transaction_t t, const char *path, char **out)
{
	return read_raw(xs, t, path, out);
}

int xbd_xs_read_uint(struct xbd_xs *xs, xs_transaction_t t, const char *path,
		     uint64_t min, uint64_t max, uint64_t *out)
{
	char *v;
	int ret;

	ret = read_raw(xs, t, path, &v);
	if (ret)
		return ret;
	ret = xbd_xs_parse_uint(v, min, max, out);
	free(v);
	return ret;
}

int xbd_xs_read_bool(struct xbd_xs *xs, xs_transaction_t t, const char *path, bool *out)
{
	char *v;
	int ret;

	ret = read_raw(xs, t, path, &v);
	if (ret)
		return ret;
	if (!strcmp(v, "0"))
		*out = false;
	else if (!strcmp(v, "1"))
		*out = true;
	else
		ret = -EINVAL;
	free(v);
	return ret;
}

int xbd_xs_read_uint_default(struct xbd_xs *xs, xs_transaction_t t, const char *path,
			     uint64_t min, uint64_t max, uint64_t dflt, uint64_t *out)
{
	int ret = xbd_xs_read_uint(xs, t, path, min, max, out);

	if (ret == -ENOENT) {
		*out = dflt;
		return 0;
	}
	return ret;
}

int xbd_xs_read_bool_default(struct xbd_xs *xs, xs_transaction_t t, const char *path,
			     bool dflt, bool *out)
{
	int ret = xbd_xs_read_bool(xs, t, path, out);

	if (ret == -ENOENT) {
		*out = dflt;
		return 0;
	}
	return ret;
}

bool xbd_xs_exists(struct xbd_xs *xs, xs_transaction_t t, const char *path)
{
	unsigned int len;
	char *v = xs_read(xs->h, t, path, &len);

	free(v);
	return v != NULL;
}

int xbd_xs_directory(struct xbd_xs *xs, xs_transaction_t t, const char *path,
		     char ***out, unsigned int *count)
{
	char **d = xs_directory(xs->h, t, path, count);

	if (!d)
		return xbd_xs_errno();
	*out = d;
	return 0;
}

int xbd_xs_write_str(struct xbd_xs *xs, xs_transaction_t t, const char *path, const char *value)
{
	size_t len = strlen(value);

	if (len > XENSTORE_PAYLOAD_MAX)
		return -E2BIG;
	if (!xs_write(xs->h, t, path, value, (unsigned int)len))
		return xbd_xs_errno();
	return 0;
}

int xbd_xs_write_uint(struct xbd_xs *xs, xs_transaction_t t, const char *path, uint64_t value)
{
	char buf[24];

	snprintf(buf, sizeof(buf), "%" PRIu64, value);
	return xbd_xs_write_str(xs, t, path, buf);
}

int xbd_xs_printf(struct xbd_xs *xs, xs_transaction_t t, const char *path, const char *fmt, ...)
{
	va_list ap;
	char *v;
	int n, ret;

	va_start(ap, fmt);
	n = vasprintf(&v, fmt, ap);
	va_end(ap);
	if (n < 0)
		return -ENOMEM;
	ret = xbd_xs_write_str(xs, t, path, v);
	free(v);
	return ret;
}

int xbd_xs_rm(struct xbd_xs *xs, xs_transaction_t t, const char *path)
{
	if (!xs_rm(xs->h, t, path)) {
		/* xenstored says ENOENT when the parent is missing too: still gone. */
		if (errno == ENOENT)
			return 0;
		return xbd_xs_errno();
	}
	return 0;
}

int xbd_xs_mkdir(struct xbd_xs *xs, xs_transaction_t t, const char *path)
{
	if (!xs_mkdir(xs->h, t, path))
		return xbd_xs_errno();
	return 0;
}

int xbd_xs_set_perms(struct xbd_xs *xs, xs_transaction_t t, const char *path,
		     const struct xs_permissions *perms, unsigned int count)
{
	/* libxenstore's prototype lacks const; it does not write to perms. */
	if (!xs_set_permissions(xs->h, t, path, (struct xs_permissions *)perms, count))
		return xbd_xs_errno();
	return 0;
}

int xbd_xs_write_kvs(struct xbd_xs *xs, xs_transaction_t t, const char *dir,
		     const struct xbd_xs_kv *kvs, size_t count)
{
	char path[XBD_XS_PATH_MAX];
	size_t i;
	int ret;

	for (i = 0; i < count; i++) {
		ret = xbd_xs_join(path, sizeof(path), dir, kvs[i].key);
		if (ret)
			return ret;
		ret = xbd_xs_write_str(xs, t, path, kvs[i].value);
		if (ret)
			return ret;
	}
	return 0;
}

int xbd_xs_transact(struct xbd_xs *xs, xbd_xs_txn_fn fn, void *arg)
{
	unsigned int attempt;
	int ret;

	for (attempt = 0; attempt < XBD_XS_TXN_RETRIES; attempt++) {
		xs_transaction_t t = xs_transaction_start(xs->h);

		if (t == XBT_NULL)
			return xbd_xs_errno();
		ret = fn(xs, t, arg);
		if (ret) {
			xs_transaction_end(xs->h, t, true);
			/* Some xenstoreds report the conflict on the operation itself. */
			if (ret == -EAGAIN)
				continue;
			return ret;
		}
		if (xs_transaction_end(xs->h, t, false))
			return 0;
		if (errno != EAGAIN)
			return xbd_xs_errno();
		/* Someone changed what we read: run fn again on fresh data. */
	}
	return -EAGAIN;
}
