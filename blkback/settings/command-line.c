/*
 * command-line.c: xbd-back's settings from its command line (options.c
 * holds the table and what each value means): --help from the table, the
 * options collected, the configuration file read (config.c, each line
 * options.c's to take), then the options applied over it, --disk's rules,
 * and --check-config's print of every setting.
 */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "blkback/settings/iolimits.h"
#include "blkback/settings/options.h"
#include "blkback/settings/table.h"
#include "common/size.h"

/*
 * --disk TARGET:SPEC, split at the last colon (params may hold one:
 * null:1G); SPEC is key=value,... of disk settings.
 */
static int add_cmdline_rule(struct xbd_back_opts *o, const char *arg)
{
	const char *colon = strrchr(arg, ':');
	struct xbd_disk_opts vals = o->disk;
	char err[XBD_OPT_ERR_MAX], *copy, *save = NULL, *item, *t;
	uint64_t mask = 0;
	int ret = 0;

	if (!colon || colon == arg || !colon[1]) {
		fprintf(stderr, "xbd-back: invalid value '%s' for --disk: "
			"PARAMS:key=value[,key=value...]\n", arg);
		return -EINVAL;
	}
	copy = strdup(colon + 1);
	if (!copy)
		return -ENOMEM;
	for (item = strtok_r(copy, ",", &save); item && !ret; item = strtok_r(NULL, ",", &save)) {
		char *eq = strchr(item, '=');

		if (!eq) {
			fprintf(stderr, "xbd-back: disk setting '%s' is not key=value\n", item);
			ret = -EINVAL;
			break;
		}
		*eq = '\0';
		ret = xbd_disk_opt_set(&vals, &mask, "--", item, eq + 1, err, sizeof(err));
		if (ret == -EPERM)
			fprintf(stderr, "xbd-back: '%s' is a daemon setting, not a disk setting "
				"(allowed in --disk: %s)\n", item, xbd_setting_names(XBD_SETTING_DISK, false));
		else if (ret == -ENOENT && xbd_setting_nearest(item, true, false))
			fprintf(stderr, "xbd-back: unknown disk setting '%s' (did you mean %s?)\n",
				item, xbd_setting_nearest(item, true, false));
		else if (ret == -ENOENT)
			fprintf(stderr, "xbd-back: unknown disk setting '%s' (allowed: %s)\n", item,
				xbd_setting_names(XBD_SETTING_DISK, false));
		else if (ret)
			fprintf(stderr, "xbd-back: %s\n", err);
	}
	free(copy);
	if (ret)
		return -EINVAL;
	t = strndup(arg, colon - arg);
	if (!t)
		return -ENOMEM;
	ret = xbd_back_add_rule(o, t, &vals, mask);
	free(t);
	if (ret == -E2BIG)
		fprintf(stderr, "xbd-back: invalid value '%s' for --disk: at most %d disk rules\n",
			arg, XBD_BACK_MAX_DISK_RULES);
	return ret ? -EINVAL : 0;
}

/* ---- the command line ---- */

/* Options that are not settings; the settings' own start at OPT_SETTING. */
enum {
	OPT_RUN = 256, OPT_FOREGROUND, OPT_DISK, OPT_CONFIG, OPT_CHECK, OPT_SETTING,
};

static const struct option other_opts[] = {
	{ "verbose", no_argument, NULL, 'v' },
	{ "run", required_argument, NULL, OPT_RUN },
	{ "foreground", no_argument, NULL, OPT_FOREGROUND },
	{ "disk", required_argument, NULL, OPT_DISK },
	{ "config", required_argument, NULL, OPT_CONFIG },
	{ "check-config", no_argument, NULL, OPT_CHECK },
	{ "help", no_argument, NULL, 'h' },
	{ "version", no_argument, NULL, 'V' },
};
#define NR_OTHER (sizeof(other_opts) / sizeof(other_opts[0]))

/* "  --opt ARG   help (default)", the help wrapped at 79 columns under itself. */
static void usage_line(const char *opt, const char *help, const char *dflt)
{
	char text[600];
	const char *p = text;
	int col = printf("  %s", opt);

	snprintf(text, sizeof(text), "%s%s%s%s", help, dflt ? " (default " : "", dflt ? dflt : "",
		 dflt ? ")" : "");
	if (col >= 26) {
		printf("\n");
		col = 0;
	}
	printf("%*s", 26 - col, "");
	col = 26;
	while (*p) {
		size_t w = strcspn(p, " ");

		if (col > 26 && col + 1 + (int)w > 79) {
			printf("\n%26s", "");
			col = 26;
		} else if (col > 26) {
			putchar(' ');
			col++;
		}
		printf("%.*s", (int)w, p);
		col += (int)w;
		p += w;
		while (*p == ' ')
			p++;
	}
	putchar('\n');
}

static void usage(void)
{
	struct xbd_back_opts d;
	unsigned int i;

	settings_defaults(&d);
	printf("Usage: xbd-back [OPTION]...\n"
	       "Serve Xen PV block devices (blkif) from userspace.\n\n"
	       "Settings (each also a key of xbd-back.conf; disk settings also in [disk]\n"
	       "sections and --disk; (*) xbdctl set changes it at run time; BYTES: a number,\n"
	       "or with " XBD_SIZE_SUFFIXES "):\n");
	for (i = 0; i < xbd_nr_settings; i++) {
		const struct setting *s = &xbd_settings[i];
		char opt[64], dflt[160], words[160], help[400];

		if (s->flag)
			snprintf(opt, sizeof(opt), "--%s", s->name);
		else
			snprintf(opt, sizeof(opt), "--%s %s", s->name, s->arg);
		if (s->dflt)
			snprintf(dflt, sizeof(dflt), "%s", s->dflt);
		else if (!s->alias)
			setting_format(s, setting_field(s, &d, &d.disk), dflt, sizeof(dflt));
		words[0] = '\0';
		if (s->type == T_WORD) {
			setting_words(s->words, words, sizeof(words) - 2);
			strcat(words, ": ");
		}
		snprintf(help, sizeof(help), "%s%s%s", s->runtime ? "(*) " : "", words, s->help);
		usage_line(opt, help, s->alias ? NULL : dflt);
	}
	xbd_back_free_options(&d);
	printf("\nOther options:\n");
	usage_line("--config FILE", "configuration file, default " XBD_DEFAULT_CONFIG
		   " if it exists", NULL);
	usage_line("--check-config", "check the configuration, print the settings, exit", NULL);
	usage_line("--disk PARAMS:SETTINGS", "disk settings for the disks whose params matches "
		   "PARAMS, e.g. /srv/a.img:cache=unsafe,max-batch=1", NULL);
	usage_line("-v, --verbose", "one log level more (repeatable)", NULL);
	usage_line("--run COMMAND", "serve, run COMMAND with /bin/sh, exit with its status",
		   NULL);
	usage_line("--foreground", "stay in the foreground (the default)", NULL);
	usage_line("-h, --help", "this text", NULL);
	usage_line("--version", "print the version and exit", NULL);
	printf("See xbd-back(8) and xbd-back.conf(5).\n");
}

/* Limits that contradict each other (a burst below its limit), in the defaults or a rule. */
static int check_limits(const struct xbd_back_opts *o)
{
	char err[XBD_OPT_ERR_MAX];
	unsigned int i;

	if (xbd_iolimits_check(&o->disk, err, sizeof(err))) {
		fprintf(stderr, "xbd-back: %s\n", err);
		return -EINVAL;
	}
	for (i = 0; i < o->nr_rules; i++)
		if (xbd_iolimits_check(&o->rules[i].vals, err, sizeof(err))) {
			fprintf(stderr, "xbd-back: [disk %s]: %s\n", o->rules[i].target, err);
			return -EINVAL;
		}
	return 0;
}

/* One command-line option, kept until the configuration file has been read. */
struct cmdopt {
	int c;
	const char *arg;
};

/* getopt_long's table: each setting (OPT_SETTING + its index), then the other options. */
static struct option *long_options(void)
{
	struct option *lo = calloc(xbd_nr_settings + NR_OTHER + 1, sizeof(*lo));
	unsigned int i;

	if (!lo)
		return NULL;
	for (i = 0; i < xbd_nr_settings; i++) {
		lo[i].name = xbd_settings[i].name;
		lo[i].has_arg = xbd_settings[i].flag ? no_argument : required_argument;
		lo[i].val = OPT_SETTING + (int)i;
	}
	memcpy(lo + xbd_nr_settings, other_opts, sizeof(other_opts));
	return lo;
}

/*
 * The first pass: the options kept in cmd (so that the command line can
 * override the file), -v counted, --config taken.  0; 1: done, exit 0
 * (--help, --version); -EINVAL (said why).
 */
static int collect(int argc, char **argv, const struct option *longopts, struct cmdopt *cmd,
		   unsigned int *ncmd, unsigned int *verbose, const char **config)
{
	int c;

	optind = 0; /* glibc: start afresh (SIGHUP parses the same argv again) */
	while ((c = getopt_long(argc, argv, "vh", longopts, NULL)) != -1) {
		switch (c) {
		case 'h':
			usage();
			return 1;
		case 'V':
			printf("xbd-back %s\n", PACKAGE_VERSION);
			return 1;
		case '?': {
			/* getopt said what it did not take; a misspelt setting gets its nearest. */
			const char *w = optind > 0 && optind <= argc ? argv[optind - 1] : "";
			char name[64];
			const char *near = NULL;

			if (!strncmp(w, "--", 2)) {
				snprintf(name, sizeof(name), "%.*s", (int)strcspn(w + 2, "="), w + 2);
				near = xbd_setting_nearest(name, false, false);
			}
			if (near)
				fprintf(stderr, "xbd-back: did you mean --%s? (try --help)\n", near);
			else
				fprintf(stderr, "xbd-back: try --help\n");
			return -EINVAL;
		}
		case 'v':
			++*verbose;
			break;
		case OPT_CONFIG:
			*config = optarg;
			break;
		default:
			cmd[*ncmd].c = c;
			cmd[*ncmd].arg = optarg;
			++*ncmd;
			break;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "xbd-back: unexpected argument '%s'\n", argv[optind]);
		return -EINVAL;
	}
	return 0;
}

/*
 * The configuration file: --config's, else XBD_BACK_CONFIG's, else the
 * default one if it exists.  0, or -EINVAL (said why).
 */
static int load_config(struct xbd_back_opts *o, const char *config)
{
	bool given = config != NULL;
	int ret;

	if (!given && getenv("XBD_BACK_CONFIG")) {
		config = getenv("XBD_BACK_CONFIG");
		given = true;
	}
	if (!config)
		config = XBD_DEFAULT_CONFIG;
	ret = settings_config_load(config, o);
	if (ret == -ENOENT && !given) {
		ret = 0; /* no file at the default place: the defaults it is */
	} else if (ret == -ENOENT) {
		fprintf(stderr, "xbd-back: invalid value '%s' for --config: "
			"an existing configuration file\n", config);
		ret = -EINVAL;
	} else if (!ret) {
		o->config = strdup(config);
	}
	return ret;
}

/* The kept options, over the file's settings: 0, or an error (said why). */
static int apply(struct xbd_back_opts *o, const struct cmdopt *cmd, unsigned int ncmd)
{
	char err[XBD_OPT_ERR_MAX];
	int ret = 0;

	for (unsigned int i = 0; !ret && i < ncmd; i++) {
		const char *arg = cmd[i].arg;

		switch (cmd[i].c) {
		case OPT_DISK:
			ret = add_cmdline_rule(o, arg);
			break;
		case OPT_RUN:
			o->run = arg;
			break;
		case OPT_FOREGROUND:
			o->foreground = true;
			break;
		case OPT_CHECK:
			o->check_config = true;
			break;
		default: {
			const struct setting *s = &xbd_settings[cmd[i].c - OPT_SETTING];

			ret = xbd_back_opt_set(o, "--", s->name, s->flag ? s->flag : arg, err,
					       sizeof(err));
			if (ret)
				fprintf(stderr, "xbd-back: %s\n", err);
			break;
		}
		}
	}
	return ret;
}

int xbd_back_parse_options(int argc, char **argv, struct xbd_back_opts *o)
{
	struct option *longopts;
	struct cmdopt *cmd;
	const char *config = NULL;
	unsigned int ncmd = 0, verbose = 0;
	int ret;

	settings_defaults(o);
	longopts = long_options();
	cmd = calloc(argc + 1, sizeof(*cmd));
	if (!longopts || !cmd) {
		free(longopts);
		free(cmd);
		return -ENOMEM;
	}
	ret = collect(argc, argv, longopts, cmd, &ncmd, &verbose, &config);
	free(longopts);
	if (!ret)
		ret = load_config(o, config);
	if (!ret)
		ret = apply(o, cmd, ncmd);
	free(cmd);
	if (ret == 1)
		return 1;
	if (!ret)
		ret = check_limits(o);
	if (ret)
		return -EINVAL;
	o->verbose += verbose;
	if (o->verbose > 2)
		o->verbose = 2;
	return 0;
}

/* ---- --check-config ---- */

static void print_setting(FILE *f, const struct setting *s, const void *field)
{
	char v[256];
	bool set = setting_format(s, field, v, sizeof(v));

	fprintf(f, "%s%s = %s\n", set ? "" : "#", s->name, v);
}

void xbd_back_print_options(FILE *f, const struct xbd_back_opts *o)
{
	unsigned int i, j;

	fprintf(f, "# xbd-back settings (configuration file: %s)\n",
		o->config ? o->config : "none");
	for (i = 0; i < xbd_nr_settings; i++)
		if (!xbd_settings[i].alias)
			print_setting(f, &xbd_settings[i],
				      setting_field(&xbd_settings[i], (void *)o, (void *)&o->disk));
	for (j = 0; j < o->nr_rules; j++) {
		const struct xbd_disk_rule *r = &o->rules[j];

		fprintf(f, "\n[disk %s]\n", r->target);
		for (i = 0; i < xbd_nr_settings; i++)
			if (!xbd_settings[i].alias && (r->mask & (1ull << i)))
				print_setting(f, &xbd_settings[i], (const char *)&r->vals + xbd_settings[i].off);
	}
}
