# tests/e2e/local.mk: end-to-end fio tests through nbdkit, make demo, make check-long.
#
#   make check       runs the short matrix (8 MiB per row) with the rest
#   make check-long  runs the whole matrix with 256 MiB per row and prints
#                    its table (also left in e2e-matrix-long.md)
#   make demo        the guided demo (tests/e2e/demo.sh)

E2E_TESTS = \
	tests/e2e/matrix-io.sh \
	tests/e2e/matrix-queues.sh \
	tests/e2e/matrix-grants.sh \
	tests/e2e/matrix-lifecycle.sh \
	tests/e2e/matrix-engines.sh \
	tests/e2e/matrix-uring.sh \
	tests/e2e/matrix-pcache.sh \
	tests/e2e/readme-by-hand.sh
TESTS += $(E2E_TESTS)
dist_check_SCRIPTS += $(E2E_TESTS)
EXTRA_DIST += tests/e2e/lib.sh tests/e2e/matrix.sh tests/e2e/demo.sh scripts/demo.sh
CLEANFILES += e2e-matrix-long.md e2e-matrix-long.md.lock

.PHONY: demo check-long

demo: all
	top_srcdir='$(abs_top_srcdir)' top_builddir='$(abs_top_builddir)' \
		$(SHELL) '$(abs_top_srcdir)/tests/e2e/demo.sh'

# The e2e tests need only the programs of `all`, so their logs are made
# directly through the harness's .log rules, not through check-am (which
# builds every check program and script of the tree first).
E2E_LOGS = $(E2E_TESTS:.sh=.log)
check-long: all
	rm -f e2e-matrix-long.md e2e-matrix-long.md.lock $(E2E_LOGS) $(E2E_LOGS:.log=.trs)
	E2E_LONG=1 E2E_REPORT='$(abs_top_builddir)/e2e-matrix-long.md' \
		$(MAKE) $(AM_MAKEFLAGS) $(E2E_LOGS); \
	cat e2e-matrix-long.md 2>/dev/null; \
	if grep -l ':test-result: \(FAIL\|ERROR\|XPASS\)' $(E2E_LOGS:.log=.trs); then \
		echo "check-long: FAILED (see the .log files above)"; exit 1; fi; \
	echo "check-long: every row passed"
