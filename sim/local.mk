# sim: rules for this part of the tree (included by the top-level Makefile.am).
#
# libxbdsim: the simulated hypervisor's shared state (domains, guest memory,
# grant tables, event channels) under DIR/hv/.  The xbd-sim command
# (sim/xbd-sim.mk) uses its simhost.h API; processes acting as a domain
# reach it through platform/libxbdplatform.la, which includes it.

noinst_LTLIBRARIES += sim/libxbdsim.la
sim_libxbdsim_la_SOURCES = \
	sim/simhost.h \
	sim/hypervisor.h \
	sim/layout.h \
	sim/host.c \
	sim/keeper.c \
	sim/lock.c \
	sim/dom.c \
	sim/grant.c \
	sim/evtchn.c
