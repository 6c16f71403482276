# step lifecycle: pause, save/restore, migrate, reboot, root filesystem of guest lc with fio verify in flight
# needs: none
# lines: lc-

# ---- the guest lifecycle with fio verify in flight (lifecycle.sh) ----------
pvgrub_use xbd
lifecycle_steps
xbd_crashed "the lifecycle steps"
kernel_clean lifecycle
