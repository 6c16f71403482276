# step again: std's jobs again on std's disk, after the other variants
# needs: xbd-back
# lines: xbd-again-

# the std run again, on its own disk, after the other variants: how far
# the order of the runs moves a figure in one boot
VARIANT_DISK=$XBD_DISK variant again xbdag "the std run again"
