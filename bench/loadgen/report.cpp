#include "report.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <optional>
#include <string_view>
#include <utility>

namespace loadgen {
namespace {

template <class... A>
std::string fmt(const char* f, A... a) {
  char buf[512];
  const int n = std::snprintf(buf, sizeof buf, f, a...);
  return std::string(buf, static_cast<std::size_t>(std::clamp(n, 0, static_cast<int>(sizeof buf) - 1)));
}

// A latency in microseconds: one decimal below 100, none above.
std::string us(double v) { return v < 100 ? fmt("%.1f", v) : fmt("%.0f", v); }

std::string pad_left(const std::string& s, std::size_t w) {
  return s.size() >= w ? s : std::string(w - s.size(), ' ') + s;
}
std::string pad_right(const std::string& s, std::size_t w) {
  return s.size() >= w ? s : s + std::string(w - s.size(), ' ');
}

std::string percent_label(double p) { return p == std::floor(p) ? fmt("%.0f%%", p) : fmt("%g%%", p); }

std::string xml_escape(std::string_view s) {
  std::string out;
  for (const char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&apos;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string json_string(std::string_view s) {
  std::string out = "\"";
  for (const char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (u < 0x20) {
      out += fmt("\\u%04x", static_cast<unsigned>(u));
    } else {
      out += c;
    }
  }
  return out + "\"";
}

std::string json_number(double v) { return std::isfinite(v) ? fmt("%.6g", v) : "null"; }

// Control p99 and bulk/s of `p` over the baseline's `bp` at the same
// point: when both ran and the baseline's figures are positive.
struct ratios {
  double p99 = 0, bulk = 0;
};
std::optional<ratios> over_baseline(const point_result* p, const point_result* bp) {
  if (p == nullptr || bp == nullptr || !p->ran || !bp->ran || bp->control.p99 <= 0 ||
      bp->bulk_rate <= 0) {
    return std::nullopt;
  }
  return ratios{p->control.p99 / bp->control.p99, p->bulk_rate / bp->bulk_rate};
}

const server_result* find(const run_result& r, const std::string& name) {
  for (const server_result& s : r.servers) {
    if (s.name == name) return &s;
  }
  return nullptr;
}

}  // namespace

std::int64_t percentile(const std::vector<std::int64_t>& sorted, double p) noexcept {
  if (sorted.empty()) return 0;
  // The smallest rank k with k >= p% of n (less a hair: 99.9 / 100 * 1000 is 999.0000000000001).
  const double rank = std::ceil(p * static_cast<double>(sorted.size()) / 100.0 - 1e-9);
  const auto i = static_cast<std::size_t>(std::clamp(rank, 1.0, static_cast<double>(sorted.size()))) - 1;
  return sorted[i];
}

latency_summary summarize(std::vector<std::int64_t>& ns) {
  std::sort(ns.begin(), ns.end());
  latency_summary s;
  s.samples = ns.size();
  if (ns.empty()) return s;
  const auto to_us = [](std::int64_t v) { return static_cast<double>(v) / 1000.0; };
  s.p50 = to_us(percentile(ns, 50));
  s.p99 = to_us(percentile(ns, 99));
  s.p999 = to_us(percentile(ns, 99.9));
  s.max = to_us(ns.back());
  return s;
}

std::vector<target_verdict> judge_targets(const run_result& r) {
  std::vector<target_verdict> out;
  const server_result* b = find(r, r.baseline);
  if (b == nullptr) return out;
  for (const server_result& s : r.servers) {
    if (&s == b) continue;
    target_verdict v;
    v.server = s.name;
    bool all = true;
    for (std::size_t i = 0; i < r.percents.size(); ++i) {
      if (r.percents[i] < saturating_percent) continue;
      target_point tp;
      tp.percent = r.percents[i];
      const point_result* p = i < s.points.size() ? &s.points[i] : nullptr;
      const point_result* bp = i < b->points.size() ? &b->points[i] : nullptr;
      if (const std::optional<ratios> q = over_baseline(p, bp)) {
        tp.ran = true;
        tp.p99_ratio = q->p99;
        tp.bulk_ratio = q->bulk;
        tp.client_bound = p->control.p99 > 0 && p->lag.p99 >= p->control.p99 / 2;
      }
      all = all && tp.ran && tp.p99_ratio <= target_p99_ratio && tp.bulk_ratio >= target_bulk_ratio;
      v.points.push_back(tp);
    }
    v.met = !v.points.empty() && all;
    out.push_back(std::move(v));
  }
  return out;
}

std::string format_table(const run_result& r) {
  std::string out;
  out += fmt("bulk: %s on %u connections, open loop; control: PING and GET alternating on %u "
             "connections at %g requests/s each\n",
             r.bulk_label.c_str(), r.bulk_conns, r.control_conns, r.control_rate);
  if (!r.client.empty()) out += "client: " + r.client + "\n";
  if (r.capacity_given) {
    out += fmt("capacity: %.0f %s/s given by --capacity (no capacity run)\n", r.capacity, r.bulk_label.c_str());
  } else {
    out += fmt("capacity (closed loop: %u connections, 2 requests in flight each, %.2g s warm-up then %.2g s):",
               r.bulk_conns, r.warmup_s, r.capacity_s);
    for (const server_result& s : r.servers) {
      if (s.capacity > 0) out += fmt(" %s %.0f/s", s.name.c_str(), s.capacity);
    }
    out += r.capacity > 0 ? fmt("; 100%% = %s's %.0f/s\n", r.baseline.c_str(), r.capacity)
                          : fmt(" none: the baseline %s failed\n", r.baseline.c_str());
  }
  if (r.rounds > 1) {
    out += fmt(
        "%u rounds, the servers in turn, each a sweep of every point; a point's figures are over\n"
        "its rounds' samples together\n",
        r.rounds);
  }
  out += fmt("each point: %.2g s warm-up (sent, not measured), then %.2g s measured; latencies in us from the\n"
             "intended send time to the reply (open loop: a stalled server is not hidden); bulk/s = replies\n"
             "received within the measured window; lag = how late the client itself sent\n\n",
             r.warmup_s, r.duration_s);

  std::size_t name_w = 6;
  for (const server_result& s : r.servers) name_w = std::max(name_w, s.name.size());
  const std::string base = r.baseline;
  const std::string p99_ratio = "p99/" + base;
  const std::string bulk_ratio = "bulk/" + base;
  const std::size_t ratio_w = std::max<std::size_t>(9, std::max(p99_ratio.size(), bulk_ratio.size()));
  out += pad_left("load", 5) + pad_left("offered/s", 10) + "  " + pad_right("server", name_w) + pad_left("bulk/s", 9) +
         pad_left("ctl p50", 9) + pad_left("ctl p99", 9) + pad_left("p99.9", 9) + pad_left("max", 9) +
         pad_left("lag p99", 9) + pad_left("errors", 8) + pad_left(p99_ratio, ratio_w + 2) +
         pad_left(bulk_ratio, ratio_w + 2) + "\n";
  const server_result* b = find(r, base);
  for (std::size_t i = 0; i < r.percents.size(); ++i) {
    bool first = true;
    for (const server_result& s : r.servers) {
      const point_result& p = s.points[i];
      std::string line = first ? pad_left(percent_label(r.percents[i]), 5) +
                                     pad_left(r.capacity > 0 ? fmt("%.0f", r.capacity * r.percents[i] / 100.0) : "-", 10)
                               : std::string(15, ' ');
      first = false;
      line += "  " + pad_right(s.name, name_w);
      if (!p.ran) {
        out += line + "   (not run: " + (s.failure.empty() ? std::string("the server failed") : s.failure) + ")\n";
        continue;
      }
      line += pad_left(fmt("%.0f", p.bulk_rate), 9) + pad_left(us(p.control.p50), 9) +
              pad_left(us(p.control.p99), 9) + pad_left(us(p.control.p999), 9) + pad_left(us(p.control.max), 9) +
              pad_left(us(p.lag.p99), 9) + pad_left(fmt("%llu", static_cast<unsigned long long>(p.control_errors + p.bulk_errors)), 8);
      const point_result* bp = b != nullptr && &s != b ? &b->points[i] : nullptr;
      if (const std::optional<ratios> q = over_baseline(&p, bp)) {
        line += pad_left(fmt("%.2f", q->p99), ratio_w + 2) +
                pad_left(fmt("%.2f", q->bulk), ratio_w + 2);
      } else {
        line += pad_left("-", ratio_w + 2) + pad_left("-", ratio_w + 2);
      }
      out += line + "\n";
    }
  }
  const std::vector<target_verdict> verdicts = judge_targets(r);
  if (!verdicts.empty()) {
    out += fmt(
        "\ntarget (reported, not asserted): under saturating bulk load (%s and up), control p99 at "
        "most %.2gx %s's and bulk/s at least %.2gx %s's\n",
        percent_label(saturating_percent).c_str(), target_p99_ratio, base.c_str(),
        target_bulk_ratio, base.c_str());
  }
  for (const target_verdict& v : verdicts) {
    out += fmt("  %s:", v.server.c_str());
    if (v.points.empty()) {
      out += fmt(" no point at %s or above: nothing to judge\n",
                 percent_label(saturating_percent).c_str());
      continue;
    }
    std::string client_bound;
    for (std::size_t i = 0; i < v.points.size(); ++i) {
      const target_point& tp = v.points[i];
      out += fmt("%s %s", i == 0 ? "" : ",", percent_label(tp.percent).c_str());
      out += tp.ran ? fmt(" p99 %.2fx bulk %.2fx", tp.p99_ratio, tp.bulk_ratio)
                    : std::string(" not run");
      if (tp.client_bound) {
        if (!client_bound.empty()) client_bound += ", ";
        client_bound += percent_label(tp.percent);
      }
    }
    out += v.met ? "  -> met\n" : "  -> NOT met\n";
    if (!client_bound.empty()) {
      out +=
          fmt("  %s: at %s the client's own send lag p99 is at least half its control p99: "
              "the figure is largely the client's (%s)\n",
              v.server.c_str(), client_bound.c_str(),
              r.client_spun ? "it never slept: its own work or the OS delayed its sends"
                            : "with a CPU of its own it busy-polls and keeps its wake-ups out: "
                              "--spin-us always, or --client-cpus apart from --server-cpus");
    }
  }
  return out;
}

std::string format_json(const run_result& r) {
  std::string o = "{\n";
  o += "  \"bulk\": " + json_string(r.bulk_label) + ",\n";
  o += fmt("  \"bulk_connections\": %u,\n  \"control_connections\": %u,\n", r.bulk_conns, r.control_conns);
  o += "  \"control_rate_per_connection\": " + json_number(r.control_rate) + ",\n";
  o += "  \"duration_s\": " + json_number(r.duration_s) + ",\n";
  o += fmt("  \"rounds\": %u,\n", r.rounds);
  o += "  \"warmup_s\": " + json_number(r.warmup_s) + ",\n";
  o += "  \"capacity_duration_s\": " + json_number(r.capacity_s) + ",\n";
  o += std::string("  \"capacity_given\": ") + (r.capacity_given ? "true" : "false") + ",\n";
  o += "  \"capacity\": " + json_number(r.capacity) + ",\n";
  o += "  \"baseline\": " + json_string(r.baseline) + ",\n";
  o += "  \"client\": " + json_string(r.client) + ",\n";
  o += std::string("  \"client_busy_polled\": ") + (r.client_spun ? "true" : "false") + ",\n";
  o += "  \"servers\": [\n";
  for (std::size_t k = 0; k < r.servers.size(); ++k) {
    const server_result& s = r.servers[k];
    o += "    {\n      \"name\": " + json_string(s.name) + ",\n";
    o += "      \"mode\": " + (s.mode.empty() ? std::string("null") : json_string(s.mode)) + ",\n";
    o += "      \"address\": " + json_string(s.address) + ",\n";
    o += "      \"capacity\": " + json_number(s.capacity) + ",\n";
    o += fmt("      \"setup_errors\": %llu,\n", static_cast<unsigned long long>(s.setup_errors));
    o += "      \"first_error\": " + (s.first_error.empty() ? std::string("null") : json_string(s.first_error)) + ",\n";
    o += "      \"failure\": " + (s.failure.empty() ? std::string("null") : json_string(s.failure)) + ",\n";
    o += "      \"points\": [\n";
    for (std::size_t i = 0; i < s.points.size(); ++i) {
      const point_result& p = s.points[i];
      const auto lat = [](const latency_summary& l) {
        return fmt("{\"samples\": %llu, \"p50_us\": ", static_cast<unsigned long long>(l.samples)) +
               json_number(l.p50) + ", \"p99_us\": " + json_number(l.p99) + ", \"p999_us\": " + json_number(l.p999) +
               ", \"max_us\": " + json_number(l.max) + "}";
      };
      o += "        {\"percent\": " + json_number(p.percent) +
           ", \"ran\": " + (p.ran ? "true" : "false") + ", \"offered\": " + json_number(p.offered) +
           ", \"bulk_rate\": " + json_number(p.bulk_rate) +
           fmt(", \"control_sent\": %llu, \"bulk_sent\": %llu, \"control_errors\": %llu, "
               "\"bulk_errors\": %llu",
               static_cast<unsigned long long>(p.control_sent),
               static_cast<unsigned long long>(p.bulk_sent),
               static_cast<unsigned long long>(p.control_errors),
               static_cast<unsigned long long>(p.bulk_errors)) +
           ",\n         \"control\": " + lat(p.control) +
           ",\n         \"bulk_latency\": " + lat(p.bulk) +
           ",\n         \"send_lag\": " + lat(p.lag) + ",\n         \"control_p99_us_by_round\": [";
      for (std::size_t j = 0; j < p.round_p99.size(); ++j) {
        o += (j == 0 ? "" : ", ") + json_number(p.round_p99[j]);
      }
      o += std::string("]}") + (i + 1 < s.points.size() ? "," : "") + "\n";
    }
    o += "      ]\n    }";
    o += k + 1 < r.servers.size() ? ",\n" : "\n";
  }
  o += "  ],\n  \"targets\": [";
  const std::vector<target_verdict> verdicts = judge_targets(r);
  for (std::size_t k = 0; k < verdicts.size(); ++k) {
    const target_verdict& v = verdicts[k];
    o += std::string(k == 0 ? "\n" : ",\n") + "    {\"server\": " + json_string(v.server) +
         ", \"met\": " + (v.met ? "true" : "false") + ", \"points\": [";
    for (std::size_t i = 0; i < v.points.size(); ++i) {
      const target_point& tp = v.points[i];
      o += std::string(i == 0 ? "" : ", ") + "{\"percent\": " + json_number(tp.percent) +
           ", \"ran\": " + (tp.ran ? "true" : "false") +
           ", \"p99_ratio\": " + (tp.ran ? json_number(tp.p99_ratio) : "null") +
           ", \"bulk_ratio\": " + (tp.ran ? json_number(tp.bulk_ratio) : "null") +
           ", \"client_bound\": " + (tp.client_bound ? "true" : "false") + "}";
    }
    o += "]}";
  }
  o += verdicts.empty() ? "]\n}\n" : "\n  ]\n}\n";
  return o;
}

std::string format_svg(const run_result& r) {
  constexpr double width = 760, height = 480;
  constexpr double left = 90, right = 730, top = 60, bottom = 410;  // the plot area
  static constexpr const char* colors[] = {"#d62728", "#1f77b4", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b"};

  // y: decades around every p99 drawn.
  double lo = 0, hi = 0;
  for (const server_result& s : r.servers) {
    for (const point_result& p : s.points) {
      if (!p.ran || p.control.samples == 0 || p.control.p99 <= 0) continue;
      lo = lo == 0 ? p.control.p99 : std::min(lo, p.control.p99);
      hi = std::max(hi, p.control.p99);
    }
  }
  if (hi == 0) lo = hi = 100;
  const int dlo = static_cast<int>(std::floor(std::log10(lo)));
  int dhi = static_cast<int>(std::ceil(std::log10(hi)));
  if (dhi <= dlo) dhi = dlo + 1;
  const auto y_of = [&](double v) {
    return bottom - (std::log10(v) - dlo) / (dhi - dlo) * (bottom - top);
  };

  // x: 0 .. the highest point (and at least 100%), in steps of 10 or 20.
  double xmax = 100;
  for (const double p : r.percents) xmax = std::max(xmax, p);
  const double xstep = xmax <= 150 ? 10 : xmax <= 300 ? 25 : 100;
  xmax = std::ceil(xmax * 1.04 / xstep) * xstep;
  const auto x_of = [&](double p) { return left + p / xmax * (right - left); };

  std::string o;
  o += "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  o += fmt("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\" "
           "font-family=\"sans-serif\" font-size=\"12\">\n",
           width, height, width, height);
  o += fmt("<rect x=\"0\" y=\"0\" width=\"%.0f\" height=\"%.0f\" fill=\"#ffffff\"/>\n", width, height);
  o += fmt("<text x=\"%.1f\" y=\"24\" text-anchor=\"middle\" font-size=\"15\">", width / 2) +
       xml_escape("urt-loadgen: control p99 latency against bulk load (" + r.bulk_label + ")") + "</text>\n";
  o += fmt("<text x=\"%.1f\" y=\"42\" text-anchor=\"middle\" fill=\"#555555\">", width / 2) +
       xml_escape(fmt("open loop; %u control connections at %g req/s each; %u bulk connections; 100%% = %s, %.0f/s",
                      r.control_conns, r.control_rate, r.bulk_conns, r.baseline.c_str(), r.capacity)) +
       "</text>\n";

  // Grid and ticks.
  o += "<g stroke=\"#dddddd\" stroke-width=\"1\">\n";
  for (int d = dlo; d <= dhi; ++d) {
    for (const int m : {1, 2, 5}) {
      const double v = m * std::pow(10.0, d);
      if (d == dhi && m > 1) break;
      o += fmt("<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"%s/>\n", left, y_of(v), right, y_of(v),
               m == 1 ? " stroke=\"#bbbbbb\"" : "");
    }
  }
  for (double x = 0; x <= xmax + 1e-9; x += xstep) {
    o += fmt("<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>\n", x_of(x), top, x_of(x), bottom);
  }
  o += "</g>\n";
  o += fmt("<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#888888\" stroke-dasharray=\"4 3\"/>\n",
           x_of(100), top, x_of(100), bottom);
  o += fmt("<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"none\" stroke=\"#333333\"/>\n", left,
           top, right - left, bottom - top);
  o += "<g fill=\"#333333\">\n";
  for (int d = dlo; d <= dhi; ++d) {
    for (const int m : {1, 2, 5}) {
      if (d == dhi && m > 1) break;
      if (m > 1 && dhi - dlo > 2) continue;
      const double v = m * std::pow(10.0, d);
      o += fmt("<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%.0f</text>\n", left - 6, y_of(v) + 4, v);
    }
  }
  for (double x = 0; x <= xmax + 1e-9; x += xstep) {
    o += fmt("<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%g</text>\n", x_of(x), bottom + 18, x);
  }
  o += "</g>\n";
  o += fmt("<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">", (left + right) / 2, bottom + 44) +
       xml_escape("bulk offered load (% of " + r.baseline + "'s capacity, " + fmt("%.0f", r.capacity) + " " +
                  r.bulk_label + "/s)") +
       "</text>\n";
  o += fmt("<text x=\"20\" y=\"%.1f\" text-anchor=\"middle\" transform=\"rotate(-90 20 %.1f)\">", (top + bottom) / 2,
           (top + bottom) / 2) +
       "control p99 latency (\xc2\xb5s, log scale)</text>\n";

  // One series per server.
  for (std::size_t k = 0; k < r.servers.size(); ++k) {
    const server_result& s = r.servers[k];
    const char* color = colors[k % std::size(colors)];
    std::string pts;
    std::string marks;
    for (const point_result& p : s.points) {
      if (!p.ran || p.control.samples == 0 || p.control.p99 <= 0) continue;
      const double x = x_of(p.percent);
      const double y = y_of(p.control.p99);
      pts += fmt("%s%.1f,%.1f", pts.empty() ? "" : " ", x, y);
      const std::string tip = xml_escape(s.name + ": " + percent_label(p.percent) + " load, control p99 " +
                                         us(p.control.p99) + " \xc2\xb5s");
      if (k % 2 == 0) {
        marks += fmt("<circle cx=\"%.1f\" cy=\"%.1f\" r=\"4\"><title>", x, y) + tip + "</title></circle>\n";
      } else {
        marks += fmt("<rect x=\"%.1f\" y=\"%.1f\" width=\"8\" height=\"8\"><title>", x - 4, y - 4) + tip +
                 "</title></rect>\n";
      }
    }
    o += "<g class=\"series\" data-server=\"" + xml_escape(s.name) + "\" fill=\"" + color + "\" stroke=\"" + color +
         "\">\n";
    if (!pts.empty()) o += "<polyline fill=\"none\" stroke-width=\"2\" points=\"" + pts + "\"/>\n";
    o += marks + "</g>\n";
  }

  // Legend, top left inside the plot.
  const double lh = 18;
  o += fmt("<rect x=\"%.1f\" y=\"%.1f\" width=\"230\" height=\"%.1f\" fill=\"#ffffff\" fill-opacity=\"0.85\" "
           "stroke=\"#999999\"/>\n",
           left + 10, top + 10, lh * static_cast<double>(r.servers.size()) + 8);
  for (std::size_t k = 0; k < r.servers.size(); ++k) {
    const char* color = colors[k % std::size(colors)];
    const double y = top + 10 + 4 + lh * static_cast<double>(k) + lh / 2;
    o += fmt("<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" stroke-width=\"2\"/>\n", left + 18,
             y, left + 44, y, color);
    o += fmt("<text x=\"%.1f\" y=\"%.1f\">", left + 52, y + 4) +
         xml_escape(r.servers[k].name + (r.servers[k].mode.empty() ? "" : " (urt-kv --mode " + r.servers[k].mode + ")")) +
         "</text>\n";
  }
  o += "</svg>\n";
  return o;
}

}  // namespace loadgen
