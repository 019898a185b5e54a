// doctest's implementation, compiled once for every test program (doctest_dep in meson.build).
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>
