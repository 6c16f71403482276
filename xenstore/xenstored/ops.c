/*
 * ops.c: request dispatch and the node operations of xbd-xenstored (READ,
 * WRITE, MKDIR, RM, DIRECTORY, DIRECTORY_PART, GET_PERMS, SET_PERMS,
 * RESET_WATCHES, CONTROL), with xenstored's permission and quota rules.
 */
#include "config.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "xenstore/xenstored/internal.h"

#define F_NOTID	(1u << 0)	/* transaction id ignored */
#define F_PRIV	(1u << 1)	/* privileged (dom0) only */

typedef int (*xsd_op_fn)(struct xsd_req *r);

unsigned int xsd_count_strings(const struct xsd_req *r)
{
	unsigned int n = 0;
	uint32_t i;

	for (i = 0; i < r->len; i++)
		n += r->body[i] == '\0';
	return n;
}

/* The single argument of a request: exactly one string, NUL-terminated at
 * the very end of the payload; NULL otherwise. */
static const char *onearg(const struct xsd_req *r)
{
	if (!r->len || strlen(r->body) + 1 != r->len)
		return NULL;
	return r->body;
}

unsigned int xsd_conn_perm(const struct xsd_conn *c,
			   const struct xsd_perm *p, uint32_t n)
{
	int target = c->dom ? c->dom->target : -1;

	return xsd_perm_for(p, n, c->domid, c->privileged, target);
}

char *xsd_canonical(const struct xsd_conn *c, const char *path)
{
	char *s;

	/* Relative paths are relative to the connection's home. */
	if (path[0] == '/' || path[0] == '@')
		return strdup(path);
	if (asprintf(&s, "/local/domain/%u/%s", c->domid, path) < 0)
		return NULL;
	return s;
}

static size_t domain_home_prefix(const char *path)
{
	static const char pfx[] = "/local/domain/";
	size_t i = sizeof(pfx) - 1, digits = 0;

	if (strncmp(path, pfx, i) != 0)
		return 0;
	while (path[i] >= '0' && path[i] <= '9' && digits < 5) {
		i++;
		digits++;
	}
	return digits && path[i] == '/' ? i + 1 : 0;
}

bool xsd_valid_path(const struct xsd_conn *c, const char *path)
{
	size_t len = strlen(path);

	if (path[0] != '/')
		return false;
	if (len > 1 && path[len - 1] == '/')
		return false;
	if (strstr(path, "//"))
		return false;
	if (len > XENSTORE_ABS_PATH_MAX)
		return false;
	/* A guest's paths are limited below any domain's home, as Xen's
	 * path-length quota does. */
	if (!c->privileged &&
	    len - domain_home_prefix(path) > XENSTORE_REL_PATH_MAX)
		return false;
	return strspn(path, "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
			    "abcdefghijklmnopqrstuvwxyz"
			    "0123456789-/_@") == len;
}

static char *parent_path(const char *path)
{
	const char *slash = strrchr(path, '/');

	if (!slash || slash == path)
		return strdup("/");
	return strndup(path, slash - path);
}

/*
 * A missing or forbidden node must not reveal whether it exists: the error
 * stands only if the closest existing ancestor grants the access asked for,
 * otherwise the answer is EACCES (xenstored's errno_from_parents).
 */
static int error_from_parents(struct xsd_req *r, const char *path, int err,
			      unsigned int need)
{
	const struct xsd_node *n = NULL;
	char *p = strdup(path), *q;

	if (!p)
		return ENOMEM;
	while (strcmp(p, "/") != 0) {
		q = parent_path(p);
		free(p);
		p = q;
		if (!p)
			return ENOMEM;
		n = xsd_view_get(&r->view, p);
		if (n)
			break;
	}
	free(p);
	if (!n || !(xsd_conn_perm(r->c, n->perms, n->nperms) & need))
		return EACCES;
	return err;
}

/* Resolves arg to a node the connection may access with need; *canon gets
 * the absolute path (to free) whenever it could be computed. */
static int get_node(struct xsd_req *r, const char *arg, unsigned int need,
		    char **canon, const struct xsd_node **out)
{
	const struct xsd_node *n;
	int err;

	*canon = NULL;
	*out = NULL;
	if (!arg)
		return EINVAL;
	*canon = xsd_canonical(r->c, arg);
	if (!*canon)
		return ENOMEM;
	if (!xsd_valid_path(r->c, *canon))
		return EINVAL;
	n = xsd_view_get(&r->view, *canon);
	if (n) {
		if ((xsd_conn_perm(r->c, n->perms, n->nperms) & need) ==
		    need) {
			*out = n;
			return 0;
		}
		err = EACCES;
	} else {
		err = ENOENT;
	}
	return error_from_parents(r, *canon, err, need);
}

static bool over_size(struct xsd_req *r, uint32_t nperms, uint32_t datalen,
		      uint32_t childlen)
{
	return !r->c->privileged &&
	       xsd_node_size(nperms, datalen, childlen) >= r->x->lim.entry_size;
}

/*
 * Creates path and its missing parents.  Each new node inherits its
 * parent's permissions; a guest owns what it creates, while dom0's new nodes
 * keep the parent's owner (xenstored's construct_node).
 */
static int create_path(struct xsd_req *r, const char *path, const char *data,
		       uint32_t datalen)
{
	const struct xsd_node *anc = NULL;
	struct xsd_node *n;
	struct xsd_perm *perms = NULL;
	char **missing = NULL, *p;
	const char *leaf;
	unsigned int nmissing = 0, i, cap = 0;
	uint32_t nperms;
	int ret = ENOMEM;
	long long owned;

	p = strdup(path);
	while (p) {
		anc = xsd_view_get(&r->view, p);
		if (anc)
			break;
		if (nmissing == cap) {
			char **m;

			cap = cap ? cap * 2 : 8;
			m = realloc(missing, cap * sizeof(*m));
			if (!m)
				goto out;
			missing = m;
		}
		missing[nmissing++] = p;
		p = parent_path(p);
	}
	if (!p)
		goto out;
	free(p);
	p = NULL;
	/* Callers saw path absent in this same view, so something is
	 * missing; never index missing[] otherwise. */
	if (!nmissing) {
		ret = EEXIST;
		goto out;
	}
	nperms = anc->nperms;

	if (!r->c->privileged) {
		owned = r->x->st.owned[r->c->domid];
		if (r->txn)
			owned += r->txn->ov.self_delta;
		if (owned + nmissing > r->x->lim.entries_per_domain) {
			ret = ENOSPC;
			goto out;
		}
		/* Record sizes: the ancestor gains a child, each new node but
		 * the deepest has one child, the deepest holds the value. */
		leaf = strrchr(missing[nmissing - 1], '/') + 1;
		if (over_size(r, nperms, anc->datalen,
			      anc->childlen + strlen(leaf) + 1)) {
			ret = ENOSPC;
			goto out;
		}
		for (i = 1; i < nmissing; i++) {
			leaf = strrchr(missing[i - 1], '/') + 1;
			if (over_size(r, nperms, 0, strlen(leaf) + 1)) {
				ret = ENOSPC;
				goto out;
			}
		}
		if (over_size(r, nperms, datalen, 0)) {
			ret = ENOSPC;
			goto out;
		}
	}

	perms = malloc(nperms * sizeof(*perms));
	if (!perms)
		goto out;
	memcpy(perms, anc->perms, nperms * sizeof(*perms));
	if (!r->c->privileged)
		perms[0].id = r->c->domid;
	for (i = nmissing; i-- > 0;) {
		if (xsd_view_create(&r->view, missing[i], perms, nperms) < 0)
			goto out;
	}
	n = xsd_view_edit(&r->view, path);
	if (!n || xsd_node_set_data(n, data, datalen) < 0)
		goto out;
	xsd_fire(r, path, false, n->perms, n->nperms, NULL, 0);
	ret = 0;
out:
	for (i = 0; i < nmissing; i++)
		free(missing[i]);
	free(missing);
	free(perms);
	free(p);
	return ret;
}

static int op_read(struct xsd_req *r)
{
	const struct xsd_node *n;
	char *path;
	int ret = get_node(r, onearg(r), XSD_PERM_READ, &path, &n);

	if (!ret)
		xsd_reply(r, n->data, n->datalen);
	free(path);
	return ret;
}

/* The child names of n, each NUL-terminated (n->childlen bytes). */
static char *children_string(const struct xsd_node *n)
{
	char *s = malloc(n->childlen + 1), *p = s;
	uint32_t i;
	size_t l;

	if (!s)
		return NULL;
	for (i = 0; i < n->nkids; i++) {
		l = strlen(n->kids[i]) + 1;
		memcpy(p, n->kids[i], l);
		p += l;
	}
	*p = '\0';
	return s;
}

static int op_directory(struct xsd_req *r)
{
	const struct xsd_node *n;
	char *path, *kids;
	int ret = get_node(r, onearg(r), XSD_PERM_READ, &path, &n);

	if (!ret) {
		kids = children_string(n);
		if (kids)
			xsd_reply(r, kids, n->childlen);	/* E2BIG if big */
		else
			ret = ENOMEM;
		free(kids);
	}
	free(path);
	return ret;
}

/*
 * DIRECTORY_PART <path>|<offset>| -> <generation>|<names from offset>...
 * libxenstore falls back to it when DIRECTORY answers E2BIG; it restarts
 * while the generation changes and stops at a chunk ending in an empty
 * string, so the last chunk carries one extra NUL.
 */
static int op_directory_part(struct xsd_req *r)
{
	const struct xsd_node *n;
	char *path = NULL, *kids = NULL, *out = NULL;
	char gen[24];
	unsigned long off;
	uint32_t len = 0, maxlen, genlen;
	size_t sl;
	int ret;

	if (xsd_count_strings(r) != 2)
		return EINVAL;
	ret = get_node(r, r->body, XSD_PERM_READ, &path, &n);
	if (ret)
		goto out;
	off = strtoul(r->body + strlen(r->body) + 1, NULL, 10);
	genlen = snprintf(gen, sizeof(gen), "%" PRIu64, n->gen) + 1;
	kids = children_string(n);
	out = malloc(XENSTORE_PAYLOAD_MAX);
	if (!kids || !out) {
		ret = ENOMEM;
		goto out;
	}
	memcpy(out, gen, genlen);
	if (off >= n->childlen) {
		out[genlen] = '\0';
		xsd_reply(r, out, genlen + 1);
		goto out;
	}
	maxlen = XENSTORE_PAYLOAD_MAX - genlen - 1;
	while (off + len < n->childlen) {
		sl = strlen(kids + off + len) + 1;
		if (len + sl > maxlen)
			break;
		len += sl;
	}
	memcpy(out + genlen, kids + off, len);
	if (off + len == n->childlen)
		out[genlen + len++] = '\0';
	xsd_reply(r, out, genlen + len);
out:
	free(out);
	free(kids);
	free(path);
	return ret;
}

static int op_get_perms(struct xsd_req *r)
{
	const struct xsd_node *n;
	char *path, *buf;
	uint32_t i, len = 0;
	int ret = get_node(r, onearg(r), XSD_PERM_READ, &path, &n);

	if (ret)
		goto out;
	buf = malloc(n->nperms * 8);
	if (!buf) {
		ret = ENOMEM;
		goto out;
	}
	for (i = 0; i < n->nperms; i++)
		len += xsd_perm_format(&n->perms[i], buf + len, 8) + 1;
	xsd_reply(r, buf, len);
	free(buf);
out:
	free(path);
	return ret;
}

static int op_write(struct xsd_req *r)
{
	const struct xsd_node *n;
	struct xsd_node *w;
	char *path;
	const char *data;
	uint32_t datalen;
	int ret;

	/* <path>|<value|>: the value is everything after the first NUL. */
	if (strnlen(r->body, r->len) == r->len)
		return EINVAL;
	data = r->body + strlen(r->body) + 1;
	datalen = r->len - (strlen(r->body) + 1);

	ret = get_node(r, r->body, XSD_PERM_WRITE, &path, &n);
	if (ret == ENOENT) {
		ret = create_path(r, path, data, datalen);
	} else if (!ret) {
		if (over_size(r, n->nperms, datalen, n->childlen)) {
			ret = ENOSPC;
		} else if (!(w = xsd_view_edit(&r->view, path)) ||
			   xsd_node_set_data(w, data, datalen) < 0) {
			ret = ENOMEM;
		} else {
			xsd_fire(r, path, false, w->perms, w->nperms, NULL, 0);
		}
	}
	if (!ret)
		xsd_reply_str(r, "OK");
	free(path);
	return ret;
}

static int op_mkdir(struct xsd_req *r)
{
	const struct xsd_node *n;
	char *path;
	int ret = get_node(r, onearg(r), XSD_PERM_WRITE, &path, &n);

	/* An existing node is left alone, value and all. */
	if (ret == ENOENT)
		ret = create_path(r, path, NULL, 0);
	if (!ret)
		xsd_reply_str(r, "OK");
	free(path);
	return ret;
}

/* Events for the removal of everything below n (not n itself): a watch on
 * a removed descendant fires with its own path. */
static int fire_removed_children(struct xsd_req *r, const struct xsd_node *n)
{
	const struct xsd_node *k;
	uint32_t i;
	char *cp;
	int ret = 0;

	for (i = 0; i < n->nkids && !ret; i++) {
		if (asprintf(&cp, "%s/%s", strcmp(n->path, "/") ? n->path : "",
			     n->kids[i]) < 0)
			return ENOMEM;
		k = xsd_view_get(&r->view, cp);
		if (k) {
			ret = fire_removed_children(r, k);
			xsd_fire(r, cp, true, k->perms, k->nperms, NULL, 0);
		}
		free(cp);
	}
	return ret;
}

static int op_rm(struct xsd_req *r)
{
	const struct xsd_node *n;
	char *path, *parent;
	int ret = get_node(r, onearg(r), XSD_PERM_WRITE, &path, &n);

	if (ret == ENOENT) {
		/* Removing what is not there is fine if its parent is. */
		parent = parent_path(path);
		if (!parent)
			ret = ENOMEM;
		else if (xsd_view_get(&r->view, parent))
			ret = 0;
		free(parent);
	} else if (!ret) {
		if (strcmp(path, "/") == 0) {
			ret = EINVAL;
			goto out;
		}
		/* Fire while the nodes and their permissions still exist. */
		xsd_fire(r, path, false, n->perms, n->nperms, NULL, 0);
		ret = fire_removed_children(r, n);
		if (!ret && xsd_view_remove(&r->view, path) < 0)
			ret = ENOMEM;
	}
	if (!ret)
		xsd_reply_str(r, "OK");
out:
	free(path);
	return ret;
}

static int op_set_perms(struct xsd_req *r)
{
	const struct xsd_node *n;
	struct xsd_perm *perms = NULL, *old = NULL;
	unsigned int num = xsd_count_strings(r), i, oldn;
	const char *s;
	char *path = NULL;
	int ret;

	if (num < 2)
		return EINVAL;
	num--;
	if (!r->c->privileged && num > r->x->lim.perms_per_node)
		return ENOSPC;
	perms = calloc(num, sizeof(*perms));
	if (!perms)
		return ENOMEM;
	s = r->body + strlen(r->body) + 1;
	for (i = 0; i < num; i++, s += strlen(s) + 1) {
		if (xsd_perm_parse(s, &perms[i]) < 0) {
			ret = EINVAL;
			goto out;
		}
	}

	if (r->body[0] == '@') {
		ret = xsd_special_set_perms(r, r->body, perms, num);
		if (!ret)
			xsd_reply_str(r, "OK");
		goto out;
	}

	/* Only the owner (or dom0) may change permissions. */
	ret = get_node(r, r->body, XSD_PERM_WRITE | XSD_PERM_OWNER, &path, &n);
	if (ret)
		goto out;
	if (!r->c->privileged && perms[0].id != n->perms[0].id) {
		ret = EPERM;
		goto out;
	}
	if (over_size(r, num, n->datalen, n->childlen)) {
		ret = ENOSPC;
		goto out;
	}
	oldn = n->nperms;
	old = malloc(oldn * sizeof(*old));
	if (!old) {
		ret = ENOMEM;
		goto out;
	}
	memcpy(old, n->perms, oldn * sizeof(*old));
	if (xsd_view_set_perms(&r->view, path, perms, num) < 0) {
		ret = ENOMEM;
		goto out;
	}
	/* Watchers who could read the node before still hear about it. */
	xsd_fire(r, path, false, perms, num, old, oldn);
	xsd_reply_str(r, "OK");
out:
	free(old);
	free(perms);
	free(path);
	return ret;
}

static int op_reset_watches(struct xsd_req *r)
{
	xsd_watches_drop(r->c);
	xsd_txns_drop(r->c);
	xsd_reply_str(r, "OK");
	return 0;
}

/* A few of xenstored's CONTROL commands, for xenstore-control. */
static int op_control(struct xsd_req *r)
{
	unsigned int n = xsd_count_strings(r);
	const char *cmd = r->body, *arg;

	if (n < 1)
		return EINVAL;
	arg = n > 1 ? cmd + strlen(cmd) + 1 : NULL;
	if (strcmp(cmd, "help") == 0) {
		xsd_reply_str(r, "Supported commands:\ncheck\nhelp\n"
			      "print <string>\n");
		return 0;
	}
	if (strcmp(cmd, "check") == 0) {
		xsd_reply_str(r, "OK");
		return 0;
	}
	if (strcmp(cmd, "print") == 0 && arg) {
		xsd_log(r->x, "control print: %s", arg);
		xsd_reply_str(r, "OK");
		return 0;
	}
	return EINVAL;
}

static const struct {
	xsd_op_fn fn;
	unsigned int flags;
} ops[XS_TYPE_COUNT] = {
	[XS_CONTROL]		= { op_control, F_PRIV },
	[XS_DIRECTORY]		= { op_directory, 0 },
	[XS_READ]		= { op_read, 0 },
	[XS_GET_PERMS]		= { op_get_perms, 0 },
	[XS_WATCH]		= { xsd_op_watch, F_NOTID },
	[XS_UNWATCH]		= { xsd_op_unwatch, F_NOTID },
	[XS_TRANSACTION_START]	= { xsd_op_transaction_start, 0 },
	[XS_TRANSACTION_END]	= { xsd_op_transaction_end, 0 },
	[XS_INTRODUCE]		= { xsd_op_introduce, F_PRIV },
	[XS_RELEASE]		= { xsd_op_release, F_PRIV },
	[XS_GET_DOMAIN_PATH]	= { xsd_op_get_domain_path, 0 },
	[XS_WRITE]		= { op_write, 0 },
	[XS_MKDIR]		= { op_mkdir, 0 },
	[XS_RM]			= { op_rm, 0 },
	[XS_SET_PERMS]		= { op_set_perms, 0 },
	[XS_IS_DOMAIN_INTRODUCED] = { xsd_op_is_domain_introduced, F_PRIV },
	[XS_RESUME]		= { xsd_op_resume, F_PRIV },
	[XS_SET_TARGET]		= { xsd_op_set_target, F_PRIV },
	[XS_RESET_WATCHES]	= { op_reset_watches, 0 },
	[XS_DIRECTORY_PART]	= { op_directory_part, 0 },
};

void xsd_handle(struct xsd_conn *c)
{
	struct xsd_req r = {
		.x = c->x, .c = c, .hdr = &c->hdr, .body = c->body,
		.len = c->hdr.len,
	};
	uint32_t type = c->hdr.type;
	int ret;

	r.view.st = &c->x->st;
	if (type >= XS_TYPE_COUNT || !ops[type].fn) {
		xsd_reply_error(&r, ENOSYS);
		return;
	}
	if ((ops[type].flags & F_PRIV) && !c->privileged) {
		xsd_reply_error(&r, EACCES);
		return;
	}
	if (!(ops[type].flags & F_NOTID) && c->hdr.tx_id) {
		r.txn = xsd_txn_find(c, c->hdr.tx_id);
		if (!r.txn) {
			xsd_reply_error(&r, ENOENT);
			return;
		}
		r.view.ov = &r.txn->ov;
	}
	ret = ops[type].fn(&r);
	if (ret)
		xsd_reply_error(&r, ret);
}
