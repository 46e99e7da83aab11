// The per-thread cache of the blocks lock operations make and drop: a block given back is handed
// out again for the same size, on the thread that gave it back, up to the cache's bounds; blocks
// too large for it, and every block under the sanitizers, go to operator new and delete.

#include "block_cache.hpp"

#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cstddef>
#include <memory>
#include <set>
#include <thread>
#include <vector>

namespace {

using redlock::detail::block_cache_depth;
using redlock::detail::block_cache_largest;
using redlock::detail::block_cache_recycles;
using redlock::detail::cached_allocate;
using redlock::detail::cached_allocator;
using redlock::detail::cached_deallocate;

struct counted {
  explicit counted(int& alive) : alive(alive) { ++alive; }
  ~counted() { --alive; }
  int& alive;
  char payload[200] = {};
};

}  // namespace

BOOST_AUTO_TEST_SUITE(block_cache)

BOOST_AUTO_TEST_CASE(a_block_given_back_is_handed_out_again_for_its_size) {
  void* first = cached_allocate(600);
  cached_deallocate(first, 600);
  // 596 bytes falls in the same 8-byte step as 600 (593 to 600).
  void* again = cached_allocate(596);
  if (block_cache_recycles) BOOST_TEST(again == first);
  cached_deallocate(again, 596);
}

BOOST_AUTO_TEST_CASE(blocks_come_back_last_in_first_out_up_to_the_depth) {
  const std::size_t count = block_cache_depth;
  std::vector<void*> blocks;
  for (std::size_t i = 0; i < count; ++i)
    blocks.push_back(cached_allocate(1000));
  const std::set<void*> given_back(blocks.begin(), blocks.end());
  for (void* block : blocks)
    cached_deallocate(block, 1000);
  std::vector<void*> again;
  for (std::size_t i = 0; i < count; ++i)
    again.push_back(cached_allocate(1000));
  if (block_cache_recycles) {
    BOOST_TEST(std::all_of(again.begin(), again.end(),
                           [&](void* block) { return given_back.contains(block); }));
    BOOST_TEST(again.front() == blocks.back());
  }
  for (void* block : again)
    cached_deallocate(block, 1000);
}

BOOST_AUTO_TEST_CASE(blocks_too_large_for_the_cache_are_usable_and_freed) {
  void* large = cached_allocate(block_cache_largest + 1);
  std::fill_n(static_cast<char*>(large), block_cache_largest + 1, 'x');
  cached_deallocate(large, block_cache_largest + 1);
  void* none = cached_allocate(0);
  BOOST_TEST(none != nullptr);
  cached_deallocate(none, 0);
  cached_deallocate(nullptr, 64);  // nothing to give back
}

BOOST_AUTO_TEST_CASE(a_block_freed_on_another_thread_joins_that_threads_cache) {
  void* block = cached_allocate(2400);
  void* reused = nullptr;
  std::thread other([&] {
    void* own = cached_allocate(48);  // the thread's cache is in use from here
    cached_deallocate(own, 48);
    cached_deallocate(block, 2400);
    reused = cached_allocate(2400);
    cached_deallocate(reused, 2400);
    // The thread ends with blocks in its cache: they are freed with it.
  });
  other.join();
  if (block_cache_recycles) BOOST_TEST(reused == block);
}

BOOST_AUTO_TEST_CASE(allocate_shared_constructs_and_destroys_through_the_cache) {
  int alive = 0;
  {
    auto first = std::allocate_shared<counted>(cached_allocator<counted>(), alive);
    auto second = std::allocate_shared<counted>(cached_allocator<counted>(), alive);
    BOOST_TEST(alive == 2);
    BOOST_TEST(first.get() != second.get());
  }
  BOOST_TEST(alive == 0);
  BOOST_TEST((cached_allocator<counted>() == cached_allocator<char>()));
}

BOOST_AUTO_TEST_SUITE_END()
