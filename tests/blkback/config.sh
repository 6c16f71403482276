#!/bin/sh
# xbd-back's configuration file: every bad value is refused at start
# (exit status 2) with one line naming the file and line, the key, the
# value and what is allowed; good files are read, and the command line
# overrides them (--check-config prints the effective settings).
: "${top_builddir:?}"
XBD_BACK="$top_builddir/blkback/xbd-back"
[ -x "$XBD_BACK" ] || { echo "SKIP: xbd-back not built" >&2; exit 77; }
dir=$(mktemp -d "${TMPDIR:-/tmp}/xbd-bk-conf.XXXXXXXX") || exit 1
trap 'rm -rf "$dir"' EXIT
unset XBD_BACK_CONFIG
conf=$dir/xbd-back.conf
out=$dir/out
fail() {
	echo "FAIL: $*" >&2
	exit 1
}

# bad TEXT LINE...: a file made of LINEs must be refused with one line containing TEXT.
bad() {
	_text=$1
	shift
	printf '%s\n' "# a comment" "" "$@" >"$conf"
	"$XBD_BACK" --config "$conf" --check-config >/dev/null 2>"$out" && fail "accepted: $*"
	rc=$?
	[ $rc = 2 ] || fail "exit status $rc, not 2, for: $*"
	[ "$(wc -l <"$out")" = 1 ] || { cat "$out" >&2; fail "not one line for: $*"; }
	grep -qF -- "$_text" "$out" || { cat "$out" >&2; fail "no '$_text' for: $*"; }
	cat "$out"
}
bad "$conf:3: invalid value '12x' for max-batch: an integer from 0 to 4096" "max-batch = 12x"
bad "$conf:3: invalid value '-1' for poll-max-ns: an integer from 0 to 1000000000" "poll-max-ns = -1"
bad "$conf:4: invalid value 'fast' for cache: writeback, writethrough or unsafe" "types = vbd" "cache = fast"
bad "invalid value 'vbd,qdisk' for types: a comma-separated list of vbd, vbd3" "types = vbd,qdisk"
bad "invalid value 'maybe' for persistent: 0 or 1" "persistent = maybe"
bad "invalid value 'share' for grants: auto, map or copy" "grants = share"
bad "invalid value 'sync' for fua-mode: dsync or fdatasync" "fua-mode = sync"
bad "invalid value '5' for max-ring-order: an integer from 0 to 4" "max-ring-order = 5"
bad "invalid value '0' for max-queues: an integer from 1 to 16" "max-queues = 0"
bad "invalid value '8' for max-indirect-segs: 0 (off) or an integer from 12 to" "max-indirect-segs = 8"
bad "invalid value 'loud' for log-level: info, verbose or debug" "log-level = loud"
bad "invalid value 'file' for log: auto, stderr or syslog" "log = file"
bad "invalid value 'ctl.sock' for control: an absolute path" "control = ctl.sock"
bad "invalid value '' for max-batch" "max-batch ="
bad "$conf:3: unknown key 'colour'" "colour = blue"
bad "$conf:3: expected 'key = value' or '[disk PARAMS]', got 'max-batch 4'" "max-batch 4"
bad "$conf:3: invalid section '[disc /a]'" "[disc /a]"
bad "$conf:3: invalid section '[disk]'" "[disk]"
bad "$conf:4: 'types' is a daemon setting, not allowed in [disk /srv/a.img]" "[disk /srv/a.img]" "types = vbd"
bad "$conf:5: invalid value '2' for barrier: 0 or 1" "[disk /srv/a.img]" "cache = unsafe" "barrier = 2"
# A file given but missing is an error; the default file missing is not.
"$XBD_BACK" --config "$dir/none.conf" --check-config >/dev/null 2>"$out" && fail "missing --config accepted"
grep -q "invalid value '$dir/none.conf' for --config" "$out" || { cat "$out" >&2; fail "missing file message"; }

# A good file, and the command line on top of it.
cat >"$conf" <<EOC
# xbd-back test configuration
types = vbd3
log-level = verbose
max-batch = 8
  poll-max-ns = 1000
cache = writethrough
control = none

[disk /srv/db-*.img]
cache = unsafe
grants = copy
max-batch = 1
EOC
"$XBD_BACK" --config "$conf" --check-config --max-batch 4 --disk /srv/x.img:barrier=1 >"$out" ||
	fail "good file refused"
cat "$out"
for want in "types = vbd3" "log-level = verbose" "max-batch = 4" "poll-max-ns = 1000" \
	"cache = writethrough" "control = none" "[disk /srv/db-*.img]" "grants = copy" \
	"max-batch = 1" "[disk /srv/x.img]" "barrier = 1"; do
	grep -qxF -- "$want" "$out" || fail "--check-config does not show '$want'"
done
# The file's [disk] section comes before the command line's --disk.
[ "$(grep -n '^\[disk' "$out" | cut -d: -f1 | tr '\n' ' ')" != "" ] || fail "no disk sections"
# XBD_BACK_CONFIG names the file when --config does not.
XBD_BACK_CONFIG=$conf "$XBD_BACK" --check-config | grep -qx "types = vbd3" ||
	fail "XBD_BACK_CONFIG not read"
# What --check-config prints is itself a configuration file that means the same.
"$XBD_BACK" --check-config --config /dev/null --fua-mode fdatasync --grants map \
	--disk /srv/y.img:cache=unsafe >"$out" || fail "--check-config failed"
"$XBD_BACK" --check-config --config "$out" >"$dir/again" 2>&1 ||
	{ cat "$dir/again" >&2; fail "--check-config's output is refused as a configuration file"; }
# (but for its first line, which names the file read)
tail -n +2 "$out" >"$dir/first"
tail -n +2 "$dir/again" >"$dir/second"
cmp -s "$dir/first" "$dir/second" ||
	{ diff "$dir/first" "$dir/second" >&2; fail "--check-config does not round-trip"; }
# The shipped default configuration is valid and changes nothing.
"$XBD_BACK" --config "$top_srcdir/blkback/installed/xbd-back.conf" --check-config >"$out" ||
	fail "the shipped xbd-back.conf is refused"
grep -qx "max-batch = 32" "$out" || fail "the shipped xbd-back.conf changes max-batch"
exit 0
