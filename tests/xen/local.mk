# tests/xen/local.mk: make check-xen, real Xen booted in QEMU.
# Not part of `make check`: it needs root, about 1.5 GB in $(WORK) and
# about 11 minutes of both cores (QEMU without hardware virtualisation;
# up to 25 on a busy host).
# Run it as root from a build tree configured WITHOUT --enable-sanitizers
# (the binaries are copied into the emulated dom0):
#     make check-xen [WORK=/var/tmp/xen-in-qemu] [STEPS='xbd mq ...']
XEN_CHECK_PROGS = blkback/xbd-back$(EXEEXT) blkback/xbdctl$(EXEEXT) blkfront/xbd-front$(EXEEXT)
if BUILD_NBDKIT_PLUGIN
XEN_CHECK_PROGS += blkfront/nbdkit-xbd-plugin.la
endif
check-xen: $(XEN_CHECK_PROGS)
	BUILDDIR=$(abs_top_builddir) $(SHELL) $(top_srcdir)/tests/xen/xen-check.sh
.PHONY: check-xen
EXTRA_DIST += tests/xen/xen-check.sh tests/xen/dom0-init.sh tests/xen/domu-init.sh \
	tests/xen/README.md
