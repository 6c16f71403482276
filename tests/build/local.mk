# tests/build: the build system itself, in configurations other than the
# one the suite runs in (a configure + make of its own in a temporary dir).
BUILD_TESTS = tests/build/disable-shared.sh
dist_check_SCRIPTS += $(BUILD_TESTS)
TESTS += $(BUILD_TESTS)
