# sim/xbd-sim.mk: the xbd-sim command (simulated host control).
bin_PROGRAMS += sim/xbd-sim
sim_xbd_sim_SOURCES = \
	sim/xbd-sim.c \
	sim/xbd-sim-domain.c \
	sim/xbd-sim-disk.c \
	sim/xbd-sim-shared.c \
	sim/xbd-sim.h
sim_xbd_sim_CFLAGS = $(AM_CFLAGS) $(XENSTORE_CFLAGS)
sim_xbd_sim_LDADD = xenstore/libxbdxenbus.la platform/libxbdplatform.la $(XENSTORE_LIBS)

# Tests of the command (they skip while xbd-xenstored is not built), and the
# shell helpers every simulator test sources.
dist_check_SCRIPTS += \
	tests/sim/start-stop.sh \
	tests/sim/domain.sh \
	tests/sim/disk-add.sh \
	tests/sim/disk-remove.sh \
	tests/sim/bad-args.sh
TESTS += \
	tests/sim/start-stop.sh \
	tests/sim/domain.sh \
	tests/sim/disk-add.sh \
	tests/sim/disk-remove.sh \
	tests/sim/bad-args.sh
EXTRA_DIST += tests/lib/sim.sh
