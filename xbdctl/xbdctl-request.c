/*
 * xbdctl-request.c: one request over xbd-back's control socket and its
 * answer (common/control-protocol.h), for the one-shot commands
 * (xbdctl.c) and each sample of the live view (xbdctl-view.c).
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include "common/control-protocol.h"
#include "xbdctl/xbdctl.h"

int xbdctl_request(const char *path, const char *req, char **body)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct timeval tv = { .tv_sec = 10 };
	size_t reqlen = strlen(req), rsplen = 0, cap = 0;
	char *rsp = NULL, *nl;
	int fd, rc = 1;

	*body = NULL;
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa))) {
		fprintf(stderr, "xbdctl: cannot reach xbd-back at %s: %s (is it running? "
			"--socket names another)\n", path, strerror(errno));
		goto out;
	}
	/* A daemon never takes long; a wedged one must not hang a script. */
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	if (send(fd, req, reqlen, MSG_NOSIGNAL) != (ssize_t)reqlen) {
		fprintf(stderr, "xbdctl: cannot send to %s: %s\n", path, strerror(errno));
		goto out;
	}
	for (;;) {
		ssize_t n;

		if (rsplen + 4096 + 1 > cap) {
			char *nb = realloc(rsp, cap = cap * 2 + 8192);

			if (!nb)
				goto out;
			rsp = nb;
		}
		n = read(fd, rsp + rsplen, cap - rsplen - 1);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			fprintf(stderr, "xbdctl: no answer from %s: %s\n", path, strerror(errno));
			goto out;
		}
		if (n == 0)
			break;
		rsplen += n;
	}
	if (!rsp || !rsplen) {
		fprintf(stderr, "xbdctl: %s closed the connection without an answer\n", path);
		goto out;
	}
	rsp[rsplen] = '\0';
	nl = strchr(rsp, '\n');
	if (!nl) {
		fprintf(stderr, "xbdctl: garbled answer from %s\n", path);
		goto out;
	}
	*nl = '\0';
	if (!strcmp(rsp, XBD_CTL_OK)) {
		*body = strdup(nl + 1);
		rc = *body ? 0 : 1;
	} else if (!strncmp(rsp, XBD_CTL_ERROR, strlen(XBD_CTL_ERROR))) {
		fprintf(stderr, "xbdctl: %s\n", rsp + strlen(XBD_CTL_ERROR));
	} else {
		fprintf(stderr, "xbdctl: garbled answer from %s\n", path);
	}
out:
	if (fd >= 0)
		close(fd);
	free(rsp);
	return rc;
}
