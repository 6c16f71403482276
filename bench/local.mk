# bench/local.mk: `make bench`, the side-by-side benchmark (bench/run.py,
# BENCHMARKING.md): fio --ioengine=libaio on the backing file next to xbd on
# the simulator, with A/B columns, in one run.  Writes bench/table.txt,
# bench/results.json and bench/chart.png into the build tree.
#
#   make bench                              the full run (under 10 minutes)
#   make bench BENCH_RUNTIME=0.5 BENCH_REPEAT=1   a quick end-to-end check
#   make bench BENCH_ONLY=rr32,shm          only rows naming that workload or target
# (the other settings, BENCH_REPEAT, BENCH_BUDGET, BENCH_PIN, ...: BENCHMARKING.md)
EXTRA_DIST += bench/run.py BENCHMARKING.md
CLEANFILES += bench/table.txt bench/results.json bench/chart.png bench/chart.gp \
	bench/chart-fio.dat bench/chart-ab.dat

BENCH_DEPS = sim/xbd-sim xenstore/xbd-xenstored blkback/xbd-back blkfront/xbd-front
if BUILD_NBDKIT_PLUGIN
# The idle-CPU measurement keeps a ring attached and quiet through nbdkit.
BENCH_DEPS += blkfront/nbdkit-xbd-plugin.la
endif

bench: $(BENCH_DEPS)
	@FIO='$(FIO)' NBDKIT='$(NBDKIT)' python3 $(abs_top_srcdir)/bench/run.py \
		--builddir '$(abs_top_builddir)' --out '$(abs_top_builddir)/bench'
.PHONY: bench

# The harness end to end, small (tests/bench/smoke.sh).
TESTS += tests/bench/smoke.sh
dist_check_SCRIPTS += tests/bench/smoke.sh
