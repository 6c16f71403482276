/*
 * xbdctl.h: what xbdctl's files share: one request over the control
 * socket (xbdctl-request.c) and the live view built on it (xbdctl-view.c),
 * both called by the command (xbdctl.c).
 */
#ifndef XBD_XBDCTL_H
#define XBD_XBDCTL_H

/*
 * Send req (one line, ending in a newline) to the daemon at path.  0 and
 * *body (malloc'd) on "ok"; otherwise 1, with the reason on stderr.
 */
int xbdctl_request(const char *path, const char *req, char **body);

/*
 * stats --interval: one line per device (or the one dev names) every
 * interval seconds, count times or until SIGINT/SIGTERM.  The exit status.
 */
int xbdctl_view(const char *path, const char *dev, double interval, long count);

#endif /* XBD_XBDCTL_H */
