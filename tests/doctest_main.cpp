// doctest's implementation and its main, compiled once for the test programs that have no main
// of their own (doctest_main_dep in meson.build).
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>
