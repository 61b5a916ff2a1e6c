#include "metrics.hpp"

#include <malloc.h>

#include <algorithm>
#include <bit>
#include <cstdio>

#include "protocol.hpp"

namespace kv {
namespace {

// The shard of the calling thread: threads take shards in the order they
// first record (relaxed: only distinctness matters, and sharing is allowed).
unsigned my_shard() noexcept {
  static std::atomic<unsigned> next{0};
  thread_local const unsigned mine =
      next.fetch_add(1, std::memory_order_relaxed) % latency_histogram::shard_count;
  return mine;
}

double seconds(std::uint64_t ns) { return static_cast<double>(ns) / 1e9; }
double micros(std::uint64_t ns) { return static_cast<double>(ns) / 1e3; }

void line(std::string& out, const char* fmt, auto... args) {
  char buf[1024];
  const int n = std::snprintf(buf, sizeof buf, fmt, args...);
  if (n > 0) out.append(buf, static_cast<std::size_t>(n) < sizeof buf ? static_cast<std::size_t>(n) : sizeof buf - 1);
}

std::uint64_t load(const std::atomic<std::uint64_t>& a) { return a.load(std::memory_order_relaxed); }

}  // namespace

std::string_view class_name(command_class c) noexcept {
  return c == command_class::control ? "control" : "bulk";
}

unsigned latency_histogram::bucket_of(std::uint64_t ns) noexcept {
  if (ns < 8) return static_cast<unsigned>(ns);
  const unsigned e = 63u - static_cast<unsigned>(std::countl_zero(ns));  // 3..63
  const auto m = static_cast<unsigned>((ns >> (e - 3)) & 7);
  return 8 + (e - 3) * 8 + m;
}

std::uint64_t latency_histogram::upper_bound(unsigned bucket) noexcept {
  if (bucket < 8) return bucket;
  const unsigned e = (bucket - 8) / 8 + 3;
  const std::uint64_t m = (bucket - 8) % 8;
  const std::uint64_t next = (8 + m + 1) << (e - 3);  // 0 past 2^64: wraps only for the last
  return next == 0 ? UINT64_MAX : next - 1;
}

void latency_histogram::record(std::uint64_t ns) noexcept {
  shard& s = shards_[my_shard()];
  s.counts[bucket_of(ns)].fetch_add(1, std::memory_order_relaxed);
  s.sum_ns.fetch_add(ns, std::memory_order_relaxed);
}

latency_histogram::snapshot latency_histogram::read() const noexcept {
  snapshot out;
  for (const shard& s : shards_) {
    for (unsigned b = 0; b < bucket_count; ++b) {
      const std::uint64_t c = s.counts[b].load(std::memory_order_relaxed);
      out.counts[b] += c;
      out.count += c;
    }
    out.sum_ns += s.sum_ns.load(std::memory_order_relaxed);
  }
  return out;
}

std::uint64_t latency_histogram::snapshot::quantile_ns(double q) const noexcept {
  if (count == 0) return 0;
  // The rank of the quantile, 1-based: the smallest r with r >= q * count.
  auto rank = static_cast<std::uint64_t>(q * static_cast<double>(count));
  if (static_cast<double>(rank) < q * static_cast<double>(count)) ++rank;
  if (rank == 0) rank = 1;
  std::uint64_t seen = 0;
  for (unsigned b = 0; b < bucket_count; ++b) {
    seen += counts[b];
    if (seen >= rank) return upper_bound(b);
  }
  return upper_bound(bucket_count - 1);
}

std::uint64_t latency_histogram::snapshot::count_below_pow2(unsigned e) const noexcept {
  // Buckets wholly below 2^e: those before bucket_of(2^e).
  const unsigned end = e >= 64 ? bucket_count : bucket_of(std::uint64_t{1} << e);
  std::uint64_t n = 0;
  for (unsigned b = 0; b < end; ++b) n += counts[b];
  return n;
}

std::string info_text(const metrics_view& v, std::span<const std::string_view> sections) {
  const auto named = [&](std::string_view name) {
    return std::any_of(sections.begin(), sections.end(),
                       [&](std::string_view s) { return equals_nocase(s, name); });
  };
  const bool all = sections.empty() || named("all") || named("everything") || named("default");
  const auto want = [&](std::string_view name) { return all || named(name); };
  const server_counters& c = *v.counters;
  std::string out;
  const auto gap = [&] {
    if (!out.empty()) out += "\r\n";
  };
  if (want("server")) {
    gap();
    out += "# Server\r\n";
    line(out, "server_name:urt-kv\r\nmode:%.*s\r\ntcp_port:%u\r\nthreads:%u\r\nuptime_in_seconds:%llu\r\n",
         static_cast<int>(v.mode.size()), v.mode.data(), v.port, v.threads,
         static_cast<unsigned long long>(v.uptime_s));
    if (v.mode == "urt") {
      line(out, "control_priority:%d\r\nbulk_priority:%d\r\n", v.priorities[0], v.priorities[1]);
    }
  }
  if (want("clients")) {
    gap();
    out += "# Clients\r\n";
    // blocked_clients: no command blocks (redis-cli --stat reads it).
    line(out, "connected_clients:%lld\r\nmaxclients:%zu\r\nblocked_clients:0\r\n",
         static_cast<long long>(c.connected.load(std::memory_order_relaxed)), v.max_clients);
  }
  if (want("memory")) {
    // What glibc's allocator has handed out (redis-cli --stat reads
    // used_memory); 0 under ASan and TSan, whose allocators it cannot see.
    gap();
    out += "# Memory\r\n";
    const struct mallinfo2 m = ::mallinfo2();
    const auto used = static_cast<unsigned long long>(m.uordblks + m.hblkhd);
    line(out, "used_memory:%llu\r\nused_memory_human:%.2fM\r\n", used,
         static_cast<double>(used) / (1024.0 * 1024.0));
  }
  latency_histogram::snapshot snaps[class_count];
  for (unsigned k = 0; k < class_count; ++k) snaps[k] = c.latency[k].read();
  if (want("stats")) {
    gap();
    out += "# Stats\r\n";
    line(out,
         "total_connections_received:%llu\r\nrejected_connections:%llu\r\n"
         "total_commands_processed:%llu\r\ncontrol_commands:%llu\r\nbulk_commands:%llu\r\n"
         "protocol_errors:%llu\r\ncommand_errors:%llu\r\noversized_requests:%llu\r\n"
         "idle_timeouts:%llu\r\n",
         static_cast<unsigned long long>(load(c.connections)),
         static_cast<unsigned long long>(load(c.rejected)),
         static_cast<unsigned long long>(snaps[0].count + snaps[1].count),
         static_cast<unsigned long long>(snaps[0].count), static_cast<unsigned long long>(snaps[1].count),
         static_cast<unsigned long long>(load(c.protocol_errors)),
         static_cast<unsigned long long>(load(c.command_errors)),
         static_cast<unsigned long long>(load(c.oversized)),
         static_cast<unsigned long long>(load(c.idle_timeouts)));
  }
  if (want("latency")) {
    gap();
    // Microseconds from a request's arrival to its reply, as the upper
    // bounds of 12.5% buckets (a comment line here would read as a section
    // header to INFO parsers).
    out += "# Latency\r\n";
    for (unsigned k = 0; k < class_count; ++k) {
      const std::string_view name = class_name(static_cast<command_class>(k));
      const auto& s = snaps[k];
      line(out, "%.*s_latency_us:p50=%.3f,p99=%.3f,p99.9=%.3f,max=%.3f,count=%llu\r\n",
           static_cast<int>(name.size()), name.data(), micros(s.quantile_ns(0.5)),
           micros(s.quantile_ns(0.99)), micros(s.quantile_ns(0.999)), micros(s.quantile_ns(1.0)),
           static_cast<unsigned long long>(s.count));
    }
  }
  if (want("keyspace")) {
    gap();
    out += "# Keyspace\r\n";
    if (v.keys != 0) line(out, "db0:keys=%llu,expires=0,avg_ttl=0\r\n", static_cast<unsigned long long>(v.keys));
  }
  if (!v.workers.empty() && want("workers")) {
    gap();
    out += "# Workers\r\n";
    for (const urt::worker_stats& w : v.workers) {
      line(
          out,
          "worker_%u:pu=%u,accepted=%llu,completed=%llu,exceptions=%llu,parks=%llu,"
          "doorbells=%llu,pushes=%llu,pulls=%llu,io_polls=%llu,io_ring_skips=%llu,io_handlers=%llu,"
          "io_rescued=%llu,fifo_us=%llu,normal_us=%llu,idle_us=%llu,io_ring_error=%d\r\n",
          w.worker, w.pu, static_cast<unsigned long long>(w.accepted),
          static_cast<unsigned long long>(w.completed),
          static_cast<unsigned long long>(w.exceptions), static_cast<unsigned long long>(w.parks),
          static_cast<unsigned long long>(w.doorbells), static_cast<unsigned long long>(w.pushes),
          static_cast<unsigned long long>(w.pulls), static_cast<unsigned long long>(w.io_polls),
          static_cast<unsigned long long>(w.io_ring_skips),
          static_cast<unsigned long long>(w.io_handlers),
          static_cast<unsigned long long>(w.io_rescued),
          static_cast<unsigned long long>(w.fifo_ns / 1000),
          static_cast<unsigned long long>(w.normal_ns / 1000),
          static_cast<unsigned long long>(w.idle_ns / 1000), w.io_ring_error);
    }
  }
  return out;
}

std::string prometheus_text(const metrics_view& v) {
  const server_counters& c = *v.counters;
  std::string out;
  const auto metric = [&](const char* name, const char* type, const char* help) {
    line(out, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
  };
  const auto value = [&](const char* name, std::uint64_t x) {
    line(out, "%s %llu\n", name, static_cast<unsigned long long>(x));
  };
  metric("urt_kv_uptime_seconds", "gauge", "Seconds since the server started.");
  value("urt_kv_uptime_seconds", v.uptime_s);
  metric("urt_kv_threads", "gauge", "Worker threads (urt workers or Asio pool threads).");
  value("urt_kv_threads", v.threads);
  metric("urt_kv_keys", "gauge", "Keys stored.");
  value("urt_kv_keys", v.keys);
  metric("urt_kv_connected_clients", "gauge", "Open client connections.");
  const std::int64_t connected = c.connected.load(std::memory_order_relaxed);
  value("urt_kv_connected_clients", connected < 0 ? 0 : static_cast<std::uint64_t>(connected));
  metric("urt_kv_max_clients", "gauge", "The connection limit (--max-clients).");
  value("urt_kv_max_clients", v.max_clients);
  metric("urt_kv_connections_received_total", "counter", "Connections accepted.");
  value("urt_kv_connections_received_total", load(c.connections));
  metric("urt_kv_connections_rejected_total", "counter", "Connections refused at the limit.");
  value("urt_kv_connections_rejected_total", load(c.rejected));
  metric("urt_kv_idle_timeouts_total", "counter", "Connections closed by the idle timeout.");
  value("urt_kv_idle_timeouts_total", load(c.idle_timeouts));
  metric("urt_kv_protocol_errors_total", "counter", "Malformed requests.");
  value("urt_kv_protocol_errors_total", load(c.protocol_errors));
  metric("urt_kv_command_errors_total", "counter", "Error replies to well-formed requests.");
  value("urt_kv_command_errors_total", load(c.command_errors));
  metric("urt_kv_oversized_requests_total", "counter", "Requests over the size limit.");
  value("urt_kv_oversized_requests_total", load(c.oversized));

  latency_histogram::snapshot snaps[class_count];
  for (unsigned k = 0; k < class_count; ++k) snaps[k] = c.latency[k].read();
  metric("urt_kv_commands_total", "counter", "Commands processed, by class.");
  for (unsigned k = 0; k < class_count; ++k) {
    const std::string_view name = class_name(static_cast<command_class>(k));
    line(out, "urt_kv_commands_total{class=\"%.*s\"} %llu\n", static_cast<int>(name.size()),
         name.data(), static_cast<unsigned long long>(snaps[k].count));
  }
  metric("urt_kv_command_duration_seconds", "histogram",
         "Time from a request's arrival to its reply, by class.");
  for (unsigned k = 0; k < class_count; ++k) {
    const std::string_view name = class_name(static_cast<command_class>(k));
    const int n = static_cast<int>(name.size());
    // Bucket edges at powers of two of nanoseconds, 1.024 us to 17.2 s:
    // exact edges of the histogram's own buckets.
    for (unsigned e = 10; e <= 34; ++e) {
      line(out, "urt_kv_command_duration_seconds_bucket{class=\"%.*s\",le=\"%.9g\"} %llu\n", n,
           name.data(), seconds(std::uint64_t{1} << e),
           static_cast<unsigned long long>(snaps[k].count_below_pow2(e)));
    }
    line(out, "urt_kv_command_duration_seconds_bucket{class=\"%.*s\",le=\"+Inf\"} %llu\n", n,
         name.data(), static_cast<unsigned long long>(snaps[k].count));
    line(out, "urt_kv_command_duration_seconds_sum{class=\"%.*s\"} %.9f\n", n, name.data(),
         seconds(snaps[k].sum_ns));
    line(out, "urt_kv_command_duration_seconds_count{class=\"%.*s\"} %llu\n", n, name.data(),
         static_cast<unsigned long long>(snaps[k].count));
  }

  if (!v.workers.empty()) {
    struct field {
      const char* name;
      const char* help;
      std::uint64_t urt::worker_stats::*member;
    };
    static constexpr field fields[] = {
        {"urt_worker_tasks_accepted_total", "Tasks placed on the worker.",
         &urt::worker_stats::accepted},
        {"urt_worker_tasks_completed_total", "Tasks the worker ran to the end.",
         &urt::worker_stats::completed},
        {"urt_worker_task_exceptions_total", "Tasks that threw.", &urt::worker_stats::exceptions},
        {"urt_worker_parks_total", "Times the worker slept on its doorbell.",
         &urt::worker_stats::parks},
        {"urt_worker_doorbells_total", "Doorbell rings that woke the worker.",
         &urt::worker_stats::doorbells},
        {"urt_worker_pushes_total", "Tasks the worker pushed to lower workers.",
         &urt::worker_stats::pushes},
        {"urt_worker_pulls_total", "Tasks the worker pulled from overloaded workers.",
         &urt::worker_stats::pulls},
        {"urt_worker_io_polls_total", "Reactor polls at scheduling points.",
         &urt::worker_stats::io_polls},
        {"urt_worker_io_ring_skips_total", "Reactor polls skipped: the ready ring showed no event.",
         &urt::worker_stats::io_ring_skips},
        {"urt_worker_io_handlers_total", "I/O completions the worker took in.",
         &urt::worker_stats::io_handlers},
        {"urt_worker_io_rescued_total",
         "I/O completions the worker took from a stuck worker's reactor.",
         &urt::worker_stats::io_rescued},
    };
    for (const field& f : fields) {
      metric(f.name, "counter", f.help);
      for (const urt::worker_stats& w : v.workers) {
        line(out, "%s{worker=\"%u\"} %llu\n", f.name, w.worker,
             static_cast<unsigned long long>(w.*f.member));
      }
    }
    metric("urt_worker_io_ring_error", "gauge",
           "Why the worker's io_uring ready ring is off: an errno value (-1 without one); 0 while "
           "it is in use or turned off.");
    for (const urt::worker_stats& w : v.workers) {
      line(out, "urt_worker_io_ring_error{worker=\"%u\"} %d\n", w.worker, w.io_ring_error);
    }
    // Where each worker's time went, by what it ran (worker_stats' *_ns).
    struct state {
      const char* name;
      std::uint64_t urt::worker_stats::*ns;
    };
    static constexpr state times[] = {
        {"fifo", &urt::worker_stats::fifo_ns},
        {"normal", &urt::worker_stats::normal_ns},
        {"idle", &urt::worker_stats::idle_ns},
    };
    metric("urt_worker_time_seconds_total", "counter",
           "Seconds the worker spent running FIFO tasks, normal tasks, or nothing (idle), as of "
           "its last scheduling point: a parked worker's idle time is added when it wakes.");
    for (const urt::worker_stats& w : v.workers) {
      for (const state& t : times) {
        line(out, "urt_worker_time_seconds_total{worker=\"%u\",state=\"%s\"} %.9f\n", w.worker,
             t.name, seconds(w.*t.ns));
      }
    }
  }
  return out;
}

}  // namespace kv
