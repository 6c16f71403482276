# tests/e2e/local.mk: end-to-end fio tests through nbdkit, make demo, make check-long.
