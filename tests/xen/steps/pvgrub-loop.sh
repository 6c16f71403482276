# step pvgrub-loop: the long target: N pvgrub2 boots from xbd-back, each followed by one from kernel blkback
# needs: none
# lines: pvgrub-loop

# ---- the long target: pvgrub2 boots in a loop, kernel blkback as the control ----
# xbdt.pvgrub-type=pvh: GRUB's PVH image in PVH guests instead
PVGRUB_TYPE=$(arg xbdt.pvgrub-type); PVGRUB_TYPE=${PVGRUB_TYPE:-pv}
STEP_G=$PVGRUB_TYPE
if pvgrub_setup; then
	n=$(arg xbdt.pvgrub-n)
	b=$(arg xbdt.pvgrub-backends)
	pvgrub_loop ${n:-20} $PVGRUB_BOUND $(echo ${b:-xbd+blkback} | tr + ' ')
else
	step pvgrub-loop FAIL "no pvgrub2 image or no boot disk"
fi
if xbd_alive; then kill -TERM $XBD_PID; wait $XBD_PID 2>/dev/null; fi
XBD_PID=
