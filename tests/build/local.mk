# tests/build: the build system itself, in configurations other than the
# one the suite runs in (a configure + make of its own in a temporary dir),
# and the layering of the tree (#include lines, no build).
BUILD_TESTS = tests/build/disable-shared.sh tests/build/layering.sh
dist_check_SCRIPTS += $(BUILD_TESTS)
TESTS += $(BUILD_TESTS)
