// Test prelude for tests/torch: libtorch first, then Catch2. Debian's libtorch is built with glog,
// whose CHECK(condition) macro leaks out of the torch headers and collides with Catch's CHECK;
// the tests mean Catch's, so glog's is dropped before Catch defines its own. Include this header
// after every other torch-pulling header of the test (its name sorts last, so clang-format keeps
// it there).
#pragma once

#include <torch/cuda.h>
#include <torch/torch.h>

#undef CHECK
#include <catch2/catch.hpp>
