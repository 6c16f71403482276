# step mqsingle: the multi-queue guest with xbd-back --workers 0
# needs: xbd-back
# lines: xbd-mqsg-

# the multi-queue guest with its disk in the main process
variant mqsg xbdms "the multi-queue guest without a worker" --workers 0
