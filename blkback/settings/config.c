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
 */
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <stdint.h>
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

/* The section being read: its pattern, the settings it made, the keys it named and where. */
struct section {
	char *target;
	struct xbd_disk_opts vals;
	uint64_t mask;
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

static int section_end(struct section *s, struct xbd_back_opts *o, const char *where)
{
	int err = 0;

	if (s->target)
		err = xbd_back_add_rule(o, s->target, &s->vals, s->mask);
	if (err == -E2BIG)
		fprintf(stderr, "xbd-back: %s: too many [disk] sections (at most %d)\n", where,
			XBD_BACK_MAX_DISK_RULES);
	free(s->target);
	s->target = NULL;
	s->mask = 0;
	seen_clear(s);
	return err ? -EINVAL : 0;
}

int xbd_config_load(const char *path, struct xbd_back_opts *o)
{
	FILE *f = fopen(path, "re");
	struct section sec = { 0 };
	char *line = NULL, where[512] = "", err[XBD_OPT_ERR_MAX];
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
			ret = section_end(&sec, o, where);
			if (ret)
				break;
			sec.target = strdup(arg);
			sec.vals = o->disk;
			if (!sec.target) {
				ret = -ENOMEM;
				break;
			}
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
		if (sec.target) {
			ret = xbd_disk_opt_set(&sec.vals, &sec.mask, "", k, v, err, sizeof(err));
			if (ret == -EPERM)
				fprintf(stderr, "xbd-back: %s: '%s' is a daemon setting, not allowed "
					"in [disk %s] (allowed there: %s)\n", where, k, sec.target,
					xbd_setting_names(XBD_SETTING_DISK, false));
			else if (ret == -ENOENT)
				fprintf(stderr, "xbd-back: %s: unknown key '%s' in [disk %s] "
					"(allowed: %s)\n", where, k, sec.target,
					xbd_setting_names(XBD_SETTING_DISK, false));
			else if (ret)
				fprintf(stderr, "xbd-back: %s: %s\n", where, err);
		} else {
			ret = xbd_back_opt_set(o, "", k, v, err, sizeof(err));
			if (ret == -ENOENT)
				fprintf(stderr, "xbd-back: %s: unknown key '%s' (allowed: %s, %s)\n",
					where, k, xbd_setting_names(XBD_SETTING_DAEMON, false),
					xbd_setting_names(XBD_SETTING_DISK, false));
			else if (ret)
				fprintf(stderr, "xbd-back: %s: %s\n", where, err);
		}
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
		ret = section_end(&sec, o, where);
	seen_clear(&sec);
	free(sec.target);
	free(line);
	fclose(f);
	return ret ? -EINVAL : 0;
}
