/*
 * control.h: the control socket xbdctl talks to (control.c: the socket,
 * its connections, the request line, set), and what its answers to list
 * and stats are made of (control-show.c).
 */
#ifndef XBD_BACK_CONTROL_H
#define XBD_BACK_CONTROL_H

#include <stdbool.h>
#include <stdio.h>

#include "blkback/control/device.h"

/* control.c: the control socket, served from the main loop. */
int xbd_control_open(struct xbd_back *bk, const char *path, bool required,
		     struct xbd_control **out);
/* An fd for the main loop's epoll: readable when the control socket has work. */
int xbd_control_fd(const struct xbd_control *ctl);
/* Accept, read, answer; never blocks. */
void xbd_control_dispatch(struct xbd_control *ctl);
/* Close every connection and remove the socket (if it is still ours). */
void xbd_control_close(struct xbd_control *ctl);

/* control-show.c: list and stats, in the format asked for. */
enum ctl_format { FMT_TABLE, FMT_JSON, FMT_PROMETHEUS };
/* The devices sel names (all: NULL) into f: 0, or -ENODEV when sel names none. */
int ctl_list(struct xbd_back *bk, FILE *f, const char *sel, enum ctl_format fmt,
	     bool by_device, bool stats);
/* A device's argument form: TYPE/DOMID/DEVID. */
void ctl_dev_id(const struct xbd_dev *dev, char *buf, size_t len);
/* Whether arg (TYPE/DOMID/DEVID, DOMID/DEVID or its params) names dev; NULL names every one. */
bool ctl_dev_matches(const struct xbd_dev *dev, const char *arg);

#endif /* XBD_BACK_CONTROL_H */
