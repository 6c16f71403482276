# xbdctl: xbd-back's control socket client (included by the top-level Makefile.am):
# reads counters and changes run-time settings.
sbin_PROGRAMS += xbdctl/xbdctl
xbdctl_xbdctl_SOURCES = xbdctl/xbdctl.c xbdctl/xbdctl-request.c xbdctl/xbdctl-view.c xbdctl/xbdctl.h
xbdctl_xbdctl_LDADD = -lm
dist_man8_MANS += xbdctl/xbdctl.8
