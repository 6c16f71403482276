# step single: the jobs with xbd-back --workers 0
# needs: xbd-back
# lines: xbd-single-

# the same jobs with every disk in the main process (workers = 0): what
# the per-domain confined workers (the default) cost, same boot
variant single xbdsg "the workers = 0 run" --workers 0
