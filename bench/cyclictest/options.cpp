#include "options.hpp"

#include <getopt.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <limits>
#include <set>
#include <stdexcept>
#include <system_error>

#include "urt/worker_set.hpp"

namespace urt_cyclictest {

namespace {

// Long-only options: values outside the char range.
enum long_only : int {
  opt_histfile = 256,
  opt_json,
  opt_topology,
  opt_timer_spin,
  opt_timer_wake,
  opt_idle_spin,
  opt_idle_spin_policy,
  opt_policy,
  opt_fifo_priority,
  opt_load,
  opt_cpupri,
  opt_migration,
  opt_ipi_timeout,
  opt_overrun,
  opt_throttle,
  opt_bandwidth,
  opt_cid,
  opt_help,
  opt_fifo,
  opt_laptop,
  opt_latency,
  opt_urt_summary,
  // cyclictest's long-only flags
  opt_default_system,
  opt_mainaffinity,
  opt_priospread,
  opt_secaligned,
  opt_smi,
  opt_spike,
  opt_spike_nodes,
  opt_tracemark,
  opt_dbg_cyclictest,
};

const option long_options[] = {
    {"affinity", optional_argument, nullptr, 'a'},
    {"distance", required_argument, nullptr, 'd'},
    {"duration", required_argument, nullptr, 'D'},
    {"histogram", required_argument, nullptr, 'h'},
    {"histfile", required_argument, nullptr, opt_histfile},
    {"interval", required_argument, nullptr, 'i'},
    {"json", required_argument, nullptr, opt_json},
    {"laptop", no_argument, nullptr, opt_laptop},
    {"latency", required_argument, nullptr, opt_latency},
    {"loops", required_argument, nullptr, 'l'},
    {"mlockall", no_argument, nullptr, 'm'},
    {"priority", required_argument, nullptr, 'p'},
    {"quiet", no_argument, nullptr, 'q'},
    {"threads", optional_argument, nullptr, 't'},
    {"topology", required_argument, nullptr, opt_topology},
    {"timer-spin", required_argument, nullptr, opt_timer_spin},
    {"timer-wake", required_argument, nullptr, opt_timer_wake},
    {"idle-spin", required_argument, nullptr, opt_idle_spin},
    {"idle-spin-policy", required_argument, nullptr, opt_idle_spin_policy},
    {"policy", required_argument, nullptr, opt_policy},
    {"cpupri", required_argument, nullptr, opt_cpupri},
    {"migration", required_argument, nullptr, opt_migration},
    {"ipi-timeout", required_argument, nullptr, opt_ipi_timeout},
    {"overrun", required_argument, nullptr, opt_overrun},
    {"throttle", required_argument, nullptr, opt_throttle},
    {"bandwidth", required_argument, nullptr, opt_bandwidth},
    {"cid", required_argument, nullptr, opt_cid},
    // urt's own flags that could be read as a cyclictest flag carry urt- (a
    // --fifo-priority would be cyclictest's --fifo=PATH to a reader).
    {"urt-fifo-priority", required_argument, nullptr, opt_fifo_priority},
    {"urt-summary", no_argument, nullptr, opt_urt_summary},
    // cyclictest's, rejected with the reason.
    {"fifo", required_argument, nullptr, opt_fifo},
    {"load", required_argument, nullptr, opt_load},
    {"help", no_argument, nullptr, opt_help},
    // The rest of cyclictest 2.40's flags, with its argument kinds, so that
    // each is named in its message (taken or rejected with the reason).
    {"aligned", optional_argument, nullptr, 'A'},
    {"breaktrace", required_argument, nullptr, 'b'},
    {"clock", required_argument, nullptr, 'c'},
    {"default-system", no_argument, nullptr, opt_default_system},
    {"histofall", required_argument, nullptr, 'H'},
    {"mainaffinity", required_argument, nullptr, opt_mainaffinity},
    {"refresh_on_max", no_argument, nullptr, 'M'},
    {"nsecs", no_argument, nullptr, 'N'},
    {"oscope", required_argument, nullptr, 'o'},
    {"priospread", no_argument, nullptr, opt_priospread},
    {"relative", no_argument, nullptr, 'r'},
    {"resolution", no_argument, nullptr, 'R'},
    {"secaligned", optional_argument, nullptr, opt_secaligned},
    {"system", no_argument, nullptr, 's'},
    {"smi", no_argument, nullptr, opt_smi},
    {"smp", no_argument, nullptr, 'S'},
    {"spike", required_argument, nullptr, opt_spike},
    {"spike-nodes", required_argument, nullptr, opt_spike_nodes},
    {"tracemark", no_argument, nullptr, opt_tracemark},
    {"unbuffered", no_argument, nullptr, 'u'},
    {"verbose", no_argument, nullptr, 'v'},
    {"dbg_cyclictest", no_argument, nullptr, opt_dbg_cyclictest},
    {"posix_timers", no_argument, nullptr, 'x'},
    {nullptr, 0, nullptr, 0},
};

// Leading ':' : a missing argument returns ':' instead of '?'; opterr = 0
// keeps getopt itself quiet, every message is ours.
// cyclictest 2.40's: "a::A::b:c:d:D:F:h:H:i:l:MNo:p:mqrRsSt::uvD:x".
constexpr const char* short_options = ":a::A::b:c:d:D:F:h:H:i:l:MNo:p:mqrRsSt::uvx";

std::string flag_name(int c) {
  switch (c) {
    case 'a':
      return "-a/--affinity";
    case 'd':
      return "-d/--distance";
    case 'D':
      return "-D/--duration";
    case 'h':
      return "-h/--histogram";
    case 'i':
      return "-i/--interval";
    case 'l':
      return "-l/--loops";
    case 'm':
      return "-m/--mlockall";
    case 'p':
      return "-p/--priority";
    case 'q':
      return "-q/--quiet";
    case 't':
      return "-t/--threads";
    case opt_histfile:
      return "--histfile";
    case opt_json:
      return "--json";
    case opt_laptop:
      return "--laptop";
    case opt_latency:
      return "--latency";
    case opt_topology:
      return "--topology";
    case opt_timer_spin:
      return "--timer-spin";
    case opt_timer_wake:
      return "--timer-wake";
    case opt_idle_spin:
      return "--idle-spin";
    case opt_idle_spin_policy:
      return "--idle-spin-policy";
    case opt_policy:
      return "--policy";
    case opt_fifo_priority:
      return "--urt-fifo-priority";
    case opt_urt_summary:
      return "--urt-summary";
    case 'F':
    case opt_fifo:
      return "-F/--fifo";
    case opt_load:
      return "--load";
    case opt_cpupri:
      return "--cpupri";
    case opt_migration:
      return "--migration";
    case opt_ipi_timeout:
      return "--ipi-timeout";
    case opt_overrun:
      return "--overrun";
    case opt_throttle:
      return "--throttle";
    case opt_bandwidth:
      return "--bandwidth";
    case opt_cid:
      return "--cid";
    case opt_help:
      return "--help";
    case 'A':
      return "-A/--aligned";
    case 'b':
      return "-b/--breaktrace";
    case 'c':
      return "-c/--clock";
    case opt_default_system:
      return "--default-system";
    case 'H':
      return "-H/--histofall";
    case opt_mainaffinity:
      return "--mainaffinity";
    case 'M':
      return "-M/--refresh_on_max";
    case 'N':
      return "-N/--nsecs";
    case 'o':
      return "-o/--oscope";
    case opt_priospread:
      return "--priospread";
    case 'r':
      return "-r/--relative";
    case 'R':
      return "-R/--resolution";
    case opt_secaligned:
      return "--secaligned";
    case 's':
      return "-s/--system";
    case opt_smi:
      return "--smi";
    case 'S':
      return "-S/--smp";
    case opt_spike:
      return "--spike";
    case opt_spike_nodes:
      return "--spike-nodes";
    case opt_tracemark:
      return "--tracemark";
    case 'u':
      return "-u/--unbuffered";
    case 'v':
      return "-v/--verbose";
    case opt_dbg_cyclictest:
      return "--dbg_cyclictest";
    case 'x':
      return "-x/--posix_timers";
    default:
      return "?";
  }
}

std::string bad(int c, std::string_view value, std::string_view why) {
  return flag_name(c) + ": '" + std::string(value) + "' " + std::string(why);
}

// Why a flag of cyclictest's has no meaning for urt-cyclictest; empty for
// the flags it takes.
std::string_view unsupported_reason(int c) {
  switch (c) {
    case 'c':
      return "urt's releases are on CLOCK_MONOTONIC only (-c 0)";
    case 'r':
      return "urt releases its periodic tasks at absolute times (an absolute timerfd on "
             "CLOCK_MONOTONIC); there is no relative timer";
    case 'R':
      return "checking the clock_gettime() resolution is not implemented";
    case 's':
      return "sys_nanosleep and sys_setitimer are the kernel tool's timers; urt's workers wait "
             "on the runtime's timerfd";
    case opt_smi:
      return "SMI counting reads an Intel MSR from the kernel tool's threads; urt-cyclictest "
             "does not count SMIs";
    case opt_tracemark:
      return "writing a trace mark when -b is exceeded is ftrace tracing of the kernel tool";
    case opt_dbg_cyclictest:
      return "it prints the kernel tool's own debugging information; urt-cyclictest has none";
    case 'x':
      return "POSIX timers are the kernel tool's timers; urt's workers wait on the runtime's "
             "timerfd";
    default:
      return {};
  }
}

// The message for a rejected cyclictest flag: the flag, its value when it
// has one, and why it has no meaning for urt.
std::string unsupported(int c, const char* value) {
  const std::string why = "is not supported: " + std::string(unsupported_reason(c));
  if (value != nullptr) return bad(c, value, why);
  return flag_name(c) + " " + why;
}

// Sets `out` to the value `arg` spells in `table` and returns true, else
// sets `err` to a message naming the flag, the value and every spelling
// ("is not a, b or c") and returns false.
template <class E, std::size_t N>
bool choose(int c, std::string_view arg, const spelling<E> (&table)[N], E& out, std::string& err) {
  for (const spelling<E>& s : table) {
    if (s.name == arg) {
      out = s.value;
      return true;
    }
  }
  std::string why = "is not ";
  for (std::size_t i = 0; i < N; ++i) {
    if (i != 0) why += i + 1 == N ? " or " : ", ";
    why += table[i].name;
  }
  err = bad(c, arg, why);
  return false;
}

bool all_digits(std::string_view s) {
  return !s.empty() &&
         std::all_of(s.begin(), s.end(), [](char ch) { return ch >= '0' && ch <= '9'; });
}

// A whole non-negative decimal number in [lo, hi]; on failure sets `error`.
template <class T>
bool number(int c, std::string_view text, T lo, T hi, T& out, std::string& error) {
  if (!all_digits(text)) {
    error = bad(c, text, "is not a non-negative whole number");
    return false;
  }
  std::uint64_t v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc{} || end != text.data() + text.size() || v > static_cast<std::uint64_t>(hi) ||
      v < static_cast<std::uint64_t>(lo)) {
    error = bad(c, text, "is out of range " + std::to_string(lo) + ".." + std::to_string(hi));
    return false;
  }
  out = static_cast<T>(v);
  return true;
}

constexpr std::uint64_t max_us = max_interval_us;

// --bandwidth RUNTIME/PERIOD: whole microseconds, as -i and --ipi-timeout
// (cyclictest's unit). 0 <= RUNTIME <= PERIOD, 0 < PERIOD <= the runtime's
// max_period. On failure sets `error` to a message naming the flag, the
// value and what is wrong with it.
bool budget(int c, std::string_view text, urt::bandwidth_options& out, std::string& error) {
  const std::size_t slash = text.find('/');
  const std::string_view runtime = text.substr(0, slash);
  const std::string_view period =
      slash == std::string_view::npos ? std::string_view() : text.substr(slash + 1);
  if (runtime.starts_with('-')) {
    error = bad(c, text, "has a negative runtime");
    return false;
  }
  if (period.starts_with('-')) {
    error = bad(c, text, "has a negative period");
    return false;
  }
  if (slash == std::string_view::npos || !all_digits(runtime) || !all_digits(period)) {
    error = bad(c, text, "is not RUNTIME/PERIOD in whole microseconds (e.g. 9500/10000)");
    return false;
  }
  // Digits only: from_chars fails only by overflow, which is out of range anyway.
  const auto whole = [](std::string_view s) {
    constexpr std::uint64_t too_big = std::numeric_limits<std::uint64_t>::max();
    std::uint64_t v = 0;
    const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    return ec == std::errc{} && end == s.data() + s.size() ? v : too_big;
  };
  const std::uint64_t r = whole(runtime);
  const std::uint64_t p = whole(period);
  if (p == 0) {
    error = bad(c, text, "has a zero period");
    return false;
  }
  if (p > max_bandwidth_period_us) {
    error = bad(c, text,
                "has a period above the maximum of " + std::to_string(max_bandwidth_period_us) +
                    " us");
    return false;
  }
  if (r > p) {
    error = bad(c, text, "has a runtime above its period");
    return false;
  }
  out.runtime = std::chrono::microseconds{r};
  out.period = std::chrono::microseconds{p};
  return true;
}

constexpr std::string_view duration_units = "sSmMhHdD";

// The characters of a duration after its number and unit: cyclictest's
// parse_time_string() reads the number and one unit letter and ignores the
// rest ("1m5" is 60 s); empty when there are none or `text` is no duration.
std::string_view duration_rest(std::string_view text) {
  std::size_t digits = 0;
  while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9') ++digits;
  if (digits == 0 || digits == text.size() ||
      duration_units.find(text[digits]) == std::string_view::npos) {
    return {};
  }
  return text.substr(digits + 1);
}

// Whether `text` is spelled as a duration (digits, then at most one of the
// units and whatever follows it), whatever its value: parse_duration()
// rejects such a text only for its size.
bool duration_syntax(std::string_view text) {
  std::size_t digits = 0;
  while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9') ++digits;
  if (digits == 0) return false;
  return text.size() == digits || duration_units.find(text[digits]) != std::string_view::npos;
}

// For an element "--NAME[=VALUE]" whose NAME is no long option but the
// start of several (getopt_long's ambiguous abbreviation, "--histo" for
// --histofall and --histogram), those names ("--histofall or --histogram");
// else empty.
std::string abbreviated(std::string_view element) {
  if (!element.starts_with("--")) return {};
  const std::string_view given = element.substr(2, element.find('=') - 2);
  if (given.empty()) return {};
  std::vector<std::string_view> names;
  for (const option& opt : long_options) {
    if (opt.name == nullptr) break;
    const std::string_view name(opt.name);
    if (name == given) return {};
    if (name.starts_with(given)) names.push_back(name);
  }
  std::sort(names.begin(), names.end());
  std::string out;
  for (std::size_t i = 0; i < names.size(); ++i) {
    if (i != 0) out += i + 1 == names.size() ? " or " : ", ";
    out += "--" + std::string(names[i]);
  }
  return out;
}

}  // namespace

std::optional<std::uint64_t> parse_duration(std::string_view text) {
  std::size_t digits = 0;
  while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9') ++digits;
  if (!duration_syntax(text)) return std::nullopt;
  std::uint64_t v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + digits, v);
  if (ec != std::errc{} || end != text.data() + digits) return std::nullopt;
  std::uint64_t scale = 1;
  if (text.size() > digits) {
    switch (text[digits]) {
      case 's':
      case 'S':
        scale = 1;
        break;
      case 'm':
      case 'M':
        scale = 60;
        break;
      case 'h':
      case 'H':
        scale = 60 * 60;
        break;
      case 'd':
      case 'D':
        scale = 24 * 60 * 60;
        break;
      default:
        return std::nullopt;
    }
  }
  if (v > max_duration_s / scale) return std::nullopt;
  return v * scale;
}

parse_result parse_options(int argc, char** argv) {
  parse_result r;
  options& o = r.opts;
  std::string& err = r.error;
  for (int i = 0; i < argc; ++i) {
    if (i > 0) o.cmdline += ' ';
    o.cmdline += argv[i];
  }
  // Arguments taken as the value of -t / -a written apart ("-t 2"), as
  // cyclictest reads them: by identity, since getopt_long permutes argv.
  std::set<const char*> taken;
  const auto detached_value = [&](auto accept) -> const char* {
    if (optind < argc && accept(std::string_view(argv[optind]))) {
      taken.insert(argv[optind]);
      return argv[optind];
    }
    return nullptr;
  };

  // -p and --policy in the order given: cyclictest switches --policy=other
  // to FIFO when a priority is given, with a warning if -p came first.
  bool priority_seen = false;
  bool warn_policy = false;
  bool priority_last = false;  // -p came after the last --policy
  // -S/--smp: -t after it and -a anywhere are ignored, as in cyclictest.
  bool smp = false;
  bool affinity_seen = false;
  // -A and --secaligned: cyclictest refuses both together.
  bool aligned_seen = false;
  bool secaligned_seen = false;

  optind = 0;  // GNU: full re-initialisation
  opterr = 0;
  for (;;) {
    int index = -1;
    const int c = getopt_long(argc, argv, short_options, long_options, &index);
    if (c == -1) break;
    const std::string_view arg = optarg != nullptr ? std::string_view(optarg) : std::string_view();
    if (index >= 0 && optind >= 1) {
      // getopt_long also takes any unique prefix of a long option (--histo
      // would be --histfile here, while cyclictest, which also has
      // --histofall, rejects it): only the full name is accepted. The
      // element is the last one taken, or the one before it when the value
      // was given apart.
      const bool apart = optarg != nullptr && optind >= 2 && optarg == argv[optind - 1];
      const std::string_view element(argv[optind - (apart ? 2 : 1)]);
      const std::string_view given = element.substr(2, element.find('=') - 2);
      if (given != long_options[index].name) {
        err = "unknown option '" + std::string(element) + "' (long options are taken only in full: --" +
              long_options[index].name + ")";
        return r;
      }
    }
    if (!unsupported_reason(c).empty() && !(c == 'c' && arg == "0")) {
      err = unsupported(c, optarg);
      return r;
    }
    switch (c) {
      case 'c':  // -c 0: CLOCK_MONOTONIC, urt's clock
        break;
      case opt_default_system:
        // cyclictest: power management is not suppressed, i.e.
        // /dev/cpu_dma_latency is left alone, as with --laptop.
        o.laptop = true;
        o.default_system = true;
        break;
      case 'S':
        // cyclictest: "-a -t and same priority of all threads" (urt runs
        // every series at -p anyway); a -t or -a besides is ignored.
        smp = true;
        o.smp = true;
        o.threads = -1;
        o.affinity = true;
        o.affinity_cpus.clear();
        break;
      case 'a': {
        affinity_seen = true;
        if (smp) {
          // cyclictest ignores -a in smp mode; a value written apart is
          // still this flag's.
          if (optarg == nullptr) detached_value([](std::string_view s) {
            return !s.empty() && s[0] >= '0' && s[0] <= '9';
          });
          break;
        }
        o.affinity = true;
        const char* value = optarg != nullptr ? optarg : detached_value([](std::string_view s) {
          return !s.empty() && s[0] >= '0' && s[0] <= '9';
        });
        if (value != nullptr) {
          o.affinity_cpus = value;
          if (o.affinity_cpus.empty()) err = bad(c, value, "is an empty cpulist");
          // cyclictest says "Using N cpus." at once when -v came before.
          if (o.verbose) o.verbose_echo_affinity = true;
        }
        break;
      }
      case 'd':
        if (number(c, arg, std::uint64_t{0}, max_us, o.distance_us, err)) o.distance_given = true;
        break;
      case 'D':
        if (auto d = parse_duration(arg)) {
          o.duration_s = *d;
          if (const std::string_view rest = duration_rest(arg); !rest.empty()) {
            r.warnings.push_back(bad(c, arg, "is read as " + std::to_string(*d) +
                                                 " s, as cyclictest reads it: what follows the "
                                                 "unit ('" + std::string(rest) + "') is ignored"));
          }
        } else if (duration_syntax(arg)) {
          err = bad(c, arg,
                    "is out of range: at most " + std::to_string(max_duration_s) +
                        " s (about 136 years)");
        } else {
          err = bad(c, arg, "is not a duration (a whole number with an optional s, m, h or d)");
        }
        break;
      case 'h':
        // cyclictest rejects -h 0 too: no histogram is -h left out.
        number(c, arg, std::uint64_t{1}, histogram_max_us, o.histogram_us, err);
        break;
      case 'i':
        number(c, arg, std::uint64_t{1}, max_us, o.interval_us, err);
        break;
      case 'l':
        number(c, arg, std::uint64_t{0}, std::numeric_limits<std::uint64_t>::max() / 2, o.loops,
               err);
        break;
      case 'm':
        o.mlockall = true;
        break;
      case 'p':
        number(c, arg, 0, urt::priority_max, o.priority, err);
        priority_seen = true;
        priority_last = true;
        warn_policy = false;  // cyclictest: -p switches an earlier other to FIFO silently
        break;
      case 'q':
        o.quiet = true;
        break;
      case 't': {
        if (smp) {
          // cyclictest: "-t ignored due to smp mode" (a -t before -S is
          // overridden silently); a count written apart is still this flag's.
          if (optarg == nullptr) detached_value(all_digits);
          r.warnings.push_back("-t/--threads is ignored after -S/--smp, as cyclictest does (one "
                               "thread per CPU)");
          break;
        }
        if (optarg != nullptr) {
          // -tN, --threads=N: cyclictest rejects 0 there.
          if (all_digits(arg) && arg.find_first_not_of('0') == std::string_view::npos) {
            err = bad(c, arg,
                      "is out of range 1.." + std::to_string(max_threads) +
                          " (as in cyclictest; -t alone, or -t 0 apart, runs one per CPU)");
          } else {
            number(c, arg, 1, max_threads, o.threads, err);
          }
          break;
        }
        // -t N apart: cyclictest takes N only when it is not 0 (atoi), and
        // runs one thread per CPU otherwise, as without N.
        const char* value = detached_value(all_digits);
        if (value != nullptr &&
            std::string_view(value).find_first_not_of('0') != std::string_view::npos) {
          number(c, value, 1, max_threads, o.threads, err);
        } else {
          o.threads = -1;  // one per worker, i.e. per CPU the workers may use
        }
        break;
      }
      case 'N':
        o.nsecs = true;
        break;
      case 'b':
        // cyclictest: -b 0 (atoi) never breaks.
        number(c, arg, std::uint64_t{0}, max_threshold, o.breaktrace, err);
        break;
      case 'H':
        // cyclictest: -H US is -h US with the summary column.
        if (number(c, arg, std::uint64_t{1}, histogram_max_us, o.histogram_us, err)) {
          o.histofall = true;
        }
        break;
      case 'v':
        o.verbose = true;
        break;
      case 'o':
        number(c, arg, std::uint64_t{1}, max_threshold, o.oscope, err);
        break;
      case 'u':
        o.unbuffered = true;
        break;
      case 'M':
        o.refresh_on_max = true;
        break;
      case opt_priospread:
        o.priospread = true;
        break;
      case 'A':
      case opt_secaligned: {
        // An optional USEC, attached or (as cyclictest reads it) apart.
        const char* value = optarg != nullptr ? optarg : detached_value(all_digits);
        if (c == 'A') {
          aligned_seen = true;
        } else {
          secaligned_seen = true;
        }
        o.align = c == 'A' ? align_mode::aligned : align_mode::secaligned;
        o.align_offset_us = 0;
        if (value != nullptr) number(c, value, std::uint64_t{0}, max_us, o.align_offset_us, err);
        break;
      }
      case opt_mainaffinity:
        try {
          o.main_affinity_cpus = urt::parse_cpulist(arg, "--mainaffinity", max_cpu_index);
          o.main_affinity = arg;
        } catch (const std::invalid_argument& e) {
          // urt's cpulist message, "FIELD: \"TEXT\" is not a cpulist (why)...",
          // from its verdict on.
          const std::string what = e.what();
          const std::size_t at = what.find(" is not a cpulist");
          err = bad(c, arg, at != std::string::npos ? what.substr(at + 1) : what);
        }
        break;
      case opt_spike:
        number(c, arg, std::uint64_t{0}, max_threshold, o.spike, err);
        break;
      case opt_spike_nodes: {
        std::uint64_t v = 0;
        if (!number(c, arg, std::uint64_t{0}, max_spike_nodes, v, err)) break;
        if (o.spike == 0) {
          // cyclictest: "if (trigger) trigger_list_size = atoi(optarg)".
          r.warnings.push_back(bad(c, arg,
                                   "is ignored without a --spike before it, as cyclictest "
                                   "ignores it (the default, 1024 spikes, holds)"));
        } else {
          o.spike_nodes = v;
        }
        break;
      }
      case opt_histfile:
        if (arg.empty()) err = bad(c, arg, "is an empty path");
        o.histfile = arg;
        break;
      case opt_json:
        if (arg.empty()) err = bad(c, arg, "is an empty path");
        o.json = arg;
        break;
      case opt_laptop:
        o.laptop = true;
        break;
      case opt_urt_summary:
        o.urt_summary = true;
        break;
      case opt_latency:
        number(c, arg, 0, max_latency_target_us, o.latency_target_us, err);
        break;
      case opt_topology:
        o.topology_text = arg;
        if (arg == "system") {
          o.topology = urt::topology_source::system();
        } else if (arg.starts_with("synthetic:") && arg.size() > 10) {
          o.topology = urt::topology_source::synthetic(std::string(arg.substr(10)));
        } else if (arg.starts_with("xml:") && arg.size() > 4) {
          o.topology = urt::topology_source::xml(std::string(arg.substr(4)));
        } else {
          err = bad(c, arg, "is not system, synthetic:DESCRIPTION or xml:PATH");
        }
        break;
      case opt_timer_spin:
        number(c, arg, std::uint64_t{0}, max_us, o.timer_spin_us, err);
        break;
      case opt_timer_wake:
        choose(c, arg, timer_wake_spellings, o.timer_wake, err);
        break;
      case opt_idle_spin_policy:
        choose(c, arg, spin_policy_spellings, o.idle_spin_policy, err);
        break;
      case opt_idle_spin: {
        std::uint64_t v = 0;
        if (number(c, arg, std::uint64_t{0}, max_us, v, err)) o.idle_spin_us = v;
        break;
      }
      case opt_policy: {
        urt::worker_policy v{};
        if (choose(c, arg, policy_spellings, v, err)) {
          o.policy = v;
          warn_policy = v == urt::worker_policy::other && priority_seen;
          priority_last = false;
        }
        break;
      }
      case opt_cpupri:
        choose(c, arg, cpupri_spellings, o.cpupri, err);
        break;
      case opt_migration:
        choose(c, arg, migration_spellings, o.migration, err);
        break;
      case opt_overrun:
        choose(c, arg, overrun_spellings, o.overrun, err);
        break;
      case opt_throttle:
        choose(c, arg, throttle_spellings, o.bandwidth.mode, err);
        break;
      case opt_bandwidth:
        if (budget(c, arg, o.bandwidth, err)) o.bandwidth_text = arg;
        break;
      case opt_cid: {
        urt::concurrency_id_mode mode{};
        if (choose(c, arg, cid_spellings, mode, err)) o.cid = mode;
        break;
      }
      case opt_ipi_timeout: {
        int v = 0;
        if (number(c, arg, 1, 1000000, v, err)) o.ipi_timeout_us = v;
        break;
      }
      case opt_fifo_priority: {
        int v = 0;
        if (number(c, arg, 1, 99, v, err)) o.fifo_priority = v;
        break;
      }
      case opt_load: {
        const auto colon = arg.find(':');
        if (colon == std::string_view::npos) {
          err = bad(c, arg, "is not N:PRIO (no colon)");
          break;
        }
        std::string sub;
        if (!number(c, arg.substr(0, colon), 0u, 1000u, o.load_tasks, sub) ||
            !number(c, arg.substr(colon + 1), 0, urt::priority_max, o.load_priority, sub)) {
          err = bad(c, arg, "is not N:PRIO with N in 0..1000 and PRIO in 0..99");
        }
        break;
      }
      case opt_help:
        o.help = true;
        break;
      case 'F':
      case opt_fifo:
        err = bad(c, arg,
                  "is not supported: urt-cyclictest writes no status to a named pipe (the "
                  "SCHED_FIFO priority of urt's workers is --urt-fifo-priority)");
        break;
      case ':':
        err = flag_name(optopt) + ": missing value";
        break;
      case '?':
      default: {
        const char* text = optind > 0 && optind <= argc ? argv[optind - 1] : "";
        if (std::string_view(text).starts_with("--fifo-")) {
          err = std::string("unknown option '") + text +
                "': urt's worker priority flag is --urt-fifo-priority";
        } else if (const std::string ambiguous = abbreviated(text); !ambiguous.empty()) {
          err = std::string("unknown option '") + text +
                "' (long options are taken only in full: " + ambiguous + ")";
        } else if (std::string_view(text).starts_with("--") || optopt == 0 || optopt > 255) {
          err = std::string("unknown or malformed option '") + text + "'";
        } else {
          err = std::string("unknown option '-") + static_cast<char>(optopt) + "'";
        }
        break;
      }
    }
    if (!err.empty()) return r;
  }
  for (int i = optind; i < argc; ++i) {
    if (taken.count(argv[i]) == 0) {
      err = std::string("unexpected argument '") + argv[i] + "'";
      return r;
    }
  }
  if (smp && affinity_seen) {
    r.warnings.push_back("-a/--affinity is ignored with -S/--smp, as cyclictest does (thread N "
                         "runs on CPU N)");
  }
  // cyclictest: "policy and priority don't match: setting policy to
  // SCHED_FIFO" (a priority means a real-time policy), warned when
  // --policy=other came after -p, silent when before.
  if (o.priority > 0 && o.policy == urt::worker_policy::other) {
    if (warn_policy) {
      r.warnings.push_back("--policy: 'other' and -p/--priority: '" + std::to_string(o.priority) +
                           "' don't match: setting policy to SCHED_FIFO, as cyclictest does");
    }
    o.policy.reset();  // fifo because of -p, falling back as without --policy
  }
  // cyclictest: -p switches the policy to SCHED_FIFO whatever its value
  // (unless --policy=other came after it), and a real-time policy at
  // priority 0 then takes threads + 1 (check_priospread).
  if (priority_seen && o.priority == 0 &&
      (o.policy != urt::worker_policy::other || priority_last)) {
    // An explicit --policy=fifo stays (it insists on FIFO); an earlier
    // --policy=other gives way to -p as without --policy.
    if (o.policy == urt::worker_policy::other) o.policy.reset();
    o.rt_priority_zero = true;
  }
  // Both flags seen: a strict budget of nothing would never run a FIFO task
  // (the runtime refuses it too; this names the flags).
  if (o.bandwidth.mode == urt::throttle_mode::strict && o.bandwidth.runtime.count() == 0) {
    err = bad(opt_bandwidth, o.bandwidth_text,
              "has a runtime of 0, which under --throttle strict would never run a FIFO task");
    return r;
  }
  if (aligned_seen && secaligned_seen) {
    err = "-A/--aligned and --secaligned: only one of them may be given, as in cyclictest";
    return r;
  }
  // cyclictest: "-o option only meaningful, if verbose", and it exits.
  if (o.oscope > 1 && !o.verbose) {
    err = bad('o', std::to_string(o.oscope),
              "needs -v/--verbose, as in cyclictest (it reduces the per-sample output)");
    return r;
  }
  // -t without a number: main checks once the worker count is known.
  if (o.threads > 0) {
    err = check_intervals(o, static_cast<unsigned>(o.threads));
    if (err.empty()) err = check_histogram_memory(o, static_cast<unsigned>(o.threads));
    if (err.empty()) err = check_priospread(o, static_cast<unsigned>(o.threads), r.warnings);
  }
  return r;
}

std::string check_priospread(options& o, unsigned threads, std::vector<std::string>& warnings) {
  if (!o.priospread && threads > 0 && o.priority == 0 &&
      (o.policy == urt::worker_policy::fifo || o.rt_priority_zero)) {
    // cyclictest: a real-time policy without a priority takes threads + 1,
    // capped at the highest priority.
    o.priority = static_cast<int>(std::min<std::uint64_t>(std::uint64_t{threads} + 1,
                                                          static_cast<std::uint64_t>(urt::priority_max)));
    warnings.push_back(std::string(o.rt_priority_zero ? "-p/--priority 0"
                                                      : "--policy=fifo without -p/--priority") +
                       ": defaulting realtime priority to " + std::to_string(o.priority) +
                       " (threads + 1), as cyclictest does");
    return {};
  }
  if (!o.priospread || threads == 0) return {};
  const std::string n = std::to_string(threads);
  const std::string count = o.threads < 0 ? "(one per worker: " + n + ")" : "'" + n + "'";
  if (o.priority == 0) {
    // cyclictest: "defaulting realtime priority to %d" (threads + 1), and
    // a priority means SCHED_FIFO.
    if (threads >= static_cast<unsigned>(urt::priority_max)) {
      return "--priospread: without -p/--priority the first thread's priority would be -t/--threads " +
             count + " + 1 = " + std::to_string(std::uint64_t{threads} + 1) +
             ", above the maximum of " + std::to_string(urt::priority_max) +
             " (cyclictest's default); give -p";
    }
    o.priority = static_cast<int>(threads) + 1;
    if (o.policy == urt::worker_policy::other) o.policy.reset();  // a priority means FIFO
    warnings.push_back("--priospread: no -p/--priority: defaulting realtime priority to " +
                       std::to_string(o.priority) +
                       " (threads + 1) and the policy to SCHED_FIFO, as cyclictest does");
    return {};
  }
  if (threads - 1 <= static_cast<unsigned>(o.priority)) return {};
  return "--priospread: -p/--priority '" + std::to_string(o.priority) + "' with -t/--threads " +
         count + " gives thread " + std::to_string(threads - 1) + " the priority " +
         std::to_string(o.priority) + " - " + std::to_string(threads - 1) +
         ", below 0 (cyclictest fails there): at least -p " + std::to_string(threads - 1) +
         " for " + n + " threads";
}

std::string check_histogram_memory(const options& o, unsigned threads) {
  if (o.histogram_us == 0 || threads == 0) return {};
  if (o.histogram_us > histogram_max_us) {
    return bad('h', std::to_string(o.histogram_us),
               "is out of range 1.." + std::to_string(histogram_max_us));
  }
  // At most 16 MB a thread; compared without multiplying by the count.
  const std::uint64_t per_thread = o.histogram_us * histogram_bucket_bytes;
  if (per_thread <= max_histogram_bytes / threads) return {};
  const std::string n = std::to_string(threads);
  const std::string count = o.threads < 0 ? "(one per worker: " + n + ")" : "'" + n + "'";
  // Below 2^24 * 2^32: the product fits.
  const std::uint64_t needed = per_thread * threads;
  return bad('h', std::to_string(o.histogram_us),
             "with -t/--threads " + count + " needs " + std::to_string(needed) +
                 " bytes of histograms (" + n + " threads x " +
                 std::to_string(o.histogram_us) + " buckets x " +
                 std::to_string(histogram_bucket_bytes) + " bytes), above the limit of " +
                 std::to_string(max_histogram_bytes) + " bytes (1 GiB): at most -h " +
                 std::to_string(max_histogram_bytes / histogram_bucket_bytes / threads) +
                 " for " + n + " threads");
}

std::string check_intervals(const options& o, unsigned threads) {
  if (o.interval_us > max_interval_us) {
    return bad('i', std::to_string(o.interval_us),
               "is out of range 1.." + std::to_string(max_interval_us));
  }
  if (o.histogram_us != 0 || threads < 2 || o.distance_us == 0) return {};  // all at -i
  // The last thread's interval, interval + n * distance, compared without
  // computing it.
  const std::uint64_t n = threads - 1;
  if (n <= (max_interval_us - o.interval_us) / o.distance_us) return {};
  return bad('d', std::to_string(o.distance_us),
             "gives thread " + std::to_string(n) + " an interval of " +
                 std::to_string(o.interval_us) + " + " + std::to_string(n) + " * " +
                 std::to_string(o.distance_us) + " us, above the limit of " +
                 std::to_string(max_interval_us) + " us");
}

parse_result parse_options(const std::vector<std::string>& args) {
  std::vector<std::string> copy = args;  // getopt_long permutes its argv
  std::vector<char*> argv;
  argv.reserve(copy.size() + 1);
  for (auto& a : copy) argv.push_back(a.data());
  argv.push_back(nullptr);
  return parse_options(static_cast<int>(copy.size()), argv.data());
}

urt::runtime_options options::runtime_options() const {
  urt::runtime_options r;
  r.topology = topology;
  r.cpus = affinity_cpus;
  if (idle_spin_us) r.idle_spin = std::chrono::microseconds{*idle_spin_us};
  r.idle_spin_policy = idle_spin_policy;
  r.timer_spin = std::chrono::microseconds{timer_spin_us};
  r.timer_wake = timer_wake;
  r.cpupri = cpupri;
  r.migration = migration;
  if (ipi_timeout_us) r.ipi_timeout = std::chrono::microseconds{*ipi_timeout_us};
  r.bandwidth = bandwidth;
  if (cid) r.cid_mode = *cid;
  r.policy = effective_policy();
  r.fifo_priority = effective_fifo_priority();
  r.lock_memory = mlockall ? urt::memory_lock::all : urt::memory_lock::none;
  return r;
}

std::string flag_error(const options& o, std::string_view what) {
  const auto starts = [&](std::string_view field) {
    return what.starts_with(std::string("runtime_options.") + std::string(field));
  };
  std::string flag;
  if (starts("cpus")) {
    flag = "-a/--affinity: '" + o.affinity_cpus + "'";
  } else if (starts("topology")) {
    flag = "--topology: '" + o.topology_text + "'";
  } else if (starts("timer_spin")) {
    flag = "--timer-spin: '" + std::to_string(o.timer_spin_us) + "'";
  } else if (starts("idle_spin")) {
    flag = "--idle-spin: '" + std::to_string(o.idle_spin_us.value_or(0)) + "'";
  } else if (starts("fifo_priority")) {
    flag = "--urt-fifo-priority: '" + std::to_string(o.effective_fifo_priority()) + "'";
  } else if (starts("policy")) {
    flag = std::string(o.policy ? "--policy: 'fifo'"
                                : "-p/--priority: '" + std::to_string(o.priority) +
                                      "' (implies SCHED_FIFO workers)");
  } else if (starts("lock_memory")) {
    flag = "-m/--mlockall";
  } else if (starts("bandwidth")) {
    const auto us = [](std::chrono::nanoseconds d) {
      return std::to_string(std::chrono::duration_cast<std::chrono::microseconds>(d).count());
    };
    flag = "--throttle/--bandwidth: '" +
           std::string(name_of(throttle_spellings, o.bandwidth.mode)) + " " +
           us(o.bandwidth.runtime) + "/" + us(o.bandwidth.period) + "'";
  } else {
    return std::string(what);
  }
  return flag + ": " + std::string(what);
}

std::string usage(std::string_view program) {
  std::string p(program);
  return "Usage: " + p +
         " [OPTIONS]\n"
         "Measures the release latency of urt periodic tasks the way cyclictest\n"
         "measures timer wake-ups: latency = task start - release time, in us.\n"
         "\n"
         "cyclictest's options (same letters and meanings):\n"
         "-a [CPULIST] --affinity[=CPULIST]  pin thread N to worker N (urt always does:\n"
         "                          a series never migrates); with a cpulist, run the\n"
         "                          workers only on those CPUs (runtime_options::cpus)\n"
         "                          and, as cyclictest, the main thread too\n"
         "-A [USEC] --aligned[=USEC] align the wake-ups: thread N starts at the\n"
         "                          run's start + N * USEC (default 0)\n"
         "-b USEC  --breaktrace=USEC stop the run once a latency exceeds USEC (in ns\n"
         "                          with -N) and print the '# Break thread/value' lines\n"
         "-c 0     --clock=0        CLOCK_MONOTONIC, urt's only clock\n"
         "         --default-system as --laptop: /dev/cpu_dma_latency is left alone\n"
         "-d DIST  --distance=DIST  distance of thread intervals in us, default=500\n"
         "                          (ignored, as in cyclictest, when -h is given);\n"
         "                          no thread's interval may exceed 2^40 us\n"
         "-D TIME  --duration=TIME  length of the run; append s, m, h or d (as in\n"
         "                          cyclictest, what follows the unit is ignored: 1m5 = 60 s)\n"
         "-h US    --histogram=US   dump a latency histogram up to US (1..1000000) to\n"
         "                          stdout after the run (all threads at the same\n"
         "                          interval); the\n"
         "                          histograms, threads x US x 16 bytes, may take at\n"
         "                          most 1 GiB (e.g. -t 64 -h 1000000, -t 1024 -h 65536)\n"
         "-H US    --histofall=US   as -h, with a summary column over all threads\n"
         "         --histfile=PATH  write the histogram to PATH instead of stdout\n"
         "-i INTV  --interval=INTV  base interval of thread in us, default=1000\n"
         "         --json=FILE      write final results into FILE, JSON formatted\n"
         "         --laptop         do not hold /dev/cpu_dma_latency (saves battery;\n"
         "                          deeper C-states, poorer latencies)\n"
         "         --latency=US     PM QoS target held in /dev/cpu_dma_latency while\n"
         "                          running, 0..2000000000, default 0 (keeps CPUs out\n"
         "                          of deep C-states, as cyclictest does)\n"
         "-l LOOPS --loops=LOOPS    number of loops: default=0 (endless); as in\n"
         "                          cyclictest, the run ends, for every thread, once\n"
         "                          one thread (thread 0: its interval is the shortest)\n"
         "                          has done its loops\n"
         "         --mainaffinity=CPULIST  run the main (printing) thread on these CPUs\n"
         "-m       --mlockall       lock current and future memory allocations\n"
         "-M       --refresh_on_max delay updating the screen until a new max latency\n"
         "-N       --nsecs          print results in ns instead of us (stdout, histogram\n"
         "                          buckets, JSON; -b and --spike compare in ns too)\n"
         "-o RED   --oscope=RED     with -v: print only the max of every RED samples\n"
         "-p PRIO  --priority=PRIO  task priority 0..99, default 0; PRIO > 0 also runs\n"
         "                          the workers SCHED_FIFO at PRIO, like cyclictest's\n"
         "                          threads (falls back to SCHED_OTHER when refused),\n"
         "                          also with --policy=other, as cyclictest\n"
         "         --priospread     thread N at task priority PRIO - N (without -p,\n"
         "                          PRIO = threads + 1)\n"
         "-q       --quiet          print a summary only on exit\n"
         "         --secaligned [USEC]  align the wake-ups to the next full second + USEC\n"
         "-S       --smp            -t -a with one priority for every series, as in\n"
         "                          cyclictest (a -t after it, or any -a, is ignored)\n"
         "-t [NUM] --threads[=NUM]  number of measuring tasks, 1..1024 (one periodic task\n"
         "                          each); without NUM, or -t 0, one per worker (one per\n"
         "                          CPU the workers may use); without -t 1\n"
         "         --spike=TRIGGER  record every latency above TRIGGER (us; ns with -N)\n"
         "         --spike-nodes=N  keep at most N of them (default 1024; after --spike)\n"
         "-u       --unbuffered     force unbuffered output for live processing\n"
         "-v       --verbose        output every value on stdout, 'n:c:v' (n = thread,\n"
         "                          c = count, v = value in us, ns with -N)\n"
         "\n"
         "urt's options:\n"
         "         --topology=system|synthetic:DESCRIPTION|xml:PATH  default system\n"
         "         --timer-wake=adaptive|at_release  when a parked worker's alarm for a\n"
         "                          release fires: earlier by its learned median wake-up\n"
         "                          lateness, spinning the rest (default adaptive), or at\n"
         "                          the release itself, as the kernel's cyclictest sleeps\n"
         "         --timer-spin=US  wake US before each release and spin (default 0 = off;\n"
         "                          overrides --timer-wake)\n"
         "         --idle-spin=US   idle spin before a worker parks (default: runtime's)\n"
         "         --idle-spin-policy=adaptive|fixed  spin at most US, adapted to when\n"
         "                          work arrives (default), or always US\n"
         "         --policy=other|fifo  OS policy of the workers (default: fifo when\n"
         "                          -p > 0, else other; other with -p > 0 is fifo)\n"
         "         --urt-fifo-priority=N  SCHED_FIFO priority of the workers 1..99\n"
         "                          (default: the -p value, else 90)\n"
         "         --cpupri=global|per_numa|per_llc|per_llc_bytes  layout of the\n"
         "                          priority map placement uses (default per_llc_bytes)\n"
         "         --migration=push_ipi|pull|none  what a worker that lowers its\n"
         "                          priority does about overloaded workers (default push_ipi)\n"
         "         --ipi-timeout=US  push_ipi: how long a token holder may take before\n"
         "                          its task is pulled (default: the runtime's)\n"
         "         --overrun=skip|catch_up  releases already past after a stall: skip\n"
         "                          them as cyclictest does (default), or run each,\n"
         "                          back to back, measured against its own release time\n"
         "         --throttle=off|deferred|strict  what a worker does once its FIFO\n"
         "                          tasks (priority 1..99) spent RUNTIME of the PERIOD:\n"
         "                          nothing (off), hold them back while normal tasks\n"
         "                          (priority 0) wait (deferred, the default), or hold\n"
         "                          them back until the period ends (strict)\n"
         "         --bandwidth=RUNTIME/PERIOD  each worker's FIFO budget in us, e.g.\n"
         "                          9500/10000 (default: the runtime's, 9500/10000);\n"
         "                          0 < PERIOD <= 3600000000, RUNTIME <= PERIOD; its\n"
         "                          counters: --urt-summary's '# bandwidth:' line and\n"
         "                          urt.bandwidth in the JSON\n"
         "         --cid=batched_scan|ownership  run the measuring threads in a task\n"
         "                          group of their own and take a concurrency ID at every\n"
         "                          release (this_task::cid(), a per_cid counter), IDs\n"
         "                          returned in this mode: the latency cost of concurrency\n"
         "                          IDs and their compaction; its counters: --urt-summary's\n"
         "                          '# cid:' line and urt.cid in the JSON\n"
         "         --load=N:PRIO    N background tasks per worker at task priority PRIO,\n"
         "                          each busy-spinning ~100 us and respawning itself\n"
         "         --urt-summary    after cyclictest's output (stdout is cyclictest's\n"
         "                          otherwise, line for line), urt's: per thread\n"
         "                          'T: N p50: p99: p99.9:' (exact percentiles), the\n"
         "                          '# timer:', '# bandwidth:', '# cid:' and '# load:'\n"
         "                          lines; the JSON has them always, under \"urt\"\n"
         "         --help           print this text and exit\n"
         "\n"
         "Long options are taken only in full. cyclictest's other flags (-c 1, -F, -r,\n"
         "-R, -s, -x, --smi, --tracemark, --dbg_cyclictest) are rejected, each with\n"
         "the reason it has no meaning for urt.\n"
         "Bad options, and --json or --histfile paths that cannot be opened for\n"
         "writing, exit with status 2 before the run. SIGINT/SIGTERM end the run;\n"
         "the summary, histogram and JSON are still written.\n";
}

}  // namespace urt_cyclictest
