# step nopin: the jobs with xbd-back --pin-rings 0
# needs: xbd-back
# lines: xbd-nopin-

# the same jobs with threads and interrupts where the kernel puts them: what
# pin-rings (the default on Xen) gains
variant nopin xbdnpn "the pin-rings = 0 run" --pin-rings 0
