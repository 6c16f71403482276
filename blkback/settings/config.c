/*
 * config.c: reading xbd-back.conf(5).  The format is a list of
 *     key = value
 * lines (daemon settings and the defaults of every disk), '#' comment
 * lines, and sections
 *     [disk PATTERN]
 * whose key = value lines apply to the disks whose params matches
 * PATTERN (fnmatch(3), so a plain path matches itself).  A bad line stops
 * the daemon at start with one message "FILE:LINE: ..." that names the
 * key, the value and what is allowed; a key given twice in one section
 * is a warning naming both lines (the later value counts).
 *
 * This file knows the format, not the settings: what a key means, and
 * what a section makes, is its reader's (options.c, from the settings
 * table).
 */
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "blkback/settings/options.h"

static char *trim(char *s)
{
	char *e;

	while (isspace((unsigned char)*s))
		s++;
	e = s + strlen(s);
	while (e > s && isspace((unsigned char)e[-1]))
		*--e = '\0';
	return s;
}

/* The section being read: its pattern, the keys it named and where. */
struct section {
	char *target;
	struct seen_key {
		char *key;
		unsigned int line;
	} *seen;
	size_t nr_seen;
};

static void seen_clear(struct section *s)
{
	while (s->nr_seen)
		free(s->seen[--s->nr_seen].key);
	free(s->seen);
	s->seen = NULL;
}

/* Warn about k if this section named it before (a typo, or an edit that forgot the first). */
static void seen_key(struct section *s, const char *k, const char *path, unsigned int line)
{
	struct seen_key *n;
	size_t i;

	for (i = 0; i < s->nr_seen; i++) {
		if (strcmp(s->seen[i].key, k))
			continue;
		fprintf(stderr, "xbd-back: %s:%u: warning: '%s' given again in %s%s%s (first at line "
			"%u): the value of line %u counts\n", path, line, k,
			s->target ? "[disk " : "the top section", s->target ? s->target : "",
			s->target ? "]" : "", s->seen[i].line, line);
		s->seen[i].line = line;
		return;
	}
	n = realloc(s->seen, (s->nr_seen + 1) * sizeof(*n));
	if (!n)
		return;
	s->seen = n;
	n[s->nr_seen].key = strdup(k);
	n[s->nr_seen].line = line;
	if (n[s->nr_seen].key)
		s->nr_seen++;
}

/*
 * A section begins (pattern), or the file ends (pattern NULL): the one
 * before is complete, the reader is told so first.
 */
static int section_change(struct section *s, const struct xbd_config_reader *r, void *ctx,
			  const char *where, const char *pattern)
{
	int err = r->section(ctx, where, pattern);

	free(s->target);
	s->target = NULL;
	seen_clear(s);
	if (err)
		return err;
	if (pattern && !(s->target = strdup(pattern)))
		return -ENOMEM;
	return 0;
}

int xbd_config_read(const char *path, const struct xbd_config_reader *r, void *ctx)
{
	FILE *f = fopen(path, "re");
	struct section sec = { 0 };
	char *line = NULL, where[512] = "";
	size_t cap = 0;
	unsigned int lineno = 0;
	int ret = 0;

	if (!f) {
		if (errno == ENOENT)
			return -ENOENT;
		fprintf(stderr, "xbd-back: cannot read %s: %s\n", path, strerror(errno));
		return -EINVAL;
	}
	errno = 0;
	while (getline(&line, &cap, f) > 0) {
		char *s = trim(line), *eq, *k, *v;

		lineno++;
		snprintf(where, sizeof(where), "%s:%u", path, lineno);
		if (!*s || *s == '#')
			continue;
		if (*s == '[') {
			char *end = s + strlen(s) - 1, *arg;

			if (*end != ']' || strncmp(s, "[disk", 5) || !isspace((unsigned char)s[5])) {
				fprintf(stderr, "xbd-back: %s: invalid section '%s': "
					"[disk PARAMS] is the only kind\n", where, s);
				ret = -EINVAL;
				break;
			}
			*end = '\0';
			arg = trim(s + 5);
			if (!*arg) {
				fprintf(stderr, "xbd-back: %s: invalid section '[disk]': "
					"it needs the params (a path or pattern) of the disks it is for\n",
					where);
				ret = -EINVAL;
				break;
			}
			ret = section_change(&sec, r, ctx, where, arg);
			if (ret)
				break;
			continue;
		}
		eq = strchr(s, '=');
		if (!eq) {
			fprintf(stderr, "xbd-back: %s: expected 'key = value' or '[disk PARAMS]', "
				"got '%s'\n", where, s);
			ret = -EINVAL;
			break;
		}
		*eq = '\0';
		k = trim(s);
		v = trim(eq + 1);
		seen_key(&sec, k, path, lineno);
		ret = r->key(ctx, where, k, v);
		if (ret)
			break;
		errno = 0;
	}
	/* A directory opens, and then every read fails (EISDIR). */
	if (!ret && ferror(f)) {
		fprintf(stderr, "xbd-back: cannot read %s: %s\n", path,
			strerror(errno ? errno : EIO));
		ret = -EINVAL;
	}
	if (!ret)
		ret = section_change(&sec, r, ctx, where, NULL);
	seen_clear(&sec);
	free(sec.target);
	free(line);
	fclose(f);
	return ret ? -EINVAL : 0;
}
