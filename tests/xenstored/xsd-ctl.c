/*
 * xsd-ctl.c: domain management for the shell tests, which Debian's
 * xenstore-* tools cannot do: run as dom0 (XENSTORED_PATH set to the
 * privileged socket).
 *
 *   xsd-ctl mkdomain DOMID    home directory as libxl writes it, INTRODUCE
 *   xsd-ctl introduce DOMID   INTRODUCE only
 *   xsd-ctl release DOMID     RELEASE
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/xenstored/harness.h"

int main(int argc, char **argv)
{
	struct xs_handle *h;
	unsigned int domid;
	bool ok;

	if (argc != 3) {
		fprintf(stderr, "usage: xsd-ctl mkdomain|introduce|release "
			"DOMID\n");
		return 2;
	}
	domid = (unsigned int)strtoul(argv[2], NULL, 10);
	h = xs_open(0);
	if (!h) {
		perror("xsd-ctl: xs_open");
		return 1;
	}
	if (strcmp(argv[1], "mkdomain") == 0) {
		make_domain(h, domid);
		ok = true;
	} else if (strcmp(argv[1], "introduce") == 0) {
		ok = xs_introduce_domain(h, domid, 1, 1);
	} else if (strcmp(argv[1], "release") == 0) {
		ok = xs_release_domain(h, domid);
	} else {
		fprintf(stderr, "xsd-ctl: unknown command %s\n", argv[1]);
		return 2;
	}
	if (!ok)
		fprintf(stderr, "xsd-ctl: %s %u: %s\n", argv[1], domid,
			strerror(errno));
	xs_close(h);
	return ok ? 0 : 1;
}
