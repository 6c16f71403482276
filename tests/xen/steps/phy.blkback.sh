# step phy.blkback: the phy step's kernel blkback half: the jobs on /dev/vdc as a phy disk
# needs: none
# lines: blkback-phy-

# kernel blkback on dom0's disk, as xbd-back's phy run had it
phy_run blkback bbph
