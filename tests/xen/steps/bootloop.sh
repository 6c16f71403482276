# step bootloop: N boots of a guest of the boot's guest type, the verify job on its disk from xbd-back in each; how many the emulator killed, and where each dead vCPU's dump points
# needs: xbd-back
# lines: bootloop

# ---- how often the emulator kills a nested guest ----------------------------
# Under TCG a PVH or HVM guest now and then dies of a triple fault whose
# dump holds Xen's own address after its VMRUN (tests/xen/README.md).  This
# step counts it over BOOTLOOP_N boots (xbdt.bootloop-n, default 8), each
# a fresh guest that runs the verify job on xvdb and powers off; the same
# step with TCG_THREAD=single on the host says whether the emulator's
# threads (one per vCPU, by default) have a part in it.  A boot that did
# not verify and was not killed by a triple fault fails the step.
STEP_G=$GTYPE
bl_n=$(arg xbdt.bootloop-n); bl_n=${bl_n:-8}
bl_ok=0 bl_tf=0 bl_vmrun=0 bl_bad= bl_t0=$(up)
for bl_i in $(seq $bl_n); do
	bl_g=boot$bl_i
	mkcfg $bl_g 1 none "xbdt.jobs=verify" "$(xbd_disk xvdb /srv/guest.img)"
	if ! create $bl_g; then bl_bad="$bl_bad $bl_g:create"; continue; fi
	bl_d=$(xl domid $bl_g 2>/dev/null)
	for bl_s in $(seq 600); do xl domid $bl_g >/dev/null 2>&1 || break; sleep 1; done
	xl destroy $bl_g >/dev/null 2>&1
	glog $bl_g >$L/console-$bl_g.log
	bl_dump=$(xl dmesg 2>/dev/null | grep -A4 " d${bl_d}v[0-9]* Triple fault" | sed -n 's/.*RIP: *\([^ ]*\).*/\1/p' | head -1)
	if grep -q '^DOMU-JOB-RESULT job=verify .* rc=0 .* verify=ok' $L/console-$bl_g.log; then
		bl_ok=$((bl_ok + 1))
	elif xl dmesg 2>/dev/null | grep -q " d${bl_d}v[0-9]* Triple fault"; then
		bl_tf=$((bl_tf + 1))
		# Xen's code segment (e008): the guest was handed Xen's state
		case $bl_dump in e008:*) bl_vmrun=$((bl_vmrun + 1)) ;; esac
		say "bootloop: $bl_g (domid $bl_d) died of a triple fault, its vCPU's RIP $bl_dump"
	else
		bl_bad="$bl_bad $bl_g:$(grep -a -E '^DOMU-(JOB-RESULT|NO-|FIO-ERR)' $L/console-$bl_g.log | tail -1 | tr -s ' ' | cut -c1-80)"
	fi
done
bl_note="$bl_n boots of a $GTYPE guest in $(since $bl_t0)s (TCG threads: $(arg xbdt.tcg-thread)): $bl_ok verified, $bl_tf killed by a triple fault ($bl_vmrun of them with Xen's code segment in the dump: the emulator's VMRUN)"
if [ -z "$bl_bad" ] && [ $bl_ok -gt 0 ]; then step bootloop PASS "$bl_note"
else step bootloop FAIL "$bl_note; failed otherwise:${bl_bad:- none verified}"; fi
