#include "algo/extension_validity.hpp"

#include "algo/validity.hpp"
#include "unsafe_switches.hpp"

#include <algorithm>
#include <cmath>

namespace redlock::detail {

using std::chrono::milliseconds;

void extension_validity::on_acquired(steady_clock::time_point until, milliseconds ttl) {
  valid_until_ = until;
  longest_ttl_ = ttl;
}

sent_extension extension_validity::send(steady_clock::time_point now, milliseconds ttl,
                                        double drift_factor) {
  const sent_extension sent{++sent_, now + ttl - drift_allowance(ttl, drift_factor)};
  valid_until_ = std::min(valid_until_, sent.cap);
  unconfirmed_.push_back(sent);
  longest_ttl_ = std::max(longest_ttl_, ttl);
  return sent;
}

bool extension_validity::confirm(std::uint64_t id, steady_clock::time_point now) {
  if (now >= valid_until_) return false;
  const auto confirmed = std::find_if(unconfirmed_.begin(), unconfirmed_.end(),
                                      [id](const sent_extension& sent) { return sent.id == id; });
  // Not found: a newer extension was confirmed first, and this older one ran before it.
  if (confirmed == unconfirmed_.end()) return true;
  auto until = confirmed->cap;
  for (auto later = confirmed; later != unconfirmed_.end(); ++later)
    until = std::min(until, later->cap);
  valid_until_ = std::max(valid_until_, until);
  unconfirmed_.erase(unconfirmed_.begin(), confirmed + 1);
  return true;
}

steady_clock::time_point extension_validity::claimed() const noexcept {
  auto claimed = valid_until_;
  for (const auto& sent : unconfirmed_)
    claimed = std::max(claimed, sent.cap);
  return claimed;
}

milliseconds ttl_covering(steady_clock::time_point until, steady_clock::time_point now,
                          double drift_factor) {
  const double needed_ms = std::chrono::duration<double, std::milli>(until - now).count() + 2.0;
  const auto ttl =
      milliseconds(static_cast<milliseconds::rep>(std::ceil(needed_ms / (1.0 - drift_factor))) + 1);
  return std::max(ttl, milliseconds(1));
}

steady_clock::duration renewal_retry_delay(milliseconds ttl) {
  return std::clamp<steady_clock::duration>(ttl / 10, milliseconds(10), milliseconds(500));
}

std::optional<steady_clock::time_point> renewal_retry_at(steady_clock::time_point now,
                                                         milliseconds ttl,
                                                         steady_clock::time_point valid_until) {
  const auto retry = now + renewal_retry_delay(ttl);
  if (retry >= valid_until) return std::nullopt;
  // On a tick, as a first renewal is, so that the retries of the leases whose renewals failed
  // together go out together too. Unaligned, a client with many leases that met one slow moment
  // sent each retry as a request of its own: many more requests, more of them late, more
  // retries, until every lease was lost.
  auto on_tick = renewal_tick_start(retry, ttl);
  if (on_tick <= now) on_tick += renewal_tick(ttl);  // a tick longer than the delay (tests)
  return on_tick < valid_until ? on_tick : retry;
}

steady_clock::time_point renewal_due(steady_clock::time_point valid_until, milliseconds ttl) {
  return valid_until - ttl / 2;
}

milliseconds renewal_tick(milliseconds ttl) {
  if (const int wide = renewal_tick_override_ms(); wide > 0) return milliseconds(wide);
  return std::clamp(ttl / 64, milliseconds(1), milliseconds(25));
}

steady_clock::time_point renewal_tick_start(steady_clock::time_point due, milliseconds ttl) {
  const steady_clock::duration tick = renewal_tick(ttl);
  auto into_tick = due.time_since_epoch() % tick;
  if (into_tick < steady_clock::duration::zero()) into_tick += tick;  // before the epoch
  return due - into_tick;
}

renewal plan_renewal(const extension_validity& validity, steady_clock::time_point now,
                     milliseconds lock_ttl, std::optional<steady_clock::time_point> max_hold_end,
                     double drift_factor) {
  renewal plan;
  plan.ttl = std::max(lock_ttl, ttl_covering(validity.claimed(), now, drift_factor));
  if (!max_hold_end) return plan;
  const auto left = std::chrono::duration_cast<milliseconds>(*max_hold_end - now);
  if (left > plan.ttl) return plan;
  plan.ttl = left;
  plan.last = true;
  plan.none = plan.ttl <= milliseconds(0) ||
              now + plan.ttl - drift_allowance(plan.ttl, drift_factor) <= validity.valid_until();
  return plan;
}

}  // namespace redlock::detail
