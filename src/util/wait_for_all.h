// WaitForAll: on leaving its scope, waits for the futures that a member of each item of a
// container holds, so that tasks reading the caller's locals never outlive them, even when
// the caller throws or returns early.
#pragma once

namespace cairn {

template <typename Items, typename Future>
struct WaitForAll {
  Items& items;
  Future Items::value_type::*future;  // the member holding each item's future
  ~WaitForAll() {
    for (auto& item : items) {
      if ((item.*future).valid()) (item.*future).wait();
    }
  }
};

}  // namespace cairn
