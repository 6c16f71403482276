# step pvgrub: a PV guest booted by pvgrub2 from a disk xbd-back serves
# needs: none
# lines: pvgrub-boot

# ---- pvgrub2: GRUB's own blkfront, then Linux's, on one disk served by xbd-back ----
PVGRUB_TYPE=pv grub_step pvgrub-boot pvg
