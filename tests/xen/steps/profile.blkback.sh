# step profile.blkback: the profile step's kernel blkback half: perf and xentrace of the jobs on kernel blkback
# needs: step:blkback cmd:perf
# lines: blkback-perf-

PROF=perf
mkcfg bbperf 1 none "" "format=raw, vdev=xvdb, access=rw, target=/srv/guest.img"
guest_jobs bbperf blkback perf
xl destroy bbperf >/dev/null 2>&1
PROF=xentrace
mkcfg bbxentrace 1 none $TRACE_JOBS "format=raw, vdev=xvdb, access=rw, target=/srv/guest.img"
guest_jobs bbxentrace blkback xentrace
xl destroy bbxentrace >/dev/null 2>&1
PROF=
