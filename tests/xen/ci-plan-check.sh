#!/bin/bash
# tests/xen/ci-plan-check.sh: CI's boots of Xen stand on nothing that QEMU
# 7.2 emulates badly.  PVH and HVM guests and a PVH dom0 run on QEMU's TCG
# emulation of AMD SVM, which kills such guests now and then, and once in
# a while Xen itself (tests/xen/README.md): a CI that boots them fails by
# luck.  `make check-xen`, which scripts/test.sh runs, asks xen-check.sh
# for its default configurations with no knob set; here that script only
# prints its plan (BOOT=plan: no root, nothing built or booted), and each
# x86 configuration's must have a CPU without SVM, a PV dom0, PV guests and a
# PV lifecycle guest, with no step that declares "needs: hvm"; the Arm64
# one (qemu-system-aarch64: Xen on Arm has one guest type, "pvh" to xl,
# and QEMU emulates no SVM there) an Arm CPU and nothing that asked for
# SVM.  The four configurations (deb12, deb12-count, deb13, arm64) must all
# be there, deb12-count being the counted table's short form (issue 47:
# COUNT=1, step count and a bound on xbd-back's instructions per I/O), and
# one of them must run step backup (issue 49: the backup round trip).  The
# checker first judges made-up plans that break each rule, and must
# refuse every one: a checker that passes them could not fail.
. "$top_srcdir/tests/lib/sim.sh"
X=$top_srcdir/tests/xen/xen-check.sh

# judge: reads XEN-PLAN lines; prints one line per broken rule; 1 if any
judge() {
	awk '
	/^XEN-PLAN / { n++
		delete f; for (i = 2; i <= NF; i++) { e = index($i, "="); f[substr($i, 1, e - 1)] = substr($i, e + 1) }
		c = f["config"]
		if (c ~ /^arm64/) {
			if (f["cpu"] !~ /^cortex-/) { print c ": CPU " f["cpu"] " is not an Arm one"; bad = 1 }
		} else {
			if (f["cpu"] !~ /-svm/) { print c ": CPU " f["cpu"] " has SVM (CI runs qemu64,-svm)"; bad = 1 }
			if (f["dom0"] != "pv") { print c ": a " f["dom0"] " dom0 (CI boots PV dom0s only)"; bad = 1 }
			if (f["guests"] != "pv") { print c ": " f["guests"] " guests (CI creates PV guests only)"; bad = 1 }
			if (f["lifecycle"] != "pv") { print c ": a " f["lifecycle"] " lifecycle guest (CI runs a PV one)"; bad = 1 }
		}
		if (f["svm"] != "none") { print c ": asks for SVM: " f["svm"]; bad = 1 }
		# the counted table'"'"'s short form (issue 47): a boot that counts, with step count and a bound
		if (c == "deb12-count" && (f["count"] != 1 || ("+" f["steps"] "+") !~ /\+count\+/ || f["bound"] == "none")) {
			print c ": no short count (count=" f["count"] ", steps " f["steps"] ", bound " f["bound"] ")"; bad = 1 }
		# the backup round trip on real Xen (issue 49): some boot runs step backup
		if (("+" f["steps"] "+") ~ /\+backup\+/) backup = 1
		seen[c] = 1 }
	END { if (!backup) { print "no configuration runs step backup (the backup round trip on real Xen)"; bad = 1 }
		if (!("deb12" in seen) || !("deb12-count" in seen) || !("deb13" in seen) || !("arm64" in seen)) {
			print "not all four configurations planned (deb12, deb12-count, deb13, arm64): " n " plan lines"; bad = 1 }
		exit bad }'
}
# plan ENV...: xen-check.sh's plan with only these knobs set (as make check-xen runs it)
plan() {
	env -i PATH="$PATH" BOOT=plan "$@" bash "$X" 2>&1
}

# ---- the checker refuses plans that break a rule ------------------------------
while IFS='|' read -r k v; do
	out=$(plan "$k=$v")
	if echo "$out" | judge >/dev/null; then
		echo "$out"
		fail "the checker passed a plan with $k='$v', which CI must not run"
	fi
	echo "refused, as it must be, with $k='$v': $(echo "$out" | judge | head -1)"
done <<'KNOBS'
LC_TYPE|pvh
GUEST_TYPE|hvm
DOM0_TYPE|pvh
DEB13_STEPS|xbd hvm
DEB12_STEPS|xbd pvhgrub
DEB12_STEPS|xbd mq hotplug workers kill9 destroy pvgrub nbd front
CPU|qemu64,+npt
XEN_CONFIG|deb12 deb13
ARM_CPU|qemu64
XEN_CONFIG|deb12 deb13 arm64
COUNT|0
COUNT_BOUND|
KNOBS

# ---- CI's own plan -------------------------------------------------------------
out=$(plan)
echo "$out"
why=$(echo "$out" | judge) || fail "CI's boots (make check-xen with no knob) break a rule: $why"
echo "ok: CI's boots of Xen run PV guests on a PV dom0 on a CPU without SVM (deb12, deb13), deb12-count with the short count, the backup round trip, and Xen on Arm64 (arm64)"
# ---- the Arm64 boots count as x86's do (make check-xen-cost's arm64) -----------------
for c in arm64 arm64-deb13; do
	out=$(plan XEN_CONFIG=$c STEPS=count)
	echo "$out"
	echo "$out" | grep -q "^XEN-PLAN config=$c .* steps=count .*cpus=3 count=1 " ||
		fail "$c with STEPS=count does not plan a counting boot on three CPUs: $out"
done
exit 0
