# step pvhgrub: a PVH guest booted by GRUB's PVH image from the pvgrub step's disk
# needs: hvm
# lines: pvhgrub-boot

# GRUB's PVH image (grub-i386-xen_pvh.bin) in a PVH guest: its blkfront
# reads grub.cfg, the bzImage and the initramfs from xbd-back's disk
PVGRUB_TYPE=pvh grub_step pvhgrub-boot pvhg
