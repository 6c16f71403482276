# tests/backup/local.mk: incremental backups of running guests (issue 49):
# changed-block tracking, checkpoints, point-in-time views and their export.
# The short versions run in `make check` (crash.sh: 3 rounds of kill -9 at
# random instants; survive.sh: kills of xbd-back and the worker at fixed
# points); `make check-backup-long` runs the crash rounds 20 times.
# readme-backup.sh runs README.md's "Back up a running guest" commands
# as printed.

# The tracking's pieces on their own (the data path's cbt.c on a file of the test's).
check_PROGRAMS += tests/backup/test-cbt
tests_backup_test_cbt_SOURCES = tests/backup/test-cbt.c $(BLKBACK_DATAPATH_SOURCES)
tests_backup_test_cbt_CPPFLAGS = $(AM_CPPFLAGS) \
	-DXBD_DEFAULT_CONFIG='"$(sysconfdir)/xbd/xbd-back.conf"'
tests_backup_test_cbt_CFLAGS = $(AM_CFLAGS) $(LIBNBD_CFLAGS) $(LIBURING_CFLAGS)
tests_backup_test_cbt_LDADD = platform/libxbdplatform.la ring/libxbdring.la \
	$(AIO_LIBS) $(LIBNBD_LIBS) $(LIBURING_LIBS) -lm
TESTS += tests/backup/test-cbt

BACKUP_TESTS = \
	tests/backup/roundtrip.sh \
	tests/backup/survive.sh \
	tests/backup/crash.sh \
	tests/backup/errors.sh \
	tests/backup/rbd.sh \
	tests/backup/readme-backup.sh \
	tests/backup/drain-timeout.sh
BACKUP_LONG_TESTS = \
	tests/backup/crash-long.sh
dist_check_SCRIPTS += $(BACKUP_TESTS) $(BACKUP_LONG_TESTS)
EXTRA_DIST += tests/backup/lib.sh tests/backup/nbd-extents.py tests/backup/disk-quiet.py
TESTS += $(BACKUP_TESTS)
BACKUP_DEPS = blkback/xbd-back$(EXEEXT) xbdctl/xbdctl$(EXEEXT) tests/blkback/rawfront$(EXEEXT) \
	sim/xbd-sim$(EXEEXT) xenstore/xbd-xenstored$(EXEEXT)
$(BACKUP_TESTS:.sh=.log) $(BACKUP_LONG_TESTS:.sh=.log): $(BACKUP_DEPS)

# 20 rounds of kill -9 of xbd-back or of the worker at random instants between checkpoints.
check-backup-long: $(BACKUP_DEPS) $(check_PROGRAMS)
	$(MAKE) $(AM_MAKEFLAGS) check TESTS='$(BACKUP_LONG_TESTS)'
check-long: check-backup-long
.PHONY: check-backup-long
