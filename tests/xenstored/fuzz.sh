#!/bin/sh
# fuzz.sh: a short libFuzzer run of the xbd-xenstored engine (framing and
# every request handler), from a seed corpus of valid requests.
#   FUZZ_TIME    seconds to run (default 5, as part of make check)
#   FUZZ_CORPUS  corpus folder to keep (default: a temporary one)
set -u
. "${top_srcdir:-.}/tests/xenstored/lib.sh"

FUZZ="${top_builddir:-.}/tests/xenstored/fuzz-xenstored"
[ -x "$FUZZ" ] || skip "fuzz-xenstored not built (needs clang with libFuzzer)"

work=$(mktemp -d /tmp/xsd-fuzz.XXXXXX) || fail "mktemp"
trap 'rm -rf "$work"' EXIT
corpus="${FUZZ_CORPUS:-$work/corpus}"
mkdir -p "$corpus" || fail "mkdir $corpus"

byte() { printf "\\$(printf %03o "$1")"; }
le32() {
	byte $(($1 & 255)); byte $((($1 >> 8) & 255))
	byte $((($1 >> 16) & 255)); byte $((($1 >> 24) & 255))
}
# chunk SEL TYPE TXID PAYLOAD: one request to connection SEL (0,1 dom0;
# 2,3 guest 1; 4 guest 2); PAYLOAD is a printf format (\000 for NUL).
chunk() {
	plen=$(printf "$4" | wc -c)
	byte "$1"; byte $((16 + plen))
	le32 "$2"; le32 7; le32 "$3"; le32 "$plen"
	printf "$4"
}

{ chunk 0 11 0 '/a/b\000v'; chunk 0 2 0 '/a/b\000'
  chunk 2 11 0 'data/x\000v'; chunk 2 1 0 'data\000'; } > "$corpus/seed-rw"
{ chunk 0 4 0 '/a\000t\000'; chunk 1 11 0 '/a/c\0001'
  chunk 0 13 0 '/a\000'; chunk 0 5 0 '/a\000t\000'; } > "$corpus/seed-watch"
{ chunk 2 6 0 '\000'; chunk 2 11 1 'data/t\000x'; chunk 3 6 0 '\000'
  chunk 3 11 1 'data/t\000y'; chunk 2 7 1 'T\000'
  chunk 3 7 1 'T\000'; } > "$corpus/seed-txn"
{ chunk 0 14 0 '/a\000n0\000r1\000'; chunk 2 3 0 '/a\000'
  chunk 0 22 0 '/local/domain\0000\000'
  chunk 4 14 0 'data\000n2\000'; } > "$corpus/seed-perms"
{ chunk 0 8 0 '3\0001\0001\000'; chunk 0 17 0 '3\000'
  chunk 0 19 0 '3\0001\000'; chunk 0 9 0 '1\000'
  chunk 2 2 0 'name\000'; chunk 0 4 0 '@releaseDomain\000r\000'
  chunk 0 10 0 '4\000'; chunk 0 21 0 '\000'; } > "$corpus/seed-domains"
{ chunk 130 12 0 '/m/n\000'; chunk 0 0 0 'help\000'
  chunk 2 15 0 'x\000'; chunk 2 255 0 'x'; } > "$corpus/seed-misc"

time="${FUZZ_TIME:-5}"
# A crashing input is kept next to the fuzzer as crash-<sha1>.
if ! "$FUZZ" -max_total_time="$time" -timeout=10 -rss_limit_mb=2048 \
	-max_len=8192 -print_final_stats=1 \
	-artifact_prefix="${top_builddir:-.}/tests/xenstored/" \
	"$corpus" > "$work/log" 2>&1; then
	tail -n 60 "$work/log" >&2
	fail "fuzz-xenstored found a problem (crash input in the log above)"
fi
grep -E '^stat::number_of_executed_units|^#[0-9]+.*DONE' "$work/log" | tail -n 2
exit 0
