#!/bin/sh
# tests/debian/package.sh: the Debian packages.  dpkg-buildpackage -b
# builds them from a copy of the source (no sanitizers, no test suite,
# two jobs), lintian finds no error, they install on this machine, the
# installed daemon, unit, configuration, hotplug script, man pages and
# nbdkit plugin work, the service is left disabled where no Xen is, and
# purging removes every file again.  Needs root (the suite runs as root);
# skips only where dpkg-buildpackage cannot run.
. "$top_srcdir/tests/lib/sim.sh"

[ -z "${XBD_IN_PACKAGE_BUILD:-}" ] || skip "inside a package build (debian/rules)"
[ "$(id -u)" = 0 ] || skip "installing packages needs root"
for t in dpkg-buildpackage dh lintian flock; do
	command -v "$t" >/dev/null 2>&1 || skip "$t not installed (scripts/install-deps.sh installs it)"
done
[ -f "$top_srcdir/debian/control" ] || fail "no debian/ in $top_srcdir"

PKGS="xbd-back xbd-front nbdkit-plugin-xbd"
MARK=/var/lib/xbd-package-test.installed
WORK=$(mktemp -d "${TMPDIR:-/tmp}/xbd-deb.XXXXXXXX") || fail "mktemp failed"
sim_on_exit "rm -rf '$WORK'"

installed() {
	[ "$(dpkg-query -W -f='${db:Status-Status}' "$1" 2>/dev/null)" = installed ]
}

purge() {
	dpkg --purge $PKGS >"$WORK/purge.log" 2>&1
}

# One run at a time on a machine: two would install and purge under each other.
exec 9>/run/lock/xbd-package-test.lock
flock -w 900 9 || fail "another package test holds /run/lock/xbd-package-test.lock"
# Packages installed by someone else are not ours to replace; a leftover
# of an interrupted run (the mark is there) is.
for p in $PKGS; do
	if installed "$p" && [ ! -e "$MARK" ]; then
		skip "$p is installed on this machine (not by this test): not replacing it"
	fi
done

# The source as git sees it (tracked and new files; nothing generated),
# or the whole tree of a release tarball (make distcheck).
mkdir "$WORK/xbd"
if git -C "$top_srcdir" rev-parse --git-dir >/dev/null 2>&1; then
	(cd "$top_srcdir" && git ls-files -z --cached --others --exclude-standard |
		tar --null -T - -cf -) | tar -xf - -C "$WORK/xbd" || fail "cannot copy the source"
else
	(cd "$top_srcdir" && tar --exclude=./_build -cf - .) | tar -xf - -C "$WORK/xbd" ||
		fail "cannot copy the source"
fi
# Files git knows but the work tree lost would stop tar; the copy must be whole.
[ -f "$WORK/xbd/debian/rules" ] || fail "the source copy has no debian/rules"

t0=$(date +%s)
(cd "$WORK/xbd" && DEB_BUILD_OPTIONS="nocheck parallel=2" dpkg-buildpackage -us -uc -b) \
	>"$WORK/build.log" 2>&1 || { tail -40 "$WORK/build.log"; fail "dpkg-buildpackage failed"; }
t1=$(date +%s)
echo "dpkg-buildpackage: $((t1 - t0)) s"
ver=$(cd "$WORK/xbd" && dpkg-parsechangelog -S Version)
arch=$(dpkg --print-architecture)
for p in $PKGS; do
	[ -f "$WORK/${p}_${ver}_$arch.deb" ] || fail "no ${p}_${ver}_$arch.deb built"
done
ls "$WORK"/*.deb | sed 's|.*/||'

# lintian: errors fail the test, warnings are shown.
lintian --fail-on error "$WORK/xbd_${ver}_$arch.changes" >"$WORK/lintian.log" 2>&1
lrc=$?
cat "$WORK/lintian.log"
[ "$lrc" = 0 ] || fail "lintian reports errors (status $lrc)"
echo "lintian: $(($(date +%s) - t1)) s, $(grep -c '^E:' "$WORK/lintian.log") errors, $(grep -c '^W:' "$WORK/lintian.log") warnings"

# What goes where, before installing anything.
dpkg-deb -c "$WORK/xbd-back_${ver}_$arch.deb" >"$WORK/contents"
for f in ./usr/sbin/xbd-back ./usr/sbin/xbdctl ./lib/systemd/system/xbd-back.service \
	./etc/xen/scripts/xbd ./etc/xbd/xbd-back.conf ./usr/share/man/man8/xbd-back.8.gz \
	./usr/share/man/man8/xbdctl.8.gz ./usr/share/man/man5/xbd-back.conf.5.gz \
	./usr/share/doc/xbd-back/README.Debian; do
	grep -q " $f\$" "$WORK/contents" || fail "xbd-back's package lacks $f"
done
plugindir=$(pkg-config --variable=plugindir nbdkit 2>/dev/null)
[ -n "$plugindir" ] || plugindir=/usr/lib/$(dpkg-architecture -qDEB_HOST_MULTIARCH)/nbdkit/plugins
dpkg-deb -c "$WORK/nbdkit-plugin-xbd_${ver}_$arch.deb" >"$WORK/contents"
grep -q " .$plugindir/nbdkit-xbd-plugin.so\$" "$WORK/contents" ||
	fail "the plugin is not in nbdkit's plugin directory $plugindir"
grep -q " .$plugindir/nbdkit-xbdview-plugin.so\$" "$WORK/contents" ||
	fail "the xbdview plugin is not in nbdkit's plugin directory $plugindir"
! grep -q '\.la$' "$WORK/contents" || fail "the plugin package ships a libtool archive"

# Install.  dpkg -i, never apt: nothing may come from the network here.
touch "$MARK"
sim_on_exit "purge; rm -f '$MARK'"
dpkg -i "$WORK/xbd-back_${ver}_$arch.deb" "$WORK/xbd-front_${ver}_$arch.deb" \
	"$WORK/nbdkit-plugin-xbd_${ver}_$arch.deb" >"$WORK/install.log" 2>&1 ||
	{ cat "$WORK/install.log"; fail "dpkg -i failed"; }
cat "$WORK/install.log"

out=$(/usr/sbin/xbd-back --version) || fail "xbd-back --version failed"
[ "$out" = "xbd-back $ver" ] || fail "xbd-back --version printed '$out', not 'xbd-back $ver'"
echo "$out"
/usr/sbin/xbdctl --help >/dev/null || fail "xbdctl --help failed"
/usr/bin/xbd-front 2>&1 | grep -q "xbd-front bench" || fail "xbd-front prints no usage"
# The installed configuration is the daemon's default and valid.
env -u XBD_BACK_CONFIG /usr/sbin/xbd-back --check-config >"$WORK/config.out" 2>&1 ||
	{ cat "$WORK/config.out"; fail "xbd-back --check-config rejects the installed /etc/xbd/xbd-back.conf"; }
grep -q "/etc/xbd/xbd-back.conf" "$WORK/config.out" || fail "xbd-back does not read /etc/xbd/xbd-back.conf"

# Configuration files are conffiles (an admin's edits survive upgrades).
conff=$(dpkg-query -W -f='${Conffiles}' xbd-back)
for f in /etc/xbd/xbd-back.conf /etc/xen/scripts/xbd; do
	echo "$conff" | grep -q " $f " || fail "$f is not a conffile"
done

# The unit: installed, valid, pointing at the installed daemon, not
# enabled on a machine without Xen (postinst).
unit=/lib/systemd/system/xbd-back.service
[ -f "$unit" ] || fail "no $unit"
grep -q '^ExecStart=/usr/sbin/xbd-back --config /etc/xbd/xbd-back.conf$' "$unit" ||
	fail "the unit does not start /usr/sbin/xbd-back with /etc/xbd/xbd-back.conf"
grep -q '^Type=notify$' "$unit" || fail "the unit is not Type=notify"
systemd-analyze verify "$unit" >"$WORK/verify.log" 2>&1 ||
	{ cat "$WORK/verify.log"; fail "systemd-analyze verify $unit failed"; }
if [ ! -e /proc/xen/capabilities ]; then
	[ ! -e /etc/systemd/system/multi-user.target.wants/xbd-back.service ] ||
		fail "postinst enabled xbd-back on a machine without Xen"
	grep -q "xbd-back: not a Xen domain: the service is left disabled" "$WORK/install.log" ||
		fail "postinst did not say why the service is left disabled"
fi

# The node_exporter textfile timer: shipped, valid, not enabled.
for u in xbd-back-metrics.service xbd-back-metrics.timer; do
	[ -f "/lib/systemd/system/$u" ] || fail "no /lib/systemd/system/$u"
	[ ! -e "/etc/systemd/system/timers.target.wants/$u" ] || fail "$u enabled on install"
done
grep -q '/usr/sbin/xbdctl stats --format prometheus' /lib/systemd/system/xbd-back-metrics.service ||
	fail "xbd-back-metrics.service does not run the installed xbdctl"
systemd-analyze verify /lib/systemd/system/xbd-back-metrics.timer >"$WORK/verify.log" 2>&1 ||
	{ cat "$WORK/verify.log"; fail "systemd-analyze verify xbd-back-metrics.timer failed"; }

# The man pages.
for m in xbd-back.8 xbdctl.8 xbd-back.conf.5 nbdkit-xbd-plugin.1 nbdkit-xbdview-plugin.1; do
	[ -f "/usr/share/man/man${m##*.}/$m.gz" ] || fail "man page $m not installed"
done

# The hotplug script, as libxl runs it, on a simulated host.
hp=/etc/xen/scripts/xbd
[ -x "$hp" ] || fail "$hp is not installed executable"
if [ -x "$XBD_SIM" ] && [ -x "$XBD_XENSTORED" ] && command -v xenstore-read >/dev/null 2>&1; then
	sim_start
	dom=$("$XBD_SIM" domain create "$SIMDIR") || fail "xbd-sim domain create failed"
	truncate -s 1M "$WORK/disk.img"
	devid=$("$XBD_SIM" disk add "$SIMDIR" "$dom" xvdb "$WORK/disk.img") || fail "xbd-sim disk add failed"
	(sim_env 0 && XENBUS_PATH=backend/vbd/$dom/$devid exec "$hp" add) ||
		fail "$hp add failed"
	st=$(sim_env 0 && xenstore-read "/local/domain/0/backend/vbd/$dom/$devid/hotplug-status")
	[ "$st" = connected ] || fail "$hp add wrote hotplug-status '$st'"
	echo "hotplug: $hp add wrote hotplug-status=connected"
else
	out=$("$hp" add 2>&1) && fail "$hp ran without XENBUS_PATH"
	echo "$out" | grep -q "XENBUS_PATH is not set" || fail "$hp printed '$out'"
fi

# The nbdkit plugin, by name as an admin would load it.
out=$(nbdkit xbd --dump-plugin 2>&1) || { echo "$out"; fail "nbdkit xbd --dump-plugin failed"; }
echo "$out" | grep -qx "path=$plugindir/nbdkit-xbd-plugin.so" ||
	{ echo "$out"; fail "nbdkit does not load the installed plugin"; }
echo "$out" | grep -qx "name=xbd" || { echo "$out"; fail "the plugin's name is not xbd"; }
echo "nbdkit: $(echo "$out" | grep -x 'path=.*')"
out=$(nbdkit xbdview --dump-plugin 2>&1) || { echo "$out"; fail "nbdkit xbdview --dump-plugin failed"; }
echo "$out" | grep -qx "path=$plugindir/nbdkit-xbdview-plugin.so" ||
	{ echo "$out"; fail "nbdkit does not load the installed xbdview plugin"; }
echo "nbdkit: $(echo "$out" | grep -x 'path=.*')"

# An upgrade (the same version again) runs postinst's upgrade path and
# keeps an admin's edit of a conffile.
echo "# edited by the package test" >>/etc/xbd/xbd-back.conf
dpkg -i "$WORK/xbd-back_${ver}_$arch.deb" >"$WORK/upgrade.log" 2>&1 ||
	{ cat "$WORK/upgrade.log"; fail "reinstalling xbd-back failed"; }
grep -q "^# edited by the package test" /etc/xbd/xbd-back.conf ||
	fail "reinstalling xbd-back lost the edit of /etc/xbd/xbd-back.conf"
echo "upgrade: postinst ran, /etc/xbd/xbd-back.conf kept its edit"

# Purge: nothing of ours stays behind, changed-block tracking included
# (what the daemon keeps in its default cbt-dir, made here as it would).
if [ ! -e /var/lib/xbd ]; then
	mkdir -p /var/lib/xbd/cbt && touch /var/lib/xbd/cbt/disk.cbt
fi
purge || { cat "$WORK/purge.log"; fail "dpkg --purge failed"; }
for p in $PKGS; do
	! installed "$p" || fail "$p is still installed after the purge"
done
for f in /usr/sbin/xbd-back /usr/sbin/xbdctl /usr/bin/xbd-front "$unit" "$hp" \
	/lib/systemd/system/xbd-back-metrics.timer \
	/etc/xbd /var/lib/xbd "$plugindir/nbdkit-xbd-plugin.so" "$plugindir/nbdkit-xbdview-plugin.so"; do
	[ ! -e "$f" ] || fail "$f is left after the purge"
done
rm -f "$MARK"
echo "purged: $PKGS"
exit 0
