# tests/robust/local.mk: hostile guests, storage faults, crashes and churn.
# The short versions run in `make check`; `make check-robust` runs the long
# ones (200 attach/detach and domain cycles, 64 disks at once).

check_PROGRAMS += tests/robust/evilfront
tests_robust_evilfront_SOURCES = tests/robust/evilfront.c $(TESTFRONT_SOURCES)
tests_robust_evilfront_CFLAGS = $(AM_CFLAGS) $(XENSTORE_CFLAGS) $(XENGNTTAB_CFLAGS) \
	$(XENEVTCHN_CFLAGS) $(XENCTRL_CFLAGS)
tests_robust_evilfront_LDADD = xenstore/libxbdxenbus.la platform/libxbdplatform.la \
	ring/libxbdring.la $(XENSTORE_LIBS) $(XENGNTTAB_LIBS) $(XENEVTCHN_LIBS) $(XENCTRL_LIBS)

check_PROGRAMS += tests/robust/xsflood
tests_robust_xsflood_SOURCES = tests/robust/xsflood.c $(TESTFRONT_SOURCES)
tests_robust_xsflood_CFLAGS = $(AM_CFLAGS) $(XENSTORE_CFLAGS) $(XENGNTTAB_CFLAGS) \
	$(XENEVTCHN_CFLAGS) $(XENCTRL_CFLAGS)
tests_robust_xsflood_LDADD = $(tests_robust_evilfront_LDADD)

ROBUST_TESTS = \
	tests/robust/xs-flood.sh \
	tests/robust/crash-points.sh \
	tests/robust/hostile-fio.sh \
	tests/robust/faults.sh \
	tests/robust/vanish.sh \
	tests/robust/crash.sh \
	tests/robust/churn.sh \
	tests/robust/many.sh \
	tests/robust/rawfront-reuse.sh \
	tests/robust/workers-kill.sh \
	tests/robust/workers-crash-points.sh \
	tests/robust/workers-seccomp.sh \
	tests/robust/workers-slow-start.sh \
	tests/robust/workers-silent.sh \
	tests/robust/workers-silent-once.sh \
	tests/robust/workers-flood.sh \
	tests/robust/workers-cgroup.sh \
	tests/robust/cgroup-host.sh \
	tests/robust/nbd-stall.sh \
	tests/robust/nbd-noreply.sh \
	tests/robust/nbd-request-timeout.sh
ROBUST_LONG_TESTS = \
	tests/robust/crash-long.sh \
	tests/robust/churn-long.sh \
	tests/robust/many-long.sh
dist_check_SCRIPTS += $(ROBUST_TESTS) $(ROBUST_LONG_TESTS)
EXTRA_DIST += tests/robust/lib.sh tests/robust/ctl-answer.py tests/robust/nbd-stall.py
TESTS += $(ROBUST_TESTS)
ROBUST_DEPS = blkback/xbd-back$(EXEEXT) xbdctl/xbdctl$(EXEEXT) tests/blkback/rawfront$(EXEEXT) \
	tests/robust/evilfront$(EXEEXT) tests/robust/xsflood$(EXEEXT) sim/xbd-sim$(EXEEXT) xenstore/xbd-xenstored$(EXEEXT)
$(ROBUST_TESTS:.sh=.log) $(ROBUST_LONG_TESTS:.sh=.log): $(ROBUST_DEPS)

# The long runs: make check-robust
check-robust: $(ROBUST_DEPS) $(check_PROGRAMS)
	$(MAKE) $(AM_MAKEFLAGS) check TESTS='$(ROBUST_TESTS) $(ROBUST_LONG_TESTS)'
.PHONY: check-robust

# make check-long runs the 100-kill crash test too (beside the e2e matrix).
check-crash-long: $(ROBUST_DEPS) $(check_PROGRAMS)
	$(MAKE) $(AM_MAKEFLAGS) check TESTS='tests/robust/crash-long.sh'
check-long: check-crash-long
.PHONY: check-crash-long
