/*
 * table.h: the settings table as the files of settings/ see it: a row
 * per setting (its name, scope, type, range or words, help, run-time or
 * not), defined once in options.c and read by command-line.c for the
 * command line, --help and --check-config.
 */
#ifndef XBD_BACK_SETTINGS_TABLE_H
#define XBD_BACK_SETTINGS_TABLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "blkback/settings/options.h"

enum setting_type {
	T_UINT, /* a decimal number in [min, max] */
	T_BOOL, /* 0 or 1 */
	T_WORD, /* one of words[], stored as its index */
	T_CUSTOM,
};

struct setting {
	const char *name;
	enum xbd_setting_scope scope;
	enum setting_type type;
	size_t off, size; /* the field in xbd_back_opts or xbd_disk_opts */
	uint64_t min, max;
	const char *const *words; /* T_WORD: NULL-terminated */
	const char *arg;          /* --help: what the option takes ("N", "MODE") */
	const char *help;         /* --help (wrapped) */
	const char *dflt;         /* --help: the default when it is not a fixed value */
	bool runtime;             /* xbdctl set may change it */
	const char *flag;         /* command line: takes no argument, means this value */
	const char *alias;        /* another spelling of this setting: not printed */
	bool limit;               /* an I/O limit: xbdctl set reports it only when set */
	bool bytes;               /* T_UINT: a size or byte rate, K, M, G or T allowed (common/size.h) */
	/* T_CUSTOM: parse val into the field (allowed: what to say if it is bad). */
	int (*parse)(void *field, const char *val, char *allowed, size_t len);
	/* T_CUSTOM: the value as the file spells it; false to print it commented out. */
	bool (*format)(const void *field, char *buf, size_t len);
};

extern const struct setting xbd_settings[];
extern const unsigned int xbd_nr_settings;

/* Every setting at its default. */
void settings_defaults(struct xbd_back_opts *o);
/* The field of s in the daemon's settings or a disk's. */
void *setting_field(const struct setting *s, void *daemon, void *disk);
/* The value as the file spells it; false: not set (printed commented out). */
bool setting_format(const struct setting *s, const void *f, char *buf, size_t len);
/* "a, b or c" */
void setting_words(const char *const *w, char *buf, size_t len);
/* Read the configuration file into o: 0, -ENOENT if there is none, or -EINVAL (said why). */
int settings_config_load(const char *path, struct xbd_back_opts *o);

#endif /* XBD_BACK_SETTINGS_TABLE_H */
