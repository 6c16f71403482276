# xenstore/local.mk: libxbdxenbus, the xenstore layer over libxenstore
# (typed reads/writes, transactions, watches, XenbusState machine), and its tests.
noinst_LTLIBRARIES += xenstore/libxbdxenbus.la
xenstore_libxbdxenbus_la_SOURCES = \
	xenstore/xenbus.c \
	xenstore/xenbus-path.c \
	xenstore/xenbus-watch.c \
	xenstore/xenbus-state.c
xenstore_libxbdxenbus_la_CFLAGS = $(AM_CFLAGS) $(XENSTORE_CFLAGS)
xenstore_libxbdxenbus_la_LIBADD = $(XENSTORE_LIBS)
noinst_HEADERS += xenstore/xenbus.h xenstore/xenbus-internal.h

# Tests.  The ones that talk to xenstore start a simulated host (xbd-sim +
# xbd-xenstored) and skip with 77 when those are not built.
check_PROGRAMS += \
	tests/xenbus/test-parse \
	tests/xenbus/test-rw \
	tests/xenbus/test-txn \
	tests/xenbus/test-watch \
	tests/xenbus/test-state
TESTS += \
	tests/xenbus/test-parse \
	tests/xenbus/test-rw \
	tests/xenbus/test-txn \
	tests/xenbus/test-watch \
	tests/xenbus/test-state
XENBUS_TEST_CFLAGS = $(AM_CFLAGS) $(XENSTORE_CFLAGS)
XENBUS_TEST_LDADD = xenstore/libxbdxenbus.la $(XENSTORE_LIBS)
XENBUS_TEST_HARNESS = tests/xenbus/harness.c tests/xenbus/harness.h
tests_xenbus_test_parse_SOURCES = tests/xenbus/test-parse.c tests/xenbus/harness.h
tests_xenbus_test_parse_CFLAGS = $(XENBUS_TEST_CFLAGS)
tests_xenbus_test_parse_LDADD = $(XENBUS_TEST_LDADD)
tests_xenbus_test_rw_SOURCES = tests/xenbus/test-rw.c $(XENBUS_TEST_HARNESS)
tests_xenbus_test_rw_CFLAGS = $(XENBUS_TEST_CFLAGS)
tests_xenbus_test_rw_LDADD = $(XENBUS_TEST_LDADD)
tests_xenbus_test_txn_SOURCES = tests/xenbus/test-txn.c $(XENBUS_TEST_HARNESS)
tests_xenbus_test_txn_CFLAGS = $(XENBUS_TEST_CFLAGS)
tests_xenbus_test_txn_LDADD = $(XENBUS_TEST_LDADD)
tests_xenbus_test_watch_SOURCES = tests/xenbus/test-watch.c $(XENBUS_TEST_HARNESS)
tests_xenbus_test_watch_CFLAGS = $(XENBUS_TEST_CFLAGS)
tests_xenbus_test_watch_LDADD = $(XENBUS_TEST_LDADD)
tests_xenbus_test_state_SOURCES = tests/xenbus/test-state.c $(XENBUS_TEST_HARNESS)
tests_xenbus_test_state_CFLAGS = $(XENBUS_TEST_CFLAGS)
tests_xenbus_test_state_LDADD = $(XENBUS_TEST_LDADD)
