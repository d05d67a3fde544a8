#include <catch2/catch.hpp>

#include <fcntl.h>
#include <unistd.h>

#include "cache/fd_cache.h"

using namespace cairn;

namespace {

bool IsOpen(int fd) { return ::fcntl(fd, F_GETFD) != -1; }

// Opens /dev/null and counts the opens.
struct Opener {
  int opens = 0;
  std::function<Result<int>()> fn() {
    return [this]() -> Result<int> {
      opens++;
      return ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    };
  }
};

}  // namespace

TEST_CASE("FdCache: one descriptor per inode, shared") {
  FdCache cache(4);
  Opener opener;
  auto a = cache.Get(7, opener.fn());
  auto b = cache.Get(7, opener.fn());
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  CHECK((*a)->fd() == (*b)->fd());
  CHECK(opener.opens == 1);
  CHECK(cache.size() == 1);
}

TEST_CASE("FdCache: keeps at most capacity descriptors, least recently used leaves first") {
  FdCache cache(2);
  Opener opener;
  int first_fd;
  {
    auto first = cache.Get(1, opener.fn());
    REQUIRE(first.ok());
    first_fd = (*first)->fd();
    REQUIRE(cache.Get(2, opener.fn()).ok());
    REQUIRE(cache.Get(1, opener.fn()).ok());  // 1 is now the most recent
    auto third = cache.Get(3, opener.fn());   // 2 leaves
    REQUIRE(third.ok());
    CHECK(cache.size() == 2);
    CHECK(opener.opens == 3);
    REQUIRE(cache.Get(1, opener.fn()).ok());
    CHECK(opener.opens == 3);
    REQUIRE(cache.Get(2, opener.fn()).ok());  // opened again; 3 leaves
    CHECK(opener.opens == 4);
    CHECK(cache.size() == 2);
  }
  CHECK(IsOpen(first_fd));  // still cached
}

TEST_CASE("FdCache: a descriptor out of the cache stays open for its holder, then closes") {
  FdCache cache(1);
  Opener opener;
  auto held = cache.Get(1, opener.fn());
  REQUIRE(held.ok());
  int fd = (*held)->fd();
  REQUIRE(cache.Get(2, opener.fn()).ok());  // 1 leaves the cache
  CHECK(cache.size() == 1);
  CHECK(IsOpen(fd));
  held = Status::NotFound("dropped");
  CHECK_FALSE(IsOpen(fd));
}

TEST_CASE("FdCache: Forget drops the descriptor; an open racing with it is not cached") {
  FdCache cache(4);
  Opener opener;
  REQUIRE(cache.Get(5, opener.fn()).ok());
  cache.Forget(5);
  CHECK(cache.size() == 0);
  auto racing = cache.Get(5, [&]() -> Result<int> {
    cache.Forget(5);  // the file is removed while it is being opened
    return ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  });
  REQUIRE(racing.ok());
  CHECK(IsOpen((*racing)->fd()));
  CHECK(cache.size() == 0);
  REQUIRE(cache.Get(5, opener.fn()).ok());
  CHECK(opener.opens == 2);
  CHECK(cache.size() == 1);
}

TEST_CASE("FdCache: a failed open is reported and not cached") {
  FdCache cache(4);
  auto failed = cache.Get(9, []() -> Result<int> { return Status::IOError("no such file"); });
  REQUIRE_FALSE(failed.ok());
  CHECK(failed.status().message().find("no such file") != std::string::npos);
  CHECK(cache.size() == 0);
}

TEST_CASE("FdCache: a pinned descriptor stays cached past the capacity until unpinned") {
  FdCache cache(1, 1);
  Opener opener;
  bool pinned = false;
  auto written = cache.GetPinned(1, opener.fn(), &pinned);
  REQUIRE(written.ok());
  CHECK(pinned);
  std::weak_ptr<const OpenFile> weak = *written;
  written = Status::NotFound("dropped by its holder");
  for (uint64_t ino = 2; ino < 10; ino++) REQUIRE(cache.Get(ino, opener.fn()).ok());
  CHECK(cache.size() == 2);  // the pinned one and the last
  CHECK_FALSE(weak.expired());
  auto again = cache.Get(1, opener.fn());
  REQUIRE(again.ok());
  CHECK(*again == weak.lock());
  CHECK(opener.opens == 9);
  again = Status::NotFound("dropped");

  // Only max_pinned of them: the caller is told to sync its writes itself.
  auto second = cache.GetPinned(2, opener.fn(), &pinned);
  REQUIRE(second.ok());
  CHECK_FALSE(pinned);
  CHECK(cache.pinned() == 1);

  cache.Unpin(1);
  CHECK(cache.pinned() == 0);
  CHECK(cache.size() == 1);  // back under the LRU rule, as the most recently used
  CHECK_FALSE(weak.expired());
  REQUIRE(cache.Get(5, opener.fn()).ok());
  CHECK(weak.expired());
  REQUIRE(cache.GetPinned(3, opener.fn(), &pinned).ok());
  CHECK(pinned);
  cache.Forget(3);
  CHECK(cache.pinned() == 0);
}
