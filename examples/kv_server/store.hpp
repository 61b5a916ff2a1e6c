// store: urt-kv's keyspace, liburcu's RCU hash table (rculfhash) in the
// QSBR flavour, so that readers (GET, EXISTS, KEYS) take no lock and never
// wait for a writer.
//
// Sharding: the keyspace is split by hash into shard_count tables. KEYS,
// the slow command, scans one shard at a time and may reach a scheduling
// point between two shards; no reader holds a node across one (see below),
// so each shard is short enough to keep the interval between scheduling
// points small (100k keys: about 100 per shard).
//
// Readers and QSBR. Every call except the constructor and destructor must
// come from a thread registered with liburcu-qsbr and online (urt's
// workers are, between their scheduling points; the plain Asio server's
// threads register and go online around each batch of commands). A call
// holds node pointers only while it runs: the caller may report a
// quiescent state (end its task, yield, go offline) between any two calls.
// A node replaced (SET) or removed (DEL) is freed by call_rcu once every
// reader has passed a quiescent state, on the store's own call_rcu thread.
//
// Concurrency: any number of threads may call any member at once. Each
// key's operations are atomic (rculfhash add_replace / del); DBSIZE is a
// relaxed sum of per-shard counts, exact whenever no writer is running.
// KEYS sees each key that exists during the whole scan exactly once, and a
// key added or removed during the scan at most once (SCAN's guarantee,
// weaker than Redis's atomic KEYS).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

struct cds_lfht;
struct call_rcu_data;

namespace kv {

class store {
 public:
  static constexpr unsigned shard_bits = 10;
  static constexpr unsigned shard_count = 1u << shard_bits;

  /// Creates the tables and the call_rcu thread (with every signal blocked,
  /// so that neither it nor liburcu's resize thread takes the
  /// application's signals). Throws std::system_error when liburcu cannot.
  store();
  /// Frees every key. No reader or writer may be left, and pending call_rcu
  /// callbacks are waited for (urcu_qsbr_barrier). Call it from a thread
  /// that is not an online QSBR reader.
  ~store();
  store(const store&) = delete;
  store& operator=(const store&) = delete;

  /// Appends GET's reply to `out`: the value as a bulk string, or a null
  /// bulk string when the key is absent.
  void get(std::string_view key, std::string& out) const;
  /// Sets `key` to `value`, replacing an older value.
  void set(std::string_view key, std::string_view value);
  /// Removes `key`; true if it existed.
  bool del(std::string_view key);
  [[nodiscard]] bool exists(std::string_view key) const;
  /// Keys stored (a relaxed sum; see above).
  [[nodiscard]] std::uint64_t size() const noexcept;

  /// KEYS over one shard: appends each key of shard `shard` (0 ..
  /// shard_count - 1) that matches `pattern` to `out` as a bulk string and
  /// returns how many it appended.
  std::size_t match_shard(unsigned shard, std::string_view pattern, std::string& out) const;

 /// One key and its value (store.cpp).
  struct entry;

 private:
  void retire(entry* e);
  static std::uint64_t hash_of(std::string_view key) noexcept;
  static unsigned shard_of(std::uint64_t hash) noexcept {
    return static_cast<unsigned>(hash >> (64 - shard_bits));
  }

  std::unique_ptr<cds_lfht*[]> shards_;
  std::unique_ptr<std::atomic<std::int64_t>[]> counts_;
  call_rcu_data* reclaimer_ = nullptr;
};

}  // namespace kv
