# tests/xenstored/local.mk: tests of xbd-xenstored (included from
# xenstore/xenstored.mk).  Every test starts its own daemon in a mktemp
# folder and stops it at exit.

noinst_LTLIBRARIES += tests/xenstored/libxsdtest.la
tests_xenstored_libxsdtest_la_SOURCES = \
	tests/xenstored/harness.h tests/xenstored/harness.c
tests_xenstored_libxsdtest_la_CFLAGS = $(AM_CFLAGS) $(XENSTORE_CFLAGS)
XSD_TEST_LIBS = tests/xenstored/libxsdtest.la $(XENSTORE_LIBS)

XSD_TEST_PROGS = \
	tests/xenstored/test-ops \
	tests/xenstored/test-wire \
	tests/xenstored/test-limits \
	tests/xenstored/test-stress
check_PROGRAMS += $(XSD_TEST_PROGS) tests/xenstored/xsd-ctl
TESTS += $(XSD_TEST_PROGS)

tests_xenstored_test_ops_SOURCES = tests/xenstored/test-ops.c
tests_xenstored_test_ops_CFLAGS = $(AM_CFLAGS) $(XENSTORE_CFLAGS)
tests_xenstored_test_ops_LDADD = $(XSD_TEST_LIBS)
tests_xenstored_test_wire_SOURCES = tests/xenstored/test-wire.c
tests_xenstored_test_wire_CFLAGS = $(AM_CFLAGS) $(XENSTORE_CFLAGS)
tests_xenstored_test_wire_LDADD = $(XSD_TEST_LIBS)
tests_xenstored_test_limits_SOURCES = tests/xenstored/test-limits.c
tests_xenstored_test_limits_CFLAGS = $(AM_CFLAGS) $(XENSTORE_CFLAGS)
tests_xenstored_test_limits_LDADD = $(XSD_TEST_LIBS)
tests_xenstored_test_stress_SOURCES = tests/xenstored/test-stress.c
tests_xenstored_test_stress_CFLAGS = $(AM_CFLAGS) $(XENSTORE_CFLAGS)
tests_xenstored_test_stress_LDADD = $(XSD_TEST_LIBS)
tests_xenstored_xsd_ctl_SOURCES = tests/xenstored/xsd-ctl.c
tests_xenstored_xsd_ctl_CFLAGS = $(AM_CFLAGS) $(XENSTORE_CFLAGS)
tests_xenstored_xsd_ctl_LDADD = $(XSD_TEST_LIBS)

# The programs run the daemon; make sure it is built first.
EXTRA_tests_xenstored_test_ops_DEPENDENCIES = xenstore/xbd-xenstored
EXTRA_tests_xenstored_test_wire_DEPENDENCIES = xenstore/xbd-xenstored
EXTRA_tests_xenstored_test_limits_DEPENDENCIES = xenstore/xbd-xenstored
EXTRA_tests_xenstored_test_stress_DEPENDENCIES = xenstore/xbd-xenstored
EXTRA_tests_xenstored_xsd_ctl_DEPENDENCIES = xenstore/xbd-xenstored

dist_check_SCRIPTS += tests/xenstored/tools.sh tests/xenstored/fuzz.sh
EXTRA_DIST += tests/xenstored/lib.sh tests/xenstored/fuzz-xenstored.c
TESTS += tests/xenstored/tools.sh tests/xenstored/fuzz.sh

# libFuzzer target on the engine, built with clang outside libtool.
# `make fuzz-xenstored` runs it for XSD_FUZZ_SECONDS (default 60) and keeps
# its corpus in tests/xenstored/fuzz-corpus; make check runs it 5 seconds.
XSD_FUZZ_SECONDS = 60
FUZZ_TARGETS += fuzz-xenstored
if HAVE_CLANG
CLEANFILES += tests/xenstored/fuzz-xenstored
# Built for make check through the test log's prerequisite.
tests/xenstored/fuzz.log: tests/xenstored/fuzz-xenstored
tests/xenstored/fuzz-xenstored: $(XSD_ENGINE_C) \
		$(srcdir)/tests/xenstored/fuzz-xenstored.c \
		$(srcdir)/xenstore/xenstored/xsd.h \
		$(srcdir)/xenstore/xenstored/internal.h \
		$(srcdir)/xenstore/xenstored/store.h \
		$(srcdir)/xenstore/xenstored/hashmap.h config.h
	$(AM_V_CC)$(MKDIR_P) tests/xenstored && \
	$(CLANG) -g -O1 -fsanitize=fuzzer,address,undefined \
		-fno-sanitize-recover=undefined -I$(top_srcdir) \
		-I$(top_builddir) -o $@ $(XSD_ENGINE_C) \
		$(srcdir)/tests/xenstored/fuzz-xenstored.c

fuzz-xenstored: tests/xenstored/fuzz-xenstored
	@$(MKDIR_P) tests/xenstored/fuzz-corpus
	top_srcdir='$(abs_top_srcdir)' top_builddir='$(abs_top_builddir)' \
	FUZZ_TIME='$(XSD_FUZZ_SECONDS)' \
	FUZZ_CORPUS='$(abs_top_builddir)/tests/xenstored/fuzz-corpus' \
	$(SHELL) $(srcdir)/tests/xenstored/fuzz.sh
else
fuzz-xenstored:
	@echo "fuzz-xenstored: clang not found at configure time; skipped"
endif
clean-local: clean-fuzz-xenstored
clean-fuzz-xenstored:
	-rm -rf tests/xenstored/fuzz-corpus
.PHONY: fuzz-xenstored clean-fuzz-xenstored
