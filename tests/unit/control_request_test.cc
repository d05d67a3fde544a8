// Tests of the control socket's request parser: known good and bad messages, and a seeded
// fuzz run (tests/unit/fuzz.h) checking that whatever it accepts is exactly the
// serialisation of what it parsed.
#include <catch2/catch.hpp>

#include <limits>
#include <random>

#include <fmt/format.h>

#include "fuzz.h"
#include "util/control_request.h"

namespace cairn {
namespace {

Status ParseStatus(std::string_view message) { return ParseControlRequest(message).status(); }

TEST_CASE("ControlRequest: every verb round-trips", "[control]") {
  std::vector<ControlRequest> requests(9);
  requests[0].verb = ControlVerb::kPersist;
  requests[1].verb = ControlVerb::kEvict;
  requests[2].verb = ControlVerb::kStatus;
  requests[3].verb = ControlVerb::kRulesReload;
  requests[4].verb = ControlVerb::kDiskFail;
  requests[4].disk = 4294967295u;
  requests[5].verb = ControlVerb::kApply;
  requests[5].path = "/a b/c\td";
  requests[6].verb = ControlVerb::kDryRun;
  requests[6].rules_name = "/etc/cairn/new.rules";
  requests[6].rules_text = "policy bulk {\n  raid = rs-4-2\t# a \\ comment\n}\n";
  requests[6].path = "/";
  requests[7].verb = ControlVerb::kRepair;
  requests[7].rebuild = true;
  requests[7].budget_ns = std::numeric_limits<int64_t>::max();
  requests[7].rate = std::numeric_limits<uint64_t>::max();
  requests[8].verb = ControlVerb::kKeys;
  requests[8].key_action = "rewrap";
  requests[8].key_name = "k1";
  for (const ControlRequest& request : requests) {
    std::string wire = SerializeControlRequest(request);
    CAPTURE(wire);
    REQUIRE(wire.find('\n') == wire.size() - 1);  // one line, whatever the fields hold
    auto parsed = ParseControlRequest(wire);
    REQUIRE(parsed.ok());
    CHECK(*parsed == request);
  }
  CHECK(SerializeControlRequest(requests[4]) == "disk-fail\t4294967295\n");
  CHECK(SerializeControlRequest(requests[8]) == "keys\trewrap\tk1\n");
  CHECK(ParseStatus("keys\tforget\tk1\n").message().find("expected count, rewrap, erase or attributes") != std::string::npos);
  CHECK(SerializeControlRequest(requests[5]) == "apply\t/a b/c\\td\n");
}

TEST_CASE("ControlRequest: refuses what is not exactly a request", "[control]") {
  REQUIRE(ParseControlRequest("disk-fail\t1\n").ok());
  CHECK(ParseControlRequest("disk-fail\t1\n")->disk == 1);
  for (std::string_view bad : std::initializer_list<std::string_view>{
           "disk-fail\t 1\n", "disk-fail\t1 \n", "disk-fail\t01\n", "disk-fail\t+1\n", "disk-fail\t-1\n",
           "disk-fail\t\n", "disk-fail\t4294967296\n", "disk-fail\t1", "disk-fail\t1\n\n", "disk-fail\t1\nstatus\n",
           "disk-fail\n", "disk-fail\t1\t2\n", "persist\t\n", "status\tx\n", "Status\n", "\n", "", "stat\\us\n",
           "apply\ta/b\n", "apply\t/a/../b\n", "apply\t/a//b\n", "apply\t/a/\n", "apply\t/./a\n",
           std::string_view("apply\t/a\0b\n", 10), "apply\t/a\\x\n", "apply\t/a\\\n", "repair\tfix\t0\t0\n",
           "repair\tscrub\t9223372036854775808\t0\n", "repair\tscrub\t0\t18446744073709551616\n",
           "repair\tscrub\t1e3\t0\n", "dry-run\t\trules\t/\n", "dry-run\tname\trules\n"}) {
    CAPTURE(std::string(bad));
    Status st = ParseStatus(bad);
    CHECK(st.code() == Status::Code::kInvalidArgument);
    CHECK(st.message().starts_with("control request: "));
  }
  CHECK(ParseStatus("disk-fail\t 1\n").message().find("\" 1\"") != std::string::npos);  // names what it got
  CHECK(ParseStatus(std::string(kMaxControlRequestBytes + 1, 'a')).message().find("at most") != std::string::npos);
}

// A valid request with random fields, biased to the bytes the wire form must escape.
ControlRequest RandomRequest(std::mt19937_64& rng) {
  auto text = [&](size_t max_length, std::string_view alphabet) {
    std::string out(rng() % (max_length + 1), ' ');
    for (char& c : out) c = alphabet[rng() % alphabet.size()];
    return out;
  };
  auto path = [&] {
    std::string out;
    for (size_t parts = rng() % 4; parts > 0; parts--) out += "/" + text(6, "ab.\t\n\\ x") + "x";
    return out.empty() ? std::string("/") : out;
  };
  ControlRequest r;
  r.verb = static_cast<ControlVerb>(rng() % 8);
  switch (r.verb) {
    case ControlVerb::kDiskFail: r.disk = static_cast<uint32_t>(rng() >> (rng() % 64)); break;
    case ControlVerb::kApply: r.path = path(); break;
    case ControlVerb::kDryRun:
      r.rules_name = "r" + text(10, "/ab\t\n\\.");
      r.rules_text = text(60, "policy{}=\n\t\\# ab-0");
      r.path = path();
      break;
    case ControlVerb::kRepair:
      r.rebuild = rng() % 2;
      r.budget_ns = static_cast<int64_t>(rng() >> (1 + rng() % 63));
      r.rate = rng() >> (rng() % 64);
      break;
    default: break;
  }
  return r;
}

TEST_CASE("ControlRequest: fuzz, whatever is accepted re-serialises to itself", "[control][fuzz]") {
  test::Fuzz fuzz("control-request", 20000);
  // Few words, so that each comes often: what a lenient parser would take for a number or a path.
  const std::vector<std::string> dictionary = {"0", "\t0", " ", "+", "\\", "\t", "\n", "/", "."};
  uint64_t accepted = 0;
  while (fuzz.Next()) {
    ControlRequest original = RandomRequest(fuzz.rng());
    std::string wire = SerializeControlRequest(original);
    auto parsed = ParseControlRequest(wire);
    REQUIRE(parsed.ok());
    REQUIRE(*parsed == original);
    fuzz.Mutate(wire, dictionary);
    auto fuzzed = ParseControlRequest(wire);
    if (!fuzzed.ok()) {
      if (!fuzzed.status().message().starts_with("control request: ")) {
        FAIL(fmt::format("refusal without context for {:?}: {}", wire, fuzzed.status().message()));
      }
      continue;
    }
    accepted++;
    if (SerializeControlRequest(*fuzzed) != wire) {
      FAIL(fmt::format("accepted {:?} but it serialises back as {:?}", wire, SerializeControlRequest(*fuzzed)));
    }
  }
  CHECK(accepted > 0);                            // the mutations also make valid messages
  CHECK(accepted < fuzz.iterations() * 9 / 10);   // and mostly invalid ones
}

}  // namespace
}  // namespace cairn
