# step loop: xbd-back's half: the loop jobs on a loop device with direct I/O
# needs: xbd-back
# lines: xbd-loop-

# xbd-back on the loop device with direct I/O (kernel blkback's loop run
# serves the same device): the two backends on one storage path
loop_run xbd xbdlp
xbd_crashed "the loop-device run"
