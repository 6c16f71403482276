# tests/local.mk: what the tests of every part share.
#
# fio saves a verify state file (local-JOB-N-verify.state) in its working
# directory, the build directory, after each verifying write job.
CLEANFILES += local-*-verify.state

# The one shell library of the simulator tests (tests/README.md says which
# file each area sources).
EXTRA_DIST += tests/lib/xbd.sh tests/README.md

# The connect, close and request code of the test frontends (rawfront,
# evilfront, xsflood), built into each of them.
TESTFRONT_SOURCES = tests/lib/testfront.c tests/lib/testfront.h
