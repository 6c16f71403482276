#!/bin/sh
# README.md's "Back up a running guest", its commands as the README
# prints them (taken from it, so that this test breaks when the README
# drifts: tests/e2e/readme-by-hand.sh does the same for the by-hand
# section), on the simulator, with a guest writing throughout:
#  - its configuration block is xbd-back's configuration (the disk's
#    path made the test's): the disk must come up tracked;
#  - its commands run as one bash -e script, with only the device
#    (vbd/5/51712), /backup and the plugin's name made the test's, and
#    `xbdctl` and `nbdkit` found in PATH as small wrappers (the
#    simulated dom0's environment; what an ASan-built plugin needs);
#  - around the line that makes checkpoint tue the guest is paused and
#    the disk hashed: what `xl pause` gives on a host (the README's
#    reader does not need it; the test needs a hash of the disk at tue);
#  - /backup/guest1-tue.img must then be the disk at tue (sha256), not
#    the full backup at mon (the incremental carried the guest's writes),
#    the guest must have gone on writing while the incremental was read,
#    and mon must be gone when the commands end (tue stays, the base
#    of the next backup);
#  - the incremental's commands again (wed after tue) with xbdctl changes
#    failing must fail, write nothing and keep tue.
. "$top_srcdir/tests/backup/lib.sh"
need_backup
command -v bash >/dev/null 2>&1 || skip "bash not installed"
# nbdsh runs `python3 -m nbd`: the system's python3 (python3-libnbd), not
# one that comes earlier in PATH (pyenv's) without that module
PATH=/usr/bin:$PATH
export PATH
nbdsh -c 'pass' >/dev/null 2>&1 || skip "nbdsh (python3-libnbd) does not run"

sed -n '/^## Back up a running guest/,/^## [^B]/p' "$top_srcdir/README.md" |
	sed -n 's/^    //p' >"$WORK/section.orig"
grep -q "xbdctl drop vbd/5/51712 mon" "$WORK/section.orig" || fail "no backup section in README.md"

G=$(new_domain)
new_disk "$WORK/guest1.img" 64M
gd=$(add_disk "$G" xvdb "$WORK/guest1.img")
D=$(dev_of "$G" "$gd")
mkdir -p "$WORK/backup" "$WORK/bin"

# The configuration block is xbd-back's configuration.
# (the code blocks come without the blank lines between them: the block
# is its "[disk PATH]" line and the "key = value" lines after it)
awk '/^\[disk / { c = 1; print; next } c && /^[a-z-]+ = / { print; next } { c = 0 }' "$WORK/section.orig" |
	sed "s|^\[disk [^]]*\]|[disk $WORK/guest1.img]|" >"$WORK/xbd-back.conf"
grep -q "^cbt = 1" "$WORK/xbd-back.conf" || fail "README's configuration block has no 'cbt = 1': $(cat "$WORK/xbd-back.conf")"
XBD_BACK_CONFIG=$WORK/xbd-back.conf start_cbt
wait_state "$G" "$gd" 2
ctl checkpoints "$D" >"$WORK/tracking.out" 2>&1 && ! grep -q "no changed-block tracking" "$WORK/tracking.out" ||
	{ cat "$WORK/tracking.out"; bk_fail "README's configuration block did not turn cbt on for the disk"; }

# The commands: the rest of the section, with the test's device and paths.
awk '/^\[disk / { c = 1; next } c && /^[a-z-]+ = / { next } { c = 0; print }' "$WORK/section.orig" |
	sed -e "s|vbd/5/51712|$D|g" -e "s|/backup/|$WORK/backup/|g" >"$WORK/section.sh"
# the guest paused around checkpoint tue (the line that makes it, as printed)
grep -q "^view=\$(xbdctl checkpoint $D tue --view" "$WORK/section.sh" ||
	fail "README's backup section makes no checkpoint tue with its view"
sed -i -e "\\|^view=\$(xbdctl checkpoint $D tue --view|i \"$WORK/hook\" pause" \
	-e "\\|^view=\$(xbdctl checkpoint $D tue --view|a \"$WORK/hook\" resume" \
	-e "\\|^xbdctl release $D mon\$|a \"$WORK/hook\" mark" "$WORK/section.sh"
grep -q "hook\" mark" "$WORK/section.sh" || fail "README's backup section does not release mon's view"

# xbdctl as dom0 of the simulated host
# (XBDCTL_FAIL_CHANGES=1: its changes fails, as when the tracking cannot
# vouch for the interval)
cat >"$WORK/bin/xbdctl" <<EOS
#!/bin/sh
[ "\${XBDCTL_FAIL_CHANGES:-0}" = 1 ] && [ "\$1" = changes ] &&
	{ echo "xbdctl: \$2: the test says the tracking cannot vouch for this: take a full backup" >&2; exit 1; }
eval "\$('$XBD_SIM' env '$SIMDIR' 0)" || exit 1
exec '$XBDCTL' "\$@"
EOS
# nbdkit: the plugin named xbdview is the build's; an ASan-built plugin
# gets libasan preloaded, its --run command does not (nbdkit_run's reasons,
# tests/robust/lib.sh: and nbdkit is given 10 s to exit after it)
cat >"$WORK/bin/nbdkit" <<EOS
#!/bin/bash
run= args=()
while [ \$# -gt 0 ]; do
	case \$1 in
	--run) run=\$2; shift 2; continue ;;
	xbdview) args+=('$VIEW_PLUGIN') ;;
	*) args+=("\$1") ;;
	esac
	shift
done
[ -n "\$run" ] || exec env $NBDKIT_PRELOAD /usr/bin/nbdkit "\${args[@]}"
c=\$(mktemp '$WORK/run.XXXXXX') || exit 1
printf '%s\n' "\$run" >"\$c.sh"
# (its stdin explicitly: an asynchronous command's is /dev/null otherwise,
# and README's incremental pipes the extents into the --run command)
env $NBDKIT_PRELOAD /usr/bin/nbdkit "\${args[@]}" --run "env -u LD_PRELOAD -u ASAN_OPTIONS uri=\"\\\$uri\" unixsocket=\"\\\$unixsocket\" bash '\$c.sh'; echo \\\$? >'\$c.rc'" <&0 &
p=\$!
while [ ! -e "\$c.rc" ] && kill -0 \$p 2>/dev/null; do sleep 0.1; done
t=0
while kill -0 \$p 2>/dev/null && [ \$t -lt 100 ]; do sleep 0.1; t=\$((t + 1)); done
kill -0 \$p 2>/dev/null && { echo "note: nbdkit did not exit 10 s after its --run command; killed" >&2; kill -KILL \$p; }
wait \$p; st=\$?
[ -e "\$c.rc" ] && st=\$(cat "\$c.rc")
exit \$st
EOS
# pause: the guest stopped once it wrote since mon's full backup, its disk
# quiet, hashed and kept; resume: it goes on
cat >"$WORK/hook" <<EOS
#!/bin/sh
writes() {
	xbdctl stats --json '$D' | python3 -c 'import json, sys
print(json.load(sys.stdin)["devices"][0]["stats"]["requests"]["write"])'
}
in_flight() {
	xbdctl stats --format prometheus '$D' | awk '/^xbd_requests_in_flight\{/ { s += \$2 } END { print s + 0 }'
}
# quiet: nothing in flight, and every ring asleep with all it was given
# taken (a stopped guest's last requests can sit in its ring, not yet
# taken and so not in flight: tests/backup/disk-quiet.py)
quiet() {
	[ "\$(in_flight)" = 0 ] || return 1
	xbdctl stats --json '$D' | python3 '$DISK_QUIET'
}
tree() { echo \$1; for c in \$(pgrep -P \$1); do tree \$c; done; }
case \$1 in
mark) writes >'$WORK/mark' ;;
pause)
	i=0
	while [ "\$(writes)" -le \$((\$(cat '$WORK/mark') + 500)) ]; do
		i=\$((i + 1)); [ \$i -lt 200 ] || { echo "hook: the guest wrote nothing since mon" >&2; exit 1; }
		sleep 0.1
	done
	tree \$(cat '$WORK/gpid') >'$WORK/stopped'
	kill -STOP \$(cat '$WORK/stopped') 2>/dev/null
	i=0
	until quiet; do
		i=\$((i + 1)); [ \$i -lt 200 ] || { echo "hook: the paused guest's disk did not go quiet (\$(in_flight) in flight)" >&2; exit 1; }
		sleep 0.1
	done
	sha256sum <'$WORK/guest1.img' | cut -d' ' -f1 >'$WORK/want'
	cp --sparse=always '$WORK/guest1.img' '$WORK/at-tue.img' ;;
resume)
	kill -CONT \$(cat '$WORK/stopped') 2>/dev/null
	writes >'$WORK/resumed'
	xbdctl changes '$D' mon tue --json >'$WORK/changes.json'
	xbdctl changes '$D' mon tue | awk '!/^#/ { n++; b += \$2 } END { print n + 0, b + 0 }' >'$WORK/inc' ;;
esac
EOS
chmod +x "$WORK/bin/xbdctl" "$WORK/bin/nbdkit" "$WORK/hook"

# The guest: 4k random writes at 500 a second over the disk's first 48 MiB, throughout.
cat >"$WORK/guest.fio" <<FIO
[global]
ioengine=nbd
uri=\${NBDURI}
rw=randwrite
bs=4k
size=48m
iodepth=4
rate_iops=500
time_based=1
runtime=600
randrepeat=0
refill_buffers=1
[guest]
FIO
fio_nbd "$G" xvdb "$WORK/guest.json" "$WORK/guest.fio" >/dev/null 2>&1 &
gpid=$!
echo $gpid >"$WORK/gpid"
# (whatever way the test ends: the guest's fio and nbdkit go, stopped or not)
sim_on_exit "for p in \$(_bk_tree $gpid); do kill -CONT \$p; kill \$p; done 2>/dev/null"
sim_wait_for 20 writing "$D" 300 || bk_fail "the guest did not start writing"

t0=$(date +%s%N)
rc=0
# (the wrappers for the README's commands only: the guest's nbdkit is the test's own)
PATH="$WORK/bin:$PATH" timeout 300 bash -e "$WORK/section.sh" >"$WORK/section.out" 2>&1 </dev/null || rc=$?
t1=$(date +%s%N)
[ $rc = 0 ] || { cat "$WORK/section.out"; bk_fail "README's backup commands failed (exit $rc)"; }
end=$(writes "$D")
# the guest stopped (its fio and nbdkit), and nothing of it left stopped
kill -CONT $(cat "$WORK/stopped" 2>/dev/null) 2>/dev/null
for p in $(_bk_tree "$gpid"); do kill "$p" 2>/dev/null; done
wait "$gpid" 2>/dev/null

[ -s "$WORK/want" ] || bk_fail "the guest was never paused at tue (no hash)"
want=$(cat "$WORK/want")
got=$(sha256sum <"$WORK/backup/guest1-tue.img" | cut -d' ' -f1)
mon=$(sha256sum <"$WORK/backup/guest1-mon.img" | cut -d' ' -f1)
if [ "$got" != "$want" ]; then
	cmp "$WORK/backup/guest1-tue.img" "$WORK/at-tue.img" | head -3 >&2
	[ "$got" != "$mon" ] || echo "(guest1-tue.img is the full backup at mon: the incremental copied nothing)" >&2
	echo "blocks of 64 KiB mon and tue differ in, reported by changes mon tue, reported and unchanged: $(covers "$WORK/changes.json" "$WORK/backup/guest1-mon.img" "$WORK/at-tue.img")" >&2
	bk_fail "README's guest1-tue.img is not the disk at tue: sha256 $got, want $want"
fi
[ "$mon" != "$want" ] || bk_fail "the full backup at mon is the disk at tue already: the guest wrote nothing between them"
[ "$end" -gt "$(cat "$WORK/resumed")" ] ||
	bk_fail "the guest wrote nothing after tue, while the incremental was read ($end writes, $(cat "$WORK/resumed") at tue)"
ctl checkpoints "$D" >"$WORK/left.out" 2>&1
ctl changes "$D" mon tue >/dev/null 2>&1 && { cat "$WORK/left.out"; bk_fail "changes from mon still answers after README's drop of mon"; }
echo "README's backup commands: full backup $(du -k "$WORK/backup/guest1-mon.img" | cut -f1) KiB allocated of" \
	"$(stat -c %s "$WORK/backup/guest1-mon.img") bytes; incremental mon to tue $(cut -d' ' -f1 "$WORK/inc") extents," \
	"$(cut -d' ' -f2 "$WORK/inc") bytes; the guest wrote $((end - $(cat "$WORK/resumed"))) times during the incremental;" \
	"$(( (t1 - t0) / 1000000 )) ms in all"
echo "ok: README's guest1-tue.img is the disk at tue (sha256 $want), not the full backup at mon"

# The next day's incremental again (tue the base, wed the new checkpoint)
# with xbdctl changes failing: the commands must fail, and copy, release
# and drop nothing (tue stays the base of the next backup).
sed -n "\\|^view=\$(xbdctl checkpoint $D tue --view|,\$p" "$WORK/section.sh" | grep -v '/hook" ' |
	sed -e 's/\btue\b/wed/g' -e 's/\bmon\b/tue/g' >"$WORK/section-wed.sh"
grep -q "xbdctl drop $D tue" "$WORK/section-wed.sh" || fail "no drop in the incremental's commands: $(cat "$WORK/section-wed.sh")"
cp "$WORK/backup/guest1-tue.img" "$WORK/tue-kept.img"
PATH="$WORK/bin:$PATH" XBDCTL_FAIL_CHANGES=1 timeout 120 bash -e "$WORK/section-wed.sh" \
	>"$WORK/section-wed.out" 2>&1 </dev/null &&
	{ cat "$WORK/section-wed.out"; bk_fail "README's incremental succeeded with xbdctl changes failing"; }
grep -q "cannot vouch" "$WORK/section-wed.out" || { cat "$WORK/section-wed.out"; bk_fail "the failure of changes was not shown"; }
ctl checkpoints "$D" >"$WORK/left.out" 2>&1
grep -qw tue "$WORK/left.out" ||
	{ cat "$WORK/section-wed.out" "$WORK/left.out"; bk_fail "README's incremental dropped its base (tue) after changes failed"; }
cmp -s "$WORK/backup/guest1-wed.img" "$WORK/tue-kept.img" ||
	bk_fail "README's incremental wrote into guest1-wed.img after changes failed"
echo "ok: with xbdctl changes failing, README's incremental fails and keeps tue as the base"
bk_done
