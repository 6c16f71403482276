# step uring: the jobs with xbd-back --engine uring
# needs: xbd-back
# lines: xbd-uring-

# the same jobs with io_uring (engine = uring) instead of libaio, same boot
variant uring xbdur "the io_uring run" --engine uring
grep -a -q "opened /srv/guest2.img (uring engine" $L/xbd-back.log ||
	step xbd-uring-engine FAIL "the disk was not served by io_uring: $(grep -a 'guest2.img' $L/xbd-back.log | tail -2 | tr '\n' '|')"
