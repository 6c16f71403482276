# xenstore/xenstored.mk: xbd-xenstored, the simulator's xenstore daemon.
#
# The protocol engine is a convenience library without any I/O, so that the
# daemon, the tests and the libFuzzer target all drive the same code.

noinst_LTLIBRARIES += xenstore/xenstored/libxsd.la
xenstore_xenstored_libxsd_la_SOURCES = \
	xenstore/xenstored/xsd.h \
	xenstore/xenstored/internal.h \
	xenstore/xenstored/hashmap.h \
	xenstore/xenstored/hashmap.c \
	xenstore/xenstored/store.h \
	xenstore/xenstored/store.c \
	xenstore/xenstored/conn.c \
	xenstore/xenstored/ops.c \
	xenstore/xenstored/watch.c \
	xenstore/xenstored/txn.c \
	xenstore/xenstored/domain.c

# Sources of the engine, for the fuzz target built outside libtool.
XSD_ENGINE_C = \
	$(srcdir)/xenstore/xenstored/hashmap.c \
	$(srcdir)/xenstore/xenstored/store.c \
	$(srcdir)/xenstore/xenstored/conn.c \
	$(srcdir)/xenstore/xenstored/ops.c \
	$(srcdir)/xenstore/xenstored/watch.c \
	$(srcdir)/xenstore/xenstored/txn.c \
	$(srcdir)/xenstore/xenstored/domain.c

sbin_PROGRAMS += xenstore/xbd-xenstored
xenstore_xbd_xenstored_SOURCES = xenstore/xenstored/main.c
xenstore_xbd_xenstored_LDADD = xenstore/xenstored/libxsd.la

include $(top_srcdir)/tests/xenstored/local.mk
