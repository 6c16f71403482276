# step blkback: the jobs against kernel xen-blkback (loaded by the runner just before)
# needs: none
# lines: blkback-std-

mkcfg bb 1 none "" "format=raw, vdev=xvdb, access=rw, target=/srv/guest.img"
guest_jobs bb blkback std
xl destroy bb >/dev/null 2>&1
