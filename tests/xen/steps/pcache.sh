# step pcache: the jobs with xbd-back --direct 0 on std's disk (dom0's page cache)
# needs: xbd-back
# lines: xbd-pcache-

# xbd-back through dom0's page cache (direct = 0) on std's disk, as
# kernel blkback's std disk is served (xl's block script gives it a loop
# device without direct I/O): the two backends on one storage path
VARIANT_DISK=$XBD_DISK variant pcache xbdpc "the page-cache run" --direct 0
