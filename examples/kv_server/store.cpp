#include "store.hpp"

#include <pthread.h>
#include <signal.h>
#include <urcu/urcu-qsbr.h>
// urcu-qsbr.h first: rculfhash.h needs a flavour's declarations.
#include <urcu/rculfhash.h>

#include <cerrno>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <new>
#include <system_error>

#include "glob.hpp"
#include "protocol.hpp"

#if defined(__SANITIZE_THREAD__)
#define KV_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define KV_TSAN 1
#endif
#endif
#if defined(KV_TSAN)
#include <sanitizer/tsan_interface.h>
#define KV_TSAN_RELEASE(p) __tsan_release(const_cast<void*>(static_cast<const void*>(p)))
#define KV_TSAN_ACQUIRE(p) __tsan_acquire(const_cast<void*>(static_cast<const void*>(p)))
#else
#define KV_TSAN_RELEASE(p) static_cast<void>(p)
#define KV_TSAN_ACQUIRE(p) static_cast<void>(p)
#endif

namespace kv {
namespace {

// TSAN cannot see liburcu's atomics or its grace periods. A writer
// releases a node before rculfhash publishes it and a reader acquires it
// after finding it (the publication); every reader releases `tsan_grace`
// when it is done with its nodes, and the callback that frees a node
// acquires it (the grace period that separates the two).
char tsan_grace = 0;

}  // namespace

// One key and its value, in one allocation: the rculfhash node, the
// call_rcu head, the two lengths, then the key's bytes and the value's.
struct store::entry {
  cds_lfht_node node;
  rcu_head head;
  std::uint32_t key_size;
  std::uint32_t value_size;
  // The key's bytes and then the value's follow the struct.

  [[nodiscard]] const char* bytes() const noexcept { return reinterpret_cast<const char*>(this + 1); }
  [[nodiscard]] std::string_view key() const noexcept { return {bytes(), key_size}; }
  [[nodiscard]] std::string_view value() const noexcept { return {bytes() + key_size, value_size}; }

  static entry* make(std::string_view key, std::string_view value) {
    void* memory = std::malloc(sizeof(entry) + key.size() + value.size());
    if (memory == nullptr) throw std::bad_alloc();
    auto* e = static_cast<entry*>(memory);
    cds_lfht_node_init(&e->node);
    e->key_size = static_cast<std::uint32_t>(key.size());
    e->value_size = static_cast<std::uint32_t>(value.size());
    char* bytes = reinterpret_cast<char*>(e + 1);
    std::memcpy(bytes, key.data(), key.size());
    std::memcpy(bytes + key.size(), value.data(), value.size());
    return e;
  }
  // node is the first member: an entry and its node share an address.
  static entry* of(cds_lfht_node* n) noexcept { return reinterpret_cast<entry*>(n); }
  static entry* of(rcu_head* h) noexcept {
    return reinterpret_cast<entry*>(reinterpret_cast<char*>(h) - offsetof(entry, head));
  }
};

namespace {

int match_key(cds_lfht_node* node, const void* key) {
  const store::entry* e = store::entry::of(node);
  return e->key() == *static_cast<const std::string_view*>(key);
}

void free_entry(rcu_head* head) {
  KV_TSAN_ACQUIRE(&tsan_grace);
  store::entry* e = store::entry::of(head);
  KV_TSAN_ACQUIRE(e);
  std::free(e);
}

}  // namespace

store::store()
    : shards_(new cds_lfht*[shard_count]()), counts_(new std::atomic<std::int64_t>[shard_count]) {
  for (unsigned i = 0; i < shard_count; ++i) counts_[i].store(0, std::memory_order_relaxed);
  // Threads liburcu starts now (the call_rcu thread, rculfhash's resize
  // worker) inherit this thread's signal mask: block every signal meanwhile.
  sigset_t all;
  sigset_t old;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, &old);
  reclaimer_ = urcu_qsbr_create_call_rcu_data(0, -1);
  bool made = reclaimer_ != nullptr;
  for (unsigned i = 0; made && i < shard_count; ++i) {
    shards_[i] = cds_lfht_new_flavor(16, 16, 0, CDS_LFHT_AUTO_RESIZE | CDS_LFHT_ACCOUNTING,
                                     &urcu_qsbr_flavor, nullptr);
    made = shards_[i] != nullptr;
  }
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  if (!made) {
    this->~store();  // frees what was made (no key yet)
    throw std::system_error(ENOMEM, std::generic_category(), "kv::store: liburcu cannot make its tables");
  }
}

store::~store() {
  if (reclaimer_ != nullptr) {
    urcu_qsbr_barrier();  // every replaced or removed entry is freed
    const pthread_t thread = urcu_qsbr_get_call_rcu_thread(reclaimer_);
    urcu_qsbr_call_rcu_data_free(reclaimer_);
    pthread_join(thread, nullptr);  // call_rcu_data_free leaves it joinable
    reclaimer_ = nullptr;
  }
  if (!shards_) return;
  KV_TSAN_ACQUIRE(&tsan_grace);  // the readers are gone
  for (unsigned i = 0; i < shard_count; ++i) {
    cds_lfht* ht = shards_[i];
    if (ht == nullptr) continue;
    cds_lfht_iter it;
    cds_lfht_first(ht, &it);
    for (cds_lfht_node* n = cds_lfht_iter_get_node(&it); n != nullptr;) {
      cds_lfht_next(ht, &it);
      cds_lfht_del(ht, n);
      entry* e = entry::of(n);
      KV_TSAN_ACQUIRE(e);
      std::free(e);  // no reader is left: no grace period to wait for
      n = cds_lfht_iter_get_node(&it);
    }
    cds_lfht_destroy(ht, nullptr);
    shards_[i] = nullptr;
  }
}

std::uint64_t store::hash_of(std::string_view key) noexcept {
  return std::hash<std::string_view>{}(key);
}

void store::retire(entry* e) {
  // Route the callback to the store's call_rcu thread, not to one the
  // calling thread would create lazily with its own policy and signals.
  call_rcu_data* previous = urcu_qsbr_get_thread_call_rcu_data();
  urcu_qsbr_set_thread_call_rcu_data(reclaimer_);
  urcu_qsbr_call_rcu(&e->head, free_entry);
  urcu_qsbr_set_thread_call_rcu_data(previous);
}

void store::get(std::string_view key, std::string& out) const {
  const std::uint64_t h = hash_of(key);
  cds_lfht_iter it;
  cds_lfht_lookup(shards_[shard_of(h)], h, match_key, &key, &it);
  if (cds_lfht_node* n = cds_lfht_iter_get_node(&it); n != nullptr) {
    const entry* e = entry::of(n);
    KV_TSAN_ACQUIRE(e);
    reply_bulk(out, e->value());
  } else {
    reply_null(out);
  }
  KV_TSAN_RELEASE(&tsan_grace);
}

void store::set(std::string_view key, std::string_view value) {
  const std::uint64_t h = hash_of(key);
  const unsigned s = shard_of(h);
  entry* e = entry::make(key, value);
  KV_TSAN_RELEASE(e);
  cds_lfht_node* old = cds_lfht_add_replace(shards_[s], h, match_key, &key, &e->node);
  if (old != nullptr) {
    retire(entry::of(old));
  } else {
    counts_[s].fetch_add(1, std::memory_order_relaxed);
  }
}

bool store::del(std::string_view key) {
  const std::uint64_t h = hash_of(key);
  const unsigned s = shard_of(h);
  cds_lfht_iter it;
  cds_lfht_lookup(shards_[s], h, match_key, &key, &it);
  cds_lfht_node* n = cds_lfht_iter_get_node(&it);
  KV_TSAN_RELEASE(&tsan_grace);
  // Of concurrent DELs (or a DEL and a SET replacing the node), one wins.
  if (n == nullptr || cds_lfht_del(shards_[s], n) != 0) return false;
  counts_[s].fetch_sub(1, std::memory_order_relaxed);
  retire(entry::of(n));
  return true;
}

bool store::exists(std::string_view key) const {
  const std::uint64_t h = hash_of(key);
  cds_lfht_iter it;
  cds_lfht_lookup(shards_[shard_of(h)], h, match_key, &key, &it);
  KV_TSAN_RELEASE(&tsan_grace);
  return cds_lfht_iter_get_node(&it) != nullptr;
}

std::uint64_t store::size() const noexcept {
  std::int64_t total = 0;
  for (unsigned i = 0; i < shard_count; ++i) total += counts_[i].load(std::memory_order_relaxed);
  return total < 0 ? 0 : static_cast<std::uint64_t>(total);  // a DEL counted before its SET
}

std::size_t store::match_shard(unsigned shard, std::string_view pattern, std::string& out) const {
  cds_lfht* ht = shards_[shard];
  std::size_t matched = 0;
  cds_lfht_iter it;
  // cds_lfht_first/next, not the for_each macros (UBSan trips on them).
  for (cds_lfht_first(ht, &it); cds_lfht_node* n = cds_lfht_iter_get_node(&it); cds_lfht_next(ht, &it)) {
    const entry* e = entry::of(n);
    KV_TSAN_ACQUIRE(e);
    if (glob_match(pattern, e->key())) {
      reply_bulk(out, e->key());
      ++matched;
    }
  }
  KV_TSAN_RELEASE(&tsan_grace);
  return matched;
}

}  // namespace kv
