# step loop.blkback: the loop step's kernel blkback half: the loop jobs on the same loop device
# needs: none
# lines: blkback-loop-

# kernel blkback on the loop device with direct I/O that xbd-back's loop run had
loop_run blkback bblp
