#!/bin/bash
# tests/xen/steps-check.sh: the shape of make check-xen's harness, on the
# host.  dom0-init.sh runs the step files tests/xen/steps/NAME.sh in the
# order of its run_step lines; each file starts with three lines
#   # step NAME: what it shows
#   # needs: TOKEN... | none
#   # lines: PREFIX...
# (tests/xen/lib/steps.sh).  Checked here: every file has them, with its
# own name; every need is one lib/steps.sh knows; every run_step names a
# file and every file has one run_step; no two files claim a lines prefix;
# every file is in local.mk's EXTRA_DIST and passes bash -n.  Then the
# needs logic itself, with xl and xbd-back played by this script: a step
# whose guest is missing prints one SKIP line with the reason and does not
# run, and the end-of-boot check accepts that line as the step's.
. "$top_srcdir/tests/lib/sim.sh"

D=$top_srcdir/tests/xen
WORK=$(mktemp -d "${TMPDIR:-/tmp}/xbd-stc.XXXXXXXX") || fail "mktemp failed"
trap 'rm -rf "$WORK"' EXIT
bad=0
problem() { echo "not ok: $*"; bad=$((bad + 1)); }

# ---- the files --------------------------------------------------------------
files=$(cd "$D/steps" && ls *.sh 2>/dev/null | sed 's/\.sh$//')
[ -n "$files" ] || fail "no step files in $D/steps"
order=$(sed -n 's/^run_step \([^ ]*\)$/\1/p' "$D/dom0-init.sh")
[ -n "$order" ] || fail "no run_step line in $D/dom0-init.sh"
for n in $order; do
	[ -f "$D/steps/$n.sh" ] || problem "dom0-init.sh runs step $n, and there is no steps/$n.sh"
done
for n in $files; do
	c=$(echo "$order" | grep -c -x -F "$n")
	[ "$c" = 1 ] || problem "steps/$n.sh is run $c times by dom0-init.sh's run_step lines (once, in its place)"
done
for n in $files; do
	f=$D/steps/$n.sh
	h1=$(sed -n 1p "$f") h2=$(sed -n 2p "$f") h3=$(sed -n 3p "$f")
	case $h1 in "# step $n: "?*) ;; *) problem "steps/$n.sh: line 1 is not '# step $n: WHAT': $h1" ;; esac
	case $h2 in "# needs: "?*) ;; *) problem "steps/$n.sh: line 2 is not '# needs: TOKEN... | none': $h2" ;; esac
	case $h3 in "# lines: "?*) ;; *) problem "steps/$n.sh: line 3 is not '# lines: PREFIX...': $h3" ;; esac
	for t in ${h2#"# needs: "}; do
		case $t in
		none | xbd-back | dom0:pv | dom0:pvh | hvm) ;;
		guest:?* | cmd:?*) ;;
		step:?*) [ -f "$D/steps/${t#step:}.sh" ] || problem "steps/$n.sh needs $t, and there is no such step" ;;
		*) problem "steps/$n.sh needs '$t': not one of none, xbd-back, guest:NAME, cmd:NAME, step:NAME, dom0:pv, dom0:pvh, hvm" ;;
		esac
	done
	for p in ${h3#"# lines: "}; do
		case $p in *[!a-z0-9-]*) problem "steps/$n.sh: lines prefix '$p' is not made of a-z, 0-9 and -" ;; esac
		echo "$p $n"
	done >>"$WORK/prefixes"
done
sort "$WORK/prefixes" | awk '{ if ($1 == p) print "lines prefix " $1 " is claimed by steps/" n ".sh and steps/" $2 ".sh"; p = $1; n = $2 }' |
	while read -r m; do echo "not ok: $m"; done >"$WORK/dups"
[ ! -s "$WORK/dups" ] || { cat "$WORK/dups"; bad=$((bad + $(wc -l <"$WORK/dups"))); }
for f in "$D/dom0-init.sh" "$D"/lib/*.sh "$D"/steps/*.sh; do
	bash -n "$f" 2>"$WORK/syntax" || problem "bash -n ${f#$D/}: $(head -2 "$WORK/syntax" | tr '\n' ' ')"
	case $f in "$D/dom0-init.sh") continue ;; esac
	tr ' \t' '\n\n' <"$D/local.mk" | grep -q -x -F "tests/xen/${f#$D/}" ||
		problem "${f#$D/} is not in tests/xen/local.mk's EXTRA_DIST (make dist would leave it out)"
done
[ $bad = 0 ] || fail "$bad problem(s) with the step files (above)"
echo "ok: $(echo $files | wc -w) step files, each with its header, run once in dom0-init.sh's order, known needs, its own lines prefixes, in EXTRA_DIST, bash -n clean"

# ---- the needs logic, with xl and xbd-back played here --------------------------
# The real lib/base.sh and lib/steps.sh, the real step files' headers
# (their code is left out: a step whose needs were met would run it here)
mkdir -p "$WORK/hd/steps"
for n in $files; do
	head -3 "$D/steps/$n.sh" >"$WORK/hd/steps/$n.sh"
	echo 'echo "XL-RAN step $1"' >>"$WORK/hd/steps/$n.sh"
done
dry() {  # STEPS ALIVE GUESTS [H]: run_step for each of STEPS, then steps_said; prints the step lines
	(
		L=$WORK/logs H=${4:-$WORK/hd} GTYPE=pv D0TYPE=pv STEPS=" $1 " STEP_G= ALIVE=$2 GUESTS=$3
		rm -rf "$L"; mkdir -p "$L"
		echo "virt_caps              : ${VIRT_CAPS:-pv hvm hap}" >"$L/xl-info.txt"
		. "$D/lib/base.sh"
		. "$D/lib/steps.sh"
		STEP_LINES=$(step_lines)
		xbd_alive() { [ "$ALIVE" = yes ]; }
		xl() {
			case $1 in
			domid) case " $GUESTS " in *" $2 "*) echo 7 ;; *) return 1 ;; esac ;;
			*) echo "xl $* ran: a step's code ran" >&2; echo "XL-RAN $*" ;;
			esac
		}
		sync() { :; }
		for s in $1; do run_step "$s"; done
		steps_said
	) 2>&1 | sed -n 's/^XBDT-STEP //p; s/^XL-RAN/XL-RAN/p'
}
out=$(dry workers yes "xbd1")
echo "STEPS=workers, xbd-back running, no guest xbd3: $out"
case $out in
"workers-needs SKIP pv/pv needs guest xbd3, not running ("*"third-guest phase makes it"*) ;;
*) fail "a step missing its guest did not print one SKIP line with the reason: '$out'" ;;
esac
[ "$(echo "$out" | wc -l)" = 1 ] || fail "more than one line for a skipped step, or its code ran: $out"

out=$(dry workers no "")
echo "STEPS=workers alone: $out"
case $out in
"workers-needs SKIP pv/pv needs xbd-back running, which step xbd starts: not asked for; needs guest xbd3, not running"*) ;;
*) fail "STEPS=workers alone did not say that xbd-back and xbd3 are missing: '$out'" ;;
esac

out=$(dry "profile lckill9" no "")
echo "STEPS='profile lckill9': $(echo $out)"
echo "$out" | grep -q "^lc-kill9 SKIP pv/pv runs inside step lifecycle, which is not asked for$" ||
	fail "lckill9 without lifecycle did not SKIP with its reason: $out"
echo "$out" | grep -q '^xbd-profile SKIP pv/pv needs xbd-back running' ||
	fail "profile without xbd-back did not SKIP as xbd-profile, its first lines prefix: $out"
echo "$out" | grep -q '^step-' && fail "a step that said SKIP was taken by the end check as one that printed nothing: $out"

# a step whose needs are there runs; one asked for that prints nothing fails
mkdir -p "$WORK/h/steps"
printf '# step ran: prints its line\n# needs: xbd-back guest:xbd3 step:ran\n# lines: ran-\n\nstep ran-ok PASS "it ran"\n' >"$WORK/h/steps/ran.sh"
printf '# step mute: prints nothing\n# needs: none\n# lines: mute-\n\n:\n' >"$WORK/h/steps/mute.sh"
out=$(dry "ran mute" yes "xbd3" "$WORK/h")
echo "STEPS='ran mute', needs met: $(echo $out)"
echo "$out" | grep -q '^ran-ok PASS' || fail "a step whose needs were met did not run: $out"
echo "$out" | grep -q '^step-mute FAIL .*printed no line of its own' || fail "a step that printed nothing did not fail: $out"
# the hvm need: a boot whose CPU has no SVM (CI's) says so and runs nothing
out=$(VIRT_CAPS="pv shadow" dry "hvm pvhgrub" yes "")
echo "STEPS='hvm pvhgrub', virt_caps pv: $(echo $out)"
echo "$out" | grep -q "^hvm-needs SKIP pv/pv needs Xen's HVM support (virt_caps: pv shadow" ||
	fail "the hvm step without Xen's HVM support did not SKIP with its reason: $out"
echo "$out" | grep -q '^pvhgrub-boot SKIP' || fail "the pvhgrub step without Xen's HVM support did not SKIP: $out"
echo "$out" | grep -q 'XL-RAN' && fail "a step that needs hvm ran without it: $out"
out=$(VIRT_CAPS="pv hvm hap" dry "hvm" yes "")
echo "$out" | grep -q 'XL-RAN step hvm' || fail "the hvm step did not run with virt_caps hvm: $out"
echo "ok: a missing need is one SKIP line with its reason; met needs run the step; a silent step fails; hvm needs virt_caps hvm"
exit 0
