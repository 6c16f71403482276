# step nopoll: the jobs with xbd-back --poll-max-ns 0
# needs: xbd-back
# lines: xbd-nopoll-

# the same guest with xbd-back's adaptive polling off: what polling costs
variant nopoll xbdnp "the no-polling run" --poll-max-ns 0
