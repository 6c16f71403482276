# tests/debian/local.mk: the Debian packaging (debian/) and its test.
#
# tests/debian/package.sh builds the packages with dpkg-buildpackage from
# a copy of the source, installs them on this machine (root), checks what
# they installed and purges them.

DEBIAN_TESTS = tests/debian/package.sh tests/debian/build-depends.sh
TESTS += $(DEBIAN_TESTS)
dist_check_SCRIPTS += $(DEBIAN_TESTS)
# The hotplug check runs the installed script on a simulated host.
$(DEBIAN_TESTS:.sh=.log): sim/xbd-sim$(EXEEXT) xenstore/xbd-xenstored$(EXEEXT)

EXTRA_DIST += \
	debian/changelog \
	debian/control \
	debian/copyright \
	debian/rules \
	debian/source/format \
	debian/not-installed \
	debian/xbd-back.install \
	debian/xbd-back.docs \
	debian/xbd-back.postinst \
	debian/xbd-back.prerm \
	debian/xbd-back.postrm \
	debian/xbd-back.README.Debian \
	debian/xbd-back.NEWS \
	debian/xbd-front.install \
	debian/xbd-front.docs \
	debian/nbdkit-plugin-xbd.install

# The packages built in clean Debian 12 and 13 chroots (debootstrap, the
# network, root; the chroots cached under /var/tmp): a missing build
# dependency fails it.  Too long for make check, whose build-depends.sh
# checks debian/control against configure.ac.
EXTRA_DIST += tests/debian/chroot-build.sh
.PHONY: check-packages
check-packages:
	top_srcdir='$(abs_top_srcdir)' top_builddir='$(abs_top_builddir)' \
		$(SHELL) '$(abs_top_srcdir)/tests/debian/chroot-build.sh' bookworm trixie
