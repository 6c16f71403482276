# platform: rules for this part of the tree (included by the top-level Makefile.am).
#
# libxbdplatform: everything that is a hypercall on real Xen, behind
# platform/platform.h, with the real implementation (libxengnttab,
# libxenevtchn, libxenctrl) and the simulated one (sim/libxbdsim.la).
# Link this one library for both.  Its tests and micro-benchmark live
# under tests/platform/.

noinst_LTLIBRARIES += platform/libxbdplatform.la
platform_libxbdplatform_la_SOURCES = \
	platform/platform.h \
	platform/impl.h \
	platform/platform.c \
	platform/xen.c \
	platform/xen-fd.c \
	platform/sim.c
platform_libxbdplatform_la_CFLAGS = $(AM_CFLAGS) \
	$(XENGNTTAB_CFLAGS) $(XENEVTCHN_CFLAGS) $(XENCTRL_CFLAGS)
platform_libxbdplatform_la_LIBADD = sim/libxbdsim.la \
	$(XENGNTTAB_LIBS) $(XENEVTCHN_LIBS) $(XENCTRL_LIBS)

# ---- tests ----
PLATFORM_TESTS = \
	tests/platform/test-platform-open \
	tests/platform/test-gnt-map \
	tests/platform/test-gnt-copy \
	tests/platform/test-gnt-share \
	tests/platform/test-evtchn \
	tests/platform/test-evtchn-million \
	tests/platform/test-domain \
	tests/platform/test-hostile
check_PROGRAMS += $(PLATFORM_TESTS)
TESTS += $(PLATFORM_TESTS)
noinst_HEADERS += tests/platform/ptest.h

tests_platform_test_platform_open_SOURCES = tests/platform/test-platform-open.c
tests_platform_test_platform_open_LDADD = platform/libxbdplatform.la
tests_platform_test_gnt_map_SOURCES = tests/platform/test-gnt-map.c
tests_platform_test_gnt_map_LDADD = platform/libxbdplatform.la
tests_platform_test_gnt_copy_SOURCES = tests/platform/test-gnt-copy.c
tests_platform_test_gnt_copy_LDADD = platform/libxbdplatform.la
tests_platform_test_gnt_share_SOURCES = tests/platform/test-gnt-share.c
tests_platform_test_gnt_share_LDADD = platform/libxbdplatform.la
tests_platform_test_evtchn_SOURCES = tests/platform/test-evtchn.c
tests_platform_test_evtchn_LDADD = platform/libxbdplatform.la
tests_platform_test_evtchn_million_SOURCES = tests/platform/test-evtchn-million.c
tests_platform_test_evtchn_million_LDADD = platform/libxbdplatform.la
tests_platform_test_domain_SOURCES = tests/platform/test-domain.c
tests_platform_test_domain_LDADD = platform/libxbdplatform.la
tests_platform_test_hostile_SOURCES = tests/platform/test-hostile.c
tests_platform_test_hostile_LDADD = platform/libxbdplatform.la

# ---- micro-benchmark: `make bench-platform` prints the figures; check only
# runs it briefly to see that it works ----
noinst_PROGRAMS += tests/platform/bench-platform
tests_platform_bench_platform_SOURCES = tests/platform/bench-platform.c
tests_platform_bench_platform_LDADD = platform/libxbdplatform.la
dist_check_SCRIPTS += tests/platform/bench-smoke.sh tests/platform/guest-shrink.sh
TESTS += tests/platform/bench-smoke.sh tests/platform/guest-shrink.sh
tests/platform/bench-smoke.log: tests/platform/bench-platform$(EXEEXT)

bench-platform: tests/platform/bench-platform$(EXEEXT)
	./tests/platform/bench-platform$(EXEEXT)
.PHONY: bench-platform
