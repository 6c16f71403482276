# blkback: xbd-back, the userspace blkback (included by the top-level Makefile.am).

# The storage engines, and the data path below the control plane (with the
# settings and the log it reads), for xbd-back and the tests that link them.
BLKBACK_ENGINE_SOURCES = blkback/engines/engine.c blkback/engines/engine-file.c \
	blkback/engines/engine-aio.c blkback/engines/engine-null.c blkback/engines/engine-fault.c \
	blkback/engines/engine-nbd.c blkback/engines/engine-rbd.c blkback/engines/engine-remote.c
if HAVE_LIBURING
BLKBACK_ENGINE_SOURCES += blkback/engines/engine-uring.c
endif
BLKBACK_DATAPATH_SOURCES = $(BLKBACK_ENGINE_SOURCES) \
	blkback/datapath/dataplane.c blkback/datapath/ring-thread.c blkback/datapath/ring-poll.c \
	blkback/datapath/ring-round.c blkback/datapath/grant-batch.c blkback/datapath/grant-cache.c \
	blkback/datapath/requests.c blkback/datapath/ring-clock.c \
	blkback/datapath/cbt.c blkback/datapath/cbw.c \
	blkback/datapath/journal.c blkback/datapath/throttle.c blkback/datapath/stats.c \
	blkback/datapath/ringcpu.c \
	blkback/settings/options.c blkback/settings/command-line.c blkback/settings/config.c \
	blkback/settings/iolimits.c blkback/log/log.c

sbin_PROGRAMS += blkback/xbd-back
blkback_xbd_back_SOURCES = $(BLKBACK_DATAPATH_SOURCES) \
	blkback/log/log.h \
	blkback/settings/options.h blkback/settings/iolimits.h blkback/settings/table.h \
	blkback/control/device.h blkback/control/xbd-back.c blkback/control/control.c \
	blkback/control/control.h blkback/control/control-show.c \
	blkback/control/vbd3-stats.c \
	blkback/control/lifecycle.c blkback/control/lifecycle.h blkback/control/storage.c \
	blkback/control/sharing.c \
	blkback/control/connect.c blkback/control/device.c blkback/control/discovery.c \
	blkback/control/tracking.h blkback/control/tracking.c blkback/control/checkpoint.c \
	blkback/datapath/dataplane.h blkback/datapath/ring-impl.h blkback/datapath/ring-thread.h \
	blkback/datapath/grant-cache.h blkback/datapath/journal.h blkback/datapath/throttle.h \
	blkback/datapath/stats.h blkback/datapath/ringcpu.h \
	blkback/datapath/cbt.h blkback/datapath/cbt-format.h \
	blkback/engines/engine.h blkback/engines/engine-file.h blkback/engines/engine-remote.h \
	blkback/workers/worker.h blkback/workers/worker.c blkback/workers/wmsg.c \
	blkback/workers/supervisor.c blkback/workers/supervisor.h blkback/workers/spawn.c \
	blkback/workers/bind.c blkback/workers/ring-proxy.c blkback/workers/restart.c \
	blkback/workers/record.c \
	blkback/workers/workers.h \
	blkback/workers/confine.c blkback/workers/confine.h \
	blkback/workers/cgroup.c blkback/workers/cgroup.h
blkback_xbd_back_CPPFLAGS = $(AM_CPPFLAGS) \
	-DXBD_DEFAULT_CONFIG='"$(sysconfdir)/xbd/xbd-back.conf"'
blkback_xbd_back_CFLAGS = $(AM_CFLAGS) $(XENSTORE_CFLAGS) $(XENGNTTAB_CFLAGS) \
	$(XENEVTCHN_CFLAGS) $(XENCTRL_CFLAGS) $(SYSTEMD_CFLAGS) $(LIBNBD_CFLAGS) $(LIBURING_CFLAGS) \
	$(SECCOMP_CFLAGS)
blkback_xbd_back_LDADD = xenstore/libxbdxenbus.la platform/libxbdplatform.la \
	ring/libxbdring.la $(XENSTORE_LIBS) $(XENGNTTAB_LIBS) $(XENEVTCHN_LIBS) \
	$(XENCTRL_LIBS) $(AIO_LIBS) $(SYSTEMD_LIBS) $(LIBNBD_LIBS) $(LIBURING_LIBS) $(SECCOMP_LIBS)

# Installed data: the hotplug script libxl runs for disks with script=
# (as $(sysconfdir)/xen/scripts/xbd), the default configuration, the
# systemd unit and the man pages.  Every directory is under the prefix
# (never an absolute /etc), so that distcheck's install works.
xenscriptsdir = $(sysconfdir)/xen/scripts
xenscripts_SCRIPTS = blkback/installed/xbd
blkback/installed/xbd: blkback/installed/xbd-hotplug
	$(AM_V_GEN)$(MKDIR_P) blkback/installed && cp $(srcdir)/blkback/installed/xbd-hotplug $@ && chmod +x $@
xbdconfdir = $(sysconfdir)/xbd
dist_xbdconf_DATA = blkback/installed/xbd-back.conf
# systemdunitdir: configure --with-systemdsystemunitdir (default $(prefix)/lib/systemd/system).
# xbd-back-metrics.{service,timer}: node_exporter's textfile collector.
systemdunit_DATA = blkback/installed/xbd-back.service blkback/installed/xbd-back-metrics.service
dist_systemdunit_DATA = blkback/installed/xbd-back-metrics.timer
blkback/installed/xbd-back.service: blkback/installed/xbd-back.service.in Makefile
	$(AM_V_GEN)$(MKDIR_P) blkback/installed && sed -e 's|@sbindir[@]|$(sbindir)|g' \
		-e 's|@sysconfdir[@]|$(sysconfdir)|g' $(srcdir)/blkback/installed/xbd-back.service.in >$@
blkback/installed/xbd-back-metrics.service: blkback/installed/xbd-back-metrics.service.in Makefile
	$(AM_V_GEN)$(MKDIR_P) blkback/installed && sed -e 's|@sbindir[@]|$(sbindir)|g' \
		$(srcdir)/blkback/installed/xbd-back-metrics.service.in >$@
dist_man8_MANS = blkback/installed/xbd-back.8
dist_man5_MANS = blkback/installed/xbd-back.conf.5
CLEANFILES += blkback/installed/xbd blkback/installed/xbd-back.service \
	blkback/installed/xbd-back-metrics.service
EXTRA_DIST += blkback/installed/xbd-hotplug blkback/installed/xbd-back.service.in blkback/bench.sh \
	blkback/installed/xbd-back-metrics.service.in \
	blkback/BENCHMARKING.md blkback/README.md

# Tests (tests/blkback/): rawfront is a deliberately rule-breaking frontend.
check_PROGRAMS += tests/blkback/rawfront
tests_blkback_rawfront_SOURCES = tests/blkback/rawfront.c $(TESTFRONT_SOURCES)
tests_blkback_rawfront_CFLAGS = $(AM_CFLAGS) $(XENSTORE_CFLAGS) $(XENGNTTAB_CFLAGS) \
	$(XENEVTCHN_CFLAGS) $(XENCTRL_CFLAGS)
tests_blkback_rawfront_LDADD = xenstore/libxbdxenbus.la platform/libxbdplatform.la \
	ring/libxbdring.la $(XENSTORE_LIBS) $(XENGNTTAB_LIBS) $(XENEVTCHN_LIBS) $(XENCTRL_LIBS)
# The crash journal's ordering argument, at every instant of a model ring.
check_PROGRAMS += tests/blkback/test-journal
tests_blkback_test_journal_SOURCES = tests/blkback/test-journal.c blkback/datapath/journal.c
TESTS += tests/blkback/test-journal
# Stores opened in one process and served in another (what workers do).
check_PROGRAMS += tests/blkback/test-engine-export
tests_blkback_test_engine_export_SOURCES = tests/blkback/test-engine-export.c \
	$(BLKBACK_ENGINE_SOURCES) blkback/log/log.c
tests_blkback_test_engine_export_CFLAGS = $(AM_CFLAGS) $(LIBNBD_CFLAGS) $(LIBURING_CFLAGS)
tests_blkback_test_engine_export_LDADD = $(AIO_LIBS) $(LIBNBD_LIBS) $(LIBURING_LIBS)
TESTS += tests/blkback/test-engine-export
# The latency histograms' arithmetic (stats.c alone).
check_PROGRAMS += tests/blkback/test-latency
tests_blkback_test_latency_SOURCES = tests/blkback/test-latency.c blkback/datapath/stats.c
TESTS += tests/blkback/test-latency
# The I/O limits' buckets on a clock the test drives (throttle.c).
check_PROGRAMS += tests/blkback/test-throttle
tests_blkback_test_throttle_SOURCES = tests/blkback/test-throttle.c blkback/datapath/throttle.c \
	blkback/settings/iolimits.c blkback/log/log.c
tests_blkback_test_throttle_LDADD = -lpthread
TESTS += tests/blkback/test-throttle
# The data path alone, on the simulator without the daemon: rings made, started and
# stopped through dataplane.h, a guest's requests answered end to end.
check_PROGRAMS += tests/blkback/test-dataplane
tests_blkback_test_dataplane_SOURCES = tests/blkback/test-dataplane.c $(BLKBACK_DATAPATH_SOURCES)
tests_blkback_test_dataplane_CPPFLAGS = $(AM_CPPFLAGS) \
	-DXBD_DEFAULT_CONFIG='"$(sysconfdir)/xbd/xbd-back.conf"'
tests_blkback_test_dataplane_CFLAGS = $(AM_CFLAGS) $(LIBNBD_CFLAGS) $(LIBURING_CFLAGS)
tests_blkback_test_dataplane_LDADD = platform/libxbdplatform.la ring/libxbdring.la \
	$(AIO_LIBS) $(LIBNBD_LIBS) $(LIBURING_LIBS) -lm
TESTS += tests/blkback/test-dataplane
# pin-rings' CPU choices and interrupt moves, on a made-up /proc/irq (ringcpu.c alone).
check_PROGRAMS += tests/blkback/test-ringcpu
tests_blkback_test_ringcpu_SOURCES = tests/blkback/test-ringcpu.c blkback/datapath/ringcpu.c \
	blkback/log/log.c
tests_blkback_test_ringcpu_LDADD = -lpthread
TESTS += tests/blkback/test-ringcpu
BLKBACK_TESTS = \
	tests/blkback/data-rw.sh \
	tests/blkback/limits.sh \
	tests/blkback/noisy-neighbour.sh \
	tests/blkback/data-flush.sh \
	tests/blkback/fua-mode.sh \
	tests/blkback/direct.sh \
	tests/blkback/data-discard.sh \
	tests/blkback/data-indirect.sh \
	tests/blkback/persistent-lru.sh \
	tests/blkback/batching.sh \
	tests/blkback/stress.sh \
	tests/blkback/ring-layouts.sh \
	tests/blkback/readonly.sh \
	tests/blkback/format-guard.sh \
	tests/blkback/grant-copy.sh \
	tests/blkback/engine-null.sh \
	tests/blkback/engine-uring.sh \
	tests/blkback/engine-blockdev.sh \
	tests/blkback/engine-nbd.sh \
	tests/blkback/engine-rbd.sh \
	tests/blkback/hostile-requests.sh \
	tests/blkback/hostile-grants.sh \
	tests/blkback/hostile-ring.sh \
	tests/blkback/hostile-flood.sh \
	tests/blkback/single-daemon.sh \
	tests/blkback/hostile-logflood.sh \
	tests/blkback/hostile-xenstore.sh \
	tests/blkback/log-guest-text.sh \
	tests/blkback/log-severity.sh \
	tests/blkback/mode.sh \
	tests/blkback/hostile-garbage.sh \
	tests/blkback/hostile-noconsume.sh \
	tests/blkback/lifecycle-keys.sh \
	tests/blkback/lifecycle-remove.sh \
	tests/blkback/lifecycle-domain-death.sh \
	tests/blkback/lifecycle-reconnect.sh \
	tests/blkback/lifecycle-restart.sh \
	tests/blkback/lifecycle-restart-nojournal.sh \
	tests/blkback/lifecycle-resize.sh \
	tests/blkback/lifecycle-drain.sh \
	tests/blkback/lifecycle-flap.sh \
	tests/blkback/resource-limits.sh \
	tests/blkback/batching-large.sh \
	tests/blkback/persistent-batch.sh \
	tests/blkback/poll-reap.sh \
	tests/blkback/clock-reads.sh \
	tests/blkback/stats.sh \
	tests/blkback/stats-latency.sh \
	tests/blkback/stats-prometheus.sh \
	tests/blkback/stats-parse.sh \
	tests/blkback/xentop-vbd3.sh \
	tests/blkback/stats-interval.sh \
	tests/blkback/options.sh \
	tests/blkback/settings-table.sh \
	tests/blkback/unknown-key.sh \
	tests/blkback/size-suffixes.sh \
	tests/blkback/cgroup-quiet.sh \
	tests/blkback/storage-refused.sh \
	tests/blkback/sharing.sh \
	tests/blkback/sharing-rbd.sh \
	tests/blkback/start-stop.sh \
	tests/blkback/domain-name.sh \
	tests/blkback/params-shown.sh \
	tests/blkback/readme-samples.sh \
	tests/blkback/journal-fields.sh \
	tests/blkback/cli-basics.sh \
	tests/blkback/run-mode.sh \
	tests/blkback/pin-rings.sh \
	tests/blkback/uring-wait.sh \
	tests/blkback/hotplug.sh \
	tests/blkback/config.sh \
	tests/blkback/service.sh \
	tests/blkback/service-reload.sh \
	tests/blkback/sigterm-load.sh \
	tests/blkback/workers.sh
dist_check_SCRIPTS += $(BLKBACK_TESTS)
EXTRA_DIST += tests/blkback/common.sh tests/lib/ceph-cluster.sh
TESTS += $(BLKBACK_TESTS)
# Every test needs the daemon and rawfront built first.
$(BLKBACK_TESTS:.sh=.log): blkback/xbd-back$(EXEEXT) xbdctl/xbdctl$(EXEEXT) \
	tests/blkback/rawfront$(EXEEXT)
# The live view's test runs xbd-front bench as the guest.
tests/blkback/stats-interval.log: blkfront/xbd-front$(EXEEXT)

# The export of a point-in-time view (export/): an nbdkit plugin that reads the
# disk through xbd-back's own engines and the view's copies (datapath/cbt-format.h).
if BUILD_NBDKIT_PLUGIN
# nbdkit loads this by path in the tests: nbdkit ./blkback/.libs/nbdkit-xbdview-plugin.so
plugin_LTLIBRARIES += blkback/nbdkit-xbdview-plugin.la
blkback_nbdkit_xbdview_plugin_la_SOURCES = blkback/export/nbdkit-xbdview-plugin.c \
	$(BLKBACK_ENGINE_SOURCES) blkback/settings/options.c blkback/settings/iolimits.c \
	blkback/settings/config.c \
	blkback/log/log.c
blkback_nbdkit_xbdview_plugin_la_CFLAGS = $(AM_CFLAGS) $(NBDKIT_CFLAGS) $(LIBNBD_CFLAGS) \
	$(LIBURING_CFLAGS)
blkback_nbdkit_xbdview_plugin_la_LDFLAGS = $(AM_LDFLAGS) -module -avoid-version -shared
blkback_nbdkit_xbdview_plugin_la_LIBADD = $(AIO_LIBS) $(LIBNBD_LIBS) $(LIBURING_LIBS)
dist_man1_MANS += blkback/export/nbdkit-xbdview-plugin.1
else
EXTRA_DIST += blkback/export/nbdkit-xbdview-plugin.1
endif
