# step lckill9: kill -9 of xbd-back under the lifecycle guest's rounds
# needs: step:lifecycle
# lines: lc-kill9

# It runs inside the lifecycle step's sequence, between its migrate and
# reboot rounds, on the guest that step made: its code is lib/lifecycle.sh's
# 'if want lckill9; then lc_run kill9; fi' in lifecycle_steps.  This file
# declares it (needs, lines) for the runner; it has no code of its own.
