# blkfront: libxbdfront (a userspace blkfront), the xbd-front command
# (bench, check, info) and the nbdkit plugin that exports a vbd over NBD.

noinst_LTLIBRARIES += blkfront/libxbdfront.la
blkfront_libxbdfront_la_SOURCES = \
	blkfront/xbdfront.h \
	blkfront/front-internal.h \
	blkfront/xbdfront.c \
	blkfront/negotiate.c \
	blkfront/io.c \
	blkfront/grants.c
blkfront_libxbdfront_la_CFLAGS = $(AM_CFLAGS) $(XENSTORE_CFLAGS)
blkfront_libxbdfront_la_LIBADD = \
	xenstore/libxbdxenbus.la \
	platform/libxbdplatform.la \
	ring/libxbdring.la

bin_PROGRAMS += blkfront/xbd-front
blkfront_xbd_front_SOURCES = \
	blkfront/xbd-front.c \
	blkfront/cli.h \
	blkfront/cli.c \
	blkfront/device-options.h \
	blkfront/device-options.c \
	blkfront/bench.c \
	blkfront/check.c
blkfront_xbd_front_CFLAGS = $(AM_CFLAGS) $(XENSTORE_CFLAGS)
blkfront_xbd_front_LDADD = blkfront/libxbdfront.la -lm

if BUILD_NBDKIT_PLUGIN
# nbdkit loads this by path in the tests: nbdkit ./blkfront/.libs/nbdkit-xbd-plugin.so
plugin_LTLIBRARIES += blkfront/nbdkit-xbd-plugin.la
blkfront_nbdkit_xbd_plugin_la_SOURCES = \
	blkfront/nbdkit-xbd-plugin.c \
	blkfront/device-options.h \
	blkfront/device-options.c
blkfront_nbdkit_xbd_plugin_la_CFLAGS = $(AM_CFLAGS) $(NBDKIT_CFLAGS) $(XENSTORE_CFLAGS)
blkfront_nbdkit_xbd_plugin_la_LDFLAGS = $(AM_LDFLAGS) -module -avoid-version -shared
blkfront_nbdkit_xbd_plugin_la_LIBADD = blkfront/libxbdfront.la
endif

# Integration tests on the simulator (skip while xbd-sim or xbd-back are missing).
BLKFRONT_TESTS = \
	tests/blkfront/check.sh \
	tests/blkfront/readonly.sh \
	tests/blkfront/bench.sh \
	tests/blkfront/nbd.sh \
	tests/blkfront/reconnect.sh \
	tests/blkfront/testback.sh \
	tests/blkfront/hostile.sh \
	tests/blkfront/reconnect-testback.sh \
	tests/blkfront/variants.sh \
	tests/blkfront/hotunplug.sh \
	tests/blkfront/resize.sh \
	tests/blkfront/grant-stress.sh \
	tests/blkfront/exclusive.sh \
	tests/blkfront/close-gone.sh \
	tests/blkfront/kill-grants.sh \
	tests/blkfront/options.sh
dist_check_SCRIPTS += $(BLKFRONT_TESTS)
TESTS += $(BLKFRONT_TESTS)
dist_man1_MANS += blkfront/xbd-front.1
if BUILD_NBDKIT_PLUGIN
dist_man1_MANS += blkfront/nbdkit-xbd-plugin.1
else
EXTRA_DIST += blkfront/nbdkit-xbd-plugin.1
endif
EXTRA_DIST += tests/blkfront/front-lib.sh tests/blkfront/testback-lib.sh blkfront/README.md

# A minimal (and, on request, hostile) backend the tests run xbd-front against.
check_PROGRAMS += tests/blkfront/testback
tests_blkfront_testback_SOURCES = tests/blkfront/testback.c
tests_blkfront_testback_CFLAGS = $(AM_CFLAGS) $(XENSTORE_CFLAGS)
tests_blkfront_testback_LDADD = \
	xenstore/libxbdxenbus.la \
	platform/libxbdplatform.la \
	ring/libxbdring.la

# Concurrent submitters against a small grant budget (tests/blkfront/grant-stress.sh).
check_PROGRAMS += tests/blkfront/grant-stress
tests_blkfront_grant_stress_SOURCES = tests/blkfront/grant-stress.c
tests_blkfront_grant_stress_CFLAGS = $(AM_CFLAGS) $(XENSTORE_CFLAGS)
tests_blkfront_grant_stress_LDADD = blkfront/libxbdfront.la -lpthread

# The frontend's options table, printed for tests/blkfront/options.sh.
check_PROGRAMS += tests/blkfront/front-options
tests_blkfront_front_options_SOURCES = \
	tests/blkfront/front-options.c \
	blkfront/device-options.h \
	blkfront/device-options.c
tests_blkfront_front_options_CFLAGS = $(AM_CFLAGS) $(XENSTORE_CFLAGS)
tests_blkfront_front_options_LDADD = blkfront/libxbdfront.la
