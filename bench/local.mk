# bench/local.mk: make bench.
