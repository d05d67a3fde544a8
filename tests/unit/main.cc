#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include "util/log.h"

int main(int argc, char* argv[]) {
  cairn::SetLogToStderr(false);  // tests assert on messages; keep the output readable
  return Catch::Session().run(argc, argv);
}
