/*
 * domain.c: simulated domains in xbd-xenstored: INTRODUCE, RELEASE, RESUME,
 * SET_TARGET, IS_DOMAIN_INTRODUCED, GET_DOMAIN_PATH, and the permissions of
 * the special watch paths @introduceDomain and @releaseDomain.
 *
 * On real Xen, INTRODUCE hands xenstored a shared ring page and an event
 * channel; here it makes the driver open DIR/domain/<domid>.sock, and every
 * connection through that socket speaks as the domain.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "xenstore/xenstored/internal.h"

#define DOMID_SELF_VALUE 0x7ff0U

struct xsd_domain *xsd_domain_find(struct xsd *x, unsigned int domid)
{
	struct xsd_domain *d;

	for (d = x->domains; d; d = d->next)
		if (d->domid == domid)
			return d;
	return NULL;
}

int xsd_domain_add(struct xsd *x, unsigned int domid, struct xsd_domain **out)
{
	struct xsd_domain *d = calloc(1, sizeof(*d));

	if (!d)
		return -ENOMEM;
	d->domid = domid;
	d->target = -1;
	d->next = x->domains;
	x->domains = d;
	*out = d;
	return 0;
}

void xsd_domains_free(struct xsd *x)
{
	struct xsd_domain *d;

	while ((d = x->domains)) {
		x->domains = d->next;
		free(d);
	}
}

/* A decimal domain id; 0 on success. */
static int parse_domid(const char *s, unsigned int *domid)
{
	unsigned long v = 0;

	if (!*s)
		return -EINVAL;
	for (; *s; s++) {
		if (*s < '0' || *s > '9')
			return -EINVAL;
		v = v * 10 + (unsigned long)(*s - '0');
		if (v > 0xffff)
			return -EINVAL;
	}
	*domid = (unsigned int)v;
	return 0;
}

/* The only argument of r, or NULL. */
static const char *single(const struct xsd_req *r)
{
	if (!r->len || strlen(r->body) + 1 != r->len)
		return NULL;
	return r->body;
}

static const char *nth(const struct xsd_req *r, unsigned int i)
{
	const char *s = r->body;

	while (i--)
		s += strlen(s) + 1;
	return s;
}

/* INTRODUCE <domid>|<mfn>|<port>| */
int xsd_op_introduce(struct xsd_req *r)
{
	struct xsd *x = r->x;
	struct xsd_domain *d;
	struct xsd_conn *c;
	unsigned int domid;
	long port;
	int ret;

	if (xsd_count_strings(r) < 3)
		return EINVAL;
	if (parse_domid(nth(r, 0), &domid) < 0 || domid == 0 ||
	    domid >= XSD_DOMID_FIRST_RESERVED)
		return EINVAL;
	/* The page is meaningless here; the event channel must look like
	 * one, as xenstored insists. */
	port = strtol(nth(r, 2), NULL, 10);
	if (port <= 0)
		return EINVAL;

	d = xsd_domain_find(x, domid);
	if (d) {
		/* Re-introduction resets the domain's connection state (Xen
		 * rebinds the ring) and announces nothing. */
		for (c = x->conns; c; c = c->next) {
			if (c->dom == d && !c->dead) {
				xsd_watches_drop(c);
				xsd_txns_drop(c);
			}
		}
		xsd_reply_str(r, "OK");
		return 0;
	}
	if (x->hooks.introduce) {
		ret = x->hooks.introduce(x->hooks.opaque, domid);
		if (ret < 0)
			return -ret;
	}
	if (xsd_domain_add(x, domid, &d) < 0) {
		if (x->hooks.release)
			x->hooks.release(x->hooks.opaque, domid);
		return ENOMEM;
	}
	xsd_log(x, "domain %u introduced", domid);
	xsd_reply_str(r, "OK");
	xsd_fire_now(x, "@introduceDomain", false, NULL, 0, NULL, 0);
	return 0;
}

/* RELEASE <domid>| */
int xsd_op_release(struct xsd_req *r)
{
	struct xsd *x = r->x;
	struct xsd_domain *d, *o, **pp;
	struct xsd_conn *c;
	const char *arg = single(r);
	unsigned int domid;

	if (!arg || parse_domid(arg, &domid) < 0 || domid == 0)
		return EINVAL;
	d = xsd_domain_find(x, domid);
	if (!d)
		return ENOENT;

	/* The domain's connections go away with it, watches and all. */
	for (c = x->conns; c; c = c->next) {
		if (c->dom != d)
			continue;
		xsd_conn_kill(c, "domain released");
		c->dom = NULL;
	}
	if (x->hooks.release)
		x->hooks.release(x->hooks.opaque, domid);
	for (pp = &x->domains; *pp; pp = &(*pp)->next) {
		if (*pp == d) {
			*pp = d->next;
			break;
		}
	}
	/* A device model targeting it loses its extra rights. */
	for (o = x->domains; o; o = o->next)
		if (o->target == (int)domid)
			o->target = -1;
	free(d);
	xsd_store_forget_domain(&x->st, domid);
	xsd_log(x, "domain %u released", domid);
	xsd_reply_str(r, "OK");
	xsd_fire_now(x, "@releaseDomain", false, NULL, 0, NULL, 0);
	return 0;
}

/* RESUME <domid>| */
int xsd_op_resume(struct xsd_req *r)
{
	const char *arg = single(r);
	unsigned int domid;

	if (!arg || parse_domid(arg, &domid) < 0 || domid == 0)
		return EINVAL;
	if (!xsd_domain_find(r->x, domid))
		return ENOENT;
	xsd_reply_str(r, "OK");
	return 0;
}

/* SET_TARGET <domid>|<target domid>| */
int xsd_op_set_target(struct xsd_req *r)
{
	struct xsd_domain *d;
	unsigned int domid, tdomid;

	if (xsd_count_strings(r) < 2 ||
	    parse_domid(nth(r, 0), &domid) < 0 ||
	    parse_domid(nth(r, 1), &tdomid) < 0)
		return EINVAL;
	d = xsd_domain_find(r->x, domid);
	if (!d || !xsd_domain_find(r->x, tdomid))
		return ENOENT;
	d->target = (int)tdomid;
	xsd_reply_str(r, "OK");
	return 0;
}

/* IS_DOMAIN_INTRODUCED <domid>| -> T| or F| */
int xsd_op_is_domain_introduced(struct xsd_req *r)
{
	const char *arg = single(r);
	unsigned int domid;
	bool yes;

	if (!arg)
		return EINVAL;
	domid = (unsigned int)strtoul(arg, NULL, 10);
	yes = domid == DOMID_SELF_VALUE || xsd_domain_find(r->x, domid);
	xsd_reply_str(r, yes ? "T" : "F");
	return 0;
}

/* GET_DOMAIN_PATH <domid>| -> /local/domain/<domid>| */
int xsd_op_get_domain_path(struct xsd_req *r)
{
	const char *arg = single(r);
	char path[40];

	if (!arg)
		return EINVAL;
	snprintf(path, sizeof(path), "/local/domain/%u",
		 (unsigned int)strtoul(arg, NULL, 10));
	xsd_reply_str(r, path);
	return 0;
}

static bool special_perms(struct xsd *x, const char *path,
			  struct xsd_perm ***p, uint32_t **n)
{
	if (strcmp(path, "@introduceDomain") == 0) {
		*p = &x->intro_perms;
		*n = &x->intro_nperms;
		return true;
	}
	if (strcmp(path, "@releaseDomain") == 0) {
		*p = &x->release_perms;
		*n = &x->release_nperms;
		return true;
	}
	return false;
}

int xsd_special_set_perms(struct xsd_req *r, const char *path,
			  const struct xsd_perm *perms, uint32_t nperms)
{
	struct xsd_perm **p, *np;
	uint32_t *n;
	const unsigned int need = XSD_PERM_WRITE | XSD_PERM_OWNER;

	if (!special_perms(r->x, path, &p, &n))
		return EINVAL;
	if ((xsd_conn_perm(r->c, *p, *n) & need) != need)
		return EACCES;
	np = malloc(nperms * sizeof(*np));
	if (!np)
		return ENOMEM;
	memcpy(np, perms, nperms * sizeof(*np));
	free(*p);
	*p = np;
	*n = nperms;
	return 0;
}

bool xsd_special_readable(const struct xsd_conn *c, const char *path)
{
	struct xsd_perm **p;
	uint32_t *n;

	if (!special_perms(c->x, path, &p, &n))
		return false;
	return xsd_conn_perm(c, *p, *n) & XSD_PERM_READ;
}
