# step phy: xbd-back's half: the jobs on a disk of dom0's own (/dev/vdc)
# needs: xbd-back
# lines: xbd-phy-

phy_run xbd xbdph
xbd_crashed "the phy run"
