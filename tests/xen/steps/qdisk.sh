# step qdisk: the jobs against QEMU's qdisk
# needs: none
# lines: qdisk-std-

mkcfg qd 1 none "" "format=raw, vdev=xvdb, access=rw, backendtype=qdisk, target=/srv/guest.img"
guest_jobs qd qdisk std
xl destroy qd >/dev/null 2>&1
cp /var/log/xen/qemu-dm-qd.log $L/ 2>/dev/null
