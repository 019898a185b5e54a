// doctest main of the reference's CPU suite; the cases live in test_ops.cpp,
// test_safetensors.cpp and test_vit.cpp.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>
