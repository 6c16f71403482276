# step timeline.blkback: the timeline step's kernel blkback half: qd1 under ftrace on its std disk and on /dev/vdc
# needs: none
# lines: blkback-timeline-

# kernel blkback's single requests as dom0's kernel sees them: on its std
# disk (dom0's page cache) and on dom0's disk
PROF=ftrace
mkcfg bbtl 1 none xbdt.jobs=qd1 "format=raw, vdev=xvdb, access=rw, target=/srv/guest.img"
guest_jobs bbtl blkback timeline
xl destroy bbtl >/dev/null 2>&1
phy_run blkback bbtlp tphy xbdt.jobs=qd1
PROF=
