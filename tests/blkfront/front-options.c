/*
 * front-options.c: prints blkfront/device-options.c's table for
 * tests/blkfront/options.sh, one row a line:
 *   NAME KIND MIN MAX WHERE
 * KIND string, number, choice or flag; MIN and MAX the range (numbers);
 * WHERE "both", or "cli" for an option the nbdkit plugin does not take.
 */
#include "config.h"

#include <stdio.h>

#include "blkfront/device-options.h"

int main(void)
{
	static const char *const kinds[] = {
		[XBDF_KIND_STRING] = "string",
		[XBDF_KIND_NUMBER] = "number",
		[XBDF_KIND_CHOICE] = "choice",
		[XBDF_KIND_FLAG] = "flag",
	};

	for (size_t i = 0; i < xbdf_nr_options; i++) {
		const struct xbdf_option *o = &xbdf_options[i];

		printf("%s %s %ld %ld %s\n", o->name, kinds[o->kind], o->min, o->max,
		       o->cli_only ? "cli" : "both");
	}
	return 0;
}
