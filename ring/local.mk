# ring: rules for this part of the tree (included by the top-level Makefile.am).
#
# libxbdring: the blkif wire protocol (pure C, no I/O), its unit tests
# under tests/ring/, and a libFuzzer target built with clang.

noinst_LTLIBRARIES += ring/libxbdring.la
ring_libxbdring_la_SOURCES = \
	ring/ring.h \
	ring/wire.h \
	ring/abi.c \
	ring/ring.c \
	ring/back.c \
	ring/front.c \
	ring/validate.c

# ---- unit tests ----
RING_TESTS = \
	tests/ring/test-ring-abi \
	tests/ring/test-ring-notify \
	tests/ring/test-ring-validate \
	tests/ring/test-ring-frontback \
	tests/ring/test-ring-threads
check_PROGRAMS += $(RING_TESTS)
TESTS += $(RING_TESTS)
noinst_HEADERS += tests/ring/ring-test.h

tests_ring_test_ring_abi_SOURCES = tests/ring/test-ring-abi.c
tests_ring_test_ring_abi_LDADD = ring/libxbdring.la
tests_ring_test_ring_notify_SOURCES = tests/ring/test-ring-notify.c
tests_ring_test_ring_notify_LDADD = ring/libxbdring.la
tests_ring_test_ring_validate_SOURCES = tests/ring/test-ring-validate.c
tests_ring_test_ring_validate_LDADD = ring/libxbdring.la
tests_ring_test_ring_frontback_SOURCES = tests/ring/test-ring-frontback.c
tests_ring_test_ring_frontback_LDADD = ring/libxbdring.la
tests_ring_test_ring_threads_SOURCES = tests/ring/test-ring-threads.c
tests_ring_test_ring_threads_LDADD = ring/libxbdring.la

# ---- arm64 (issue 46) ----
# The unit tests above and the journal's, cross-compiled for arm64 and run
# under qemu-aarch64 user mode; and the barriers Arm needs, read from the
# cross-compiled code.  Both skip without Debian's cross compiler.
RING_ARM64_TESTS = tests/ring/arm64-user.sh tests/ring/arm64-barriers.sh
dist_check_SCRIPTS += $(RING_ARM64_TESTS)
TESTS += $(RING_ARM64_TESTS)

# ---- fuzzing ----
# The fuzzer is built straight from the library sources with clang's
# libFuzzer, ASan and UBSan (libtool objects from gcc cannot be
# instrumented for it).  `make fuzz` runs it for FUZZ_SECONDS; `make check`
# runs a short pass through tests/ring/fuzz-short.sh (skipped without clang).
FUZZ_SECONDS = 60
FUZZ_RING = tests/ring/fuzz-ring$(EXEEXT)
FUZZ_RING_SRCS = \
	$(srcdir)/tests/ring/fuzz-ring.c \
	$(srcdir)/ring/abi.c \
	$(srcdir)/ring/ring.c \
	$(srcdir)/ring/back.c \
	$(srcdir)/ring/front.c \
	$(srcdir)/ring/validate.c
EXTRA_DIST += tests/ring/fuzz-ring.c
dist_check_SCRIPTS += tests/ring/fuzz-short.sh
TESTS += tests/ring/fuzz-short.sh
CLEANFILES += $(FUZZ_RING)

if HAVE_CLANG
$(FUZZ_RING): $(FUZZ_RING_SRCS) $(srcdir)/ring/ring.h $(srcdir)/ring/wire.h
	@$(MKDIR_P) tests/ring
	$(AM_V_CCLD)$(CLANG) -g -O1 -fsanitize=fuzzer,address,undefined \
		-fno-sanitize-recover=undefined $(WARN_CFLAGS) \
		-I$(top_srcdir) -I$(top_builddir) $(FUZZ_RING_SRCS) -o $@

# The short run needs the fuzzer; the harness builds it first.
tests/ring/fuzz-short.log: $(FUZZ_RING)

fuzz-ring: $(FUZZ_RING)
	@$(MKDIR_P) tests/ring/fuzz-ring-corpus
	./$(FUZZ_RING) -max_total_time=$(FUZZ_SECONDS) -max_len=8192 -print_final_stats=1 \
		-artifact_prefix=tests/ring/ tests/ring/fuzz-ring-corpus
else
fuzz-ring:
	@echo "fuzz-ring: clang not found at configure time; install clang and re-run configure" >&2
	@exit 1
endif

clean-local: clean-fuzz-ring
clean-fuzz-ring:
	-rm -rf tests/ring/fuzz-ring-corpus

fuzz: fuzz-ring
.PHONY: fuzz fuzz-ring clean-fuzz-ring
