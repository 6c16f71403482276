# xbdctl: xbd-back's control socket client (included by the top-level Makefile.am):
# reads counters and changes run-time settings.
sbin_PROGRAMS += xbdctl/xbdctl
xbdctl_xbdctl_SOURCES = xbdctl/xbdctl.c xbdctl/xbdctl-request.c xbdctl/xbdctl-view.c xbdctl/xbdctl.h
xbdctl_xbdctl_LDADD = -lm
dist_man8_MANS += xbdctl/xbdctl.8
# The keys xbdctl set takes, for its help: read from the settings table.
nodist_xbdctl_xbdctl_SOURCES = xbdctl/set-keys.h
xbdctl/xbdctl.$(OBJEXT): xbdctl/set-keys.h
xbdctl/set-keys.h: $(srcdir)/xbdctl/set-keys.awk $(srcdir)/blkback/settings/options.c
	$(AM_V_GEN)$(MKDIR_P) xbdctl && $(AWK) -f $(srcdir)/xbdctl/set-keys.awk \
		$(srcdir)/blkback/settings/options.c >$@.tmp && mv $@.tmp $@
CLEANFILES += xbdctl/set-keys.h
EXTRA_DIST += xbdctl/set-keys.awk
