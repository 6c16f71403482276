# step hvm: an HVM guest with PV drivers on xbd-back; its emulated twin disk unplugged
# needs: hvm
# lines: hvm-

# ---- an HVM guest with PV drivers (Windows' and most clouds' kind) ---------
# Its disk is xvdb on xbd-back: below xvde, so libxl also hands the image
# to QEMU as an emulated IDE disk, which Linux's PV drivers unplug at boot
# (xen_platform_pci) before blkfront connects; the guest must see xvdb and
# no emulated disk, and the verify job must pass.  Slow under TCG
# (SeaBIOS loads the kernel and initramfs through port I/O): make
# check-xen-long.
# (Its need, hvm: Xen's virt_caps has hvm, which QEMU's CPU gives only
# with SVM: xen-check.sh picks such a CPU for a boot that asks for this
# step, and a boot without it prints the SKIP line.)
xbd_alive || xbd_start
GTYPE=hvm mkcfg hvm1 1 none xbdt.jobs=verify+rand4k+qd1 "$(xbd_disk xvdb /srv/guest2.img)"
STEP_G=hvm FOLLOW_FOR=1200 guest_jobs hvm1 xbd hvm
devs=$(grep -a '^DOMU-BLOCKDEVS' $L/console-hvm1.log | head -1 | sed 's/^DOMU-BLOCKDEVS //')
emu=$(echo " $devs " | grep -o ' \(sd\|hd\)[a-z]* ' | tr -d '\n')
if [ -n "$devs" ] && [ -z "$emu" ] && echo " $devs " | grep -q ' xvdb '; then
	STEP_G=hvm step hvm-unplug PASS "the guest's block devices: $devs (the emulated IDE twin of xvdb was unplugged)"
else
	STEP_G=hvm step hvm-unplug FAIL "the guest's block devices: ${devs:-none reported}; emulated:${emu:- none}"
fi
cp /var/log/xen/qemu-dm-hvm1.log $L/ 2>/dev/null
xl destroy hvm1 >/dev/null 2>&1
xbd_crashed "the HVM guest"
