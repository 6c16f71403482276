# tests/xen/lib/steps.sh: sourced by dom0-init.sh.  The runner's part of a
# step: its file's header, what it needs, its SKIP line when that is
# missing, and the check at the end that each step asked for said
# something.  A step is tests/xen/steps/NAME.sh (in dom0: $H/steps/NAME.sh),
# and starts with three lines:
#   # step NAME: what it shows
#   # needs: TOKEN...           (or "none")
#   # lines: PREFIX...          its step lines start with one of these
# A file NAME.PART.sh is a part of step NAME that runs at another place of
# the order (loop.blkback: the loop step's kernel blkback half); it runs
# when NAME is asked for, and its lines are not NAME's.
# The needs (what today's steps check before they run):
#   xbd-back      xbd-back is running (xbd_alive): step xbd starts it
#   guest:NAME    guest NAME exists (xl domid NAME)
#   cmd:NAME      dom0 has the command NAME
#   step:NAME     step NAME is asked for too: this one runs inside its
#                 sequence, with what it set up
#   dom0:pv, dom0:pvh   dom0 is of that type
#   hvm           Xen can run HVM containers (PVH and HVM guests): virt_caps
#                 has hvm, which QEMU's CPU gives only with SVM; xen-check.sh
#                 gives a boot SVM only when a step it asks for (or a guest
#                 or dom0 type) needs it, and CI's boots never do
# A wanted step that lacks one prints one line, "PREFIX SKIP needs ...",
# PREFIX its first lines prefix ("needs" appended when it ends in "-"),
# and does not run.
# step_header NAME KEY: the value of "# KEY:" in the step file NAME
step_header() { sed -n "s/^# $2: *//p" "$H/steps/$1.sh" 2>/dev/null | head -1; }
# the guests a step may need, and what makes them
guest_maker() {
	case $1 in
	xbd1) echo "step xbd makes it; hotplug and destroy act on it" ;;
	xbd3) echo "dom0-init.sh's third-guest phase makes it while xbd-back runs, when hotplug, destroy, workers or kill9 is asked for" ;;
	*) echo "no step makes it" ;;
	esac
}
# step_needs NAME: 0 when what step NAME needs is there; else its SKIP line, 1
step_needs() {
	local n why= p
	for n in $(step_header $1 needs); do
		case $n in
		none) ;;
		xbd-back) xbd_alive ||
			if want xbd; then why="$why; needs xbd-back running, and it is not (it did not start, or died: see xbd-start, xbd-back-died)"
			else why="$why; needs xbd-back running, which step xbd starts: not asked for"; fi ;;
		guest:*) xl domid ${n#guest:} >/dev/null 2>&1 ||
			why="$why; needs guest ${n#guest:}, not running ($(guest_maker ${n#guest:}))" ;;
		cmd:*) command -v ${n#cmd:} >/dev/null || why="$why; needs ${n#cmd:}, not in this dom0" ;;
		step:*) want ${n#step:} || why="$why; runs inside step ${n#step:}, which is not asked for" ;;
		dom0:*) [ "$D0TYPE" = ${n#dom0:} ] || why="$why; needs a ${n#dom0:} dom0, this one is $D0TYPE" ;;
		hvm) grep -q '^virt_caps *:.*hvm' $L/xl-info.txt 2>/dev/null ||
			why="$why; needs Xen's HVM support (virt_caps: $(sed -n 's/^virt_caps *: //p' $L/xl-info.txt 2>/dev/null); QEMU's CPU without SVM)" ;;
		*) why="$why; needs '$n', which tests/xen/lib/steps.sh does not know" ;;
		esac
	done
	[ -n "$why" ] || return 0
	p=$(step_header $1 lines); p=${p%% *}
	case $p in *-) p=${p}needs ;; esac
	step ${p:-step-$1} SKIP "${why#; }"
	return 1
}
# run_step NAME: the step file NAME, when its step is asked for and has
# what it needs.  No local variables: the step's code runs in this
# function and its variables are the script's, as they were when each
# step was a block of dom0-init.sh.
run_step() {
	want "${1%%.*}" || return 0
	step_needs "$1" || return 0
	. "$H/steps/$1.sh"
}
# STEP_LINES: "NAME:PREFIX" a line, from the files' "# lines:" headers
# (several prefixes: \(A\|B\), a grep pattern)
step_lines() {
	local f n l
	for f in "$H"/steps/*.sh; do
		n=${f##*/}; n=${n%.sh}
		case $n in *.*) continue ;; esac
		l=$(step_header $n lines)
		case $l in *" "*) l="\\($(echo $l | sed 's/ /\\|/g')\\)" ;; esac
		echo "$n:$l"
	done
}
# Each step asked for must print a line of its own (the prefix of its
# step lines here): one that printed nothing has not run, and fails.
steps_said() {
	local s p
	for s in $STEPS; do
		p=$(echo "$STEP_LINES" | tr ' ' '\n' | sed -n "s/^$s://p")
		if [ -z "$p" ]; then
			STEP_G=- step step-$s FAIL "no such step (tests/xen/README.md lists them)"
		elif ! grep -q "^$p" $L/steps.txt 2>/dev/null; then
			STEP_G=- step step-$s FAIL "asked for, but it printed no line of its own ($p...): it did not run"
		fi
	done
}
