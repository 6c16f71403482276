# step bbmq: the multi-queue guest on kernel blkback (the mq rows' 'vs bb')
# needs: step:blkback
# lines: blkback-mq-

# the multi-queue guest on kernel blkback: only a comparison (make check-xen-cost)
mq_run bbmq blkback "format=raw, vdev=xvdb, access=rw, target=/srv/guest2.img" vbd
