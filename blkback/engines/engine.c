/*
 * engine.c: choosing a storage engine from a disk's params.
 */
#include "config.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "blkback/engines/engine.h"
#include "blkback/log/log.h"

static const struct xbd_engine *const engines[] = {
	&xbd_engine_aio,
	&xbd_engine_null,
	&xbd_engine_fault,
	&xbd_engine_nbd,
	&xbd_engine_rbd,
#ifdef HAVE_LIBURING
	&xbd_engine_uring,
#endif
};

const struct xbd_engine *xbd_engine_for(const char *params, const char **target)
{
	const char *colon = strchr(params, ':');
	unsigned int i;

	/* A plain path (libxl writes one for script= disks) is a file or device. */
	if (!colon || params[0] == '/') {
		*target = params;
		return &xbd_engine_aio;
	}
	for (i = 0; i < sizeof(engines) / sizeof(engines[0]); i++) {
		size_t len = strlen(engines[i]->name);

		if ((size_t)(colon - params) < len || strncmp(params, engines[i]->name, len))
			continue;
		if ((size_t)(colon - params) == len) {
			*target = engines[i]->uri ? params : colon + 1;
			return engines[i];
		}
		/* A URI scheme with a transport: nbd+unix. */
		if (engines[i]->uri && params[len] == '+') {
			*target = params;
			return engines[i];
		}
	}
	return NULL;
}

const struct xbd_engine *xbd_engine_by_name(const char *name)
{
	unsigned int i;

	for (i = 0; i < sizeof(engines) / sizeof(engines[0]); i++)
		if (!strcmp(engines[i]->name, name))
			return engines[i];
	return NULL;
}

int xbd_store_export(const struct xbd_engine *e, struct xbd_store *s,
		     struct xbd_store_export *out, int *fds)
{
	int err;

	if (!e->export_store || !e->import_store)
		return -EOPNOTSUPP;
	memset(out, 0, sizeof(*out));
	snprintf(out->engine, sizeof(out->engine), "%s", e->name);
	err = e->export_store(s, out, fds);
	if (!err && (out->len > sizeof(out->data) || out->nfds > XBD_STORE_EXPORT_FDS))
		err = -E2BIG;
	return err;
}

int xbd_store_import(const struct xbd_store_export *in, const int *fds,
		     const struct xbd_engine **e, struct xbd_store **out)
{
	char name[sizeof(in->engine) + 1];
	unsigned int i;

	memcpy(name, in->engine, sizeof(in->engine));
	name[sizeof(in->engine)] = '\0';
	*e = xbd_engine_by_name(name);
	if (!*e || !(*e)->import_store || in->len > sizeof(in->data) ||
	    in->nfds > XBD_STORE_EXPORT_FDS) {
		for (i = 0; i < in->nfds && i < XBD_STORE_EXPORT_FDS; i++)
			if (fds[i] >= 0)
				close(fds[i]);
		return -EINVAL;
	}
	return (*e)->import_store(in, fds, out);
}

const struct xbd_engine *xbd_engine_choose(const char *params, const struct xbd_disk_opts *o,
					   const char **target)
{
	const struct xbd_engine *e = xbd_engine_for(params, target);
	char why[160], shown[XBD_PARAMS_LOG_MAX], esc[XBD_LOG_STR_BUF];

#ifdef HAVE_LIBURING
	/* A plain path, not "aio:PATH", which names its engine. */
	if (e == &xbd_engine_aio && *target == params && o->engine == XBD_FILE_ENGINE_URING)
		e = &xbd_engine_uring;
#endif
	why[0] = '\0';
	if (e && e->available && e->available(why, sizeof(why))) {
		xbd_params_for_log(*target, shown, sizeof(shown));
		xbd_log(XBD_LOG_WARNING, "%s: the %s engine cannot run here (%s): served by the %s engine",
			xbd_log_str(esc, shown), e->name, why, e->fallback->name);
		e = e->fallback;
	}
	return e;
}

const char *xbd_params_for_log(const char *params, char *buf, size_t len)
{
	static const char *const secret[] = { "key=", "password=", "secret=" };
	size_t n = 0;
	const char *p = params;

	while (*p && n + 1 < len) {
		unsigned int i;
		bool hide = false;

		/* A key starts the string or follows a field separator. */
		for (i = 0; i < sizeof(secret) / sizeof(secret[0]) && (p == params ||
		     p[-1] == ':' || p[-1] == '?' || p[-1] == '&' || p[-1] == ','); i++)
			if (!strncmp(p, secret[i], strlen(secret[i])))
				hide = true;
		if (!hide) {
			buf[n++] = *p++;
			continue;
		}
		while (*p && *p != '=' && n + 1 < len)
			buf[n++] = *p++;
		if (*p == '=') {
			p++;
			n += snprintf(buf + n, len - n, "=***");
			if (n >= len)
				n = len - 1;
			/* Up to the next unescaped separator. */
			while (*p && *p != ':' && *p != '&' && *p != ',')
				p += p[0] == '\\' && p[1] ? 2 : 1;
		}
	}
	buf[n] = '\0';
	return buf;
}
