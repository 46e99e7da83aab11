#ifndef REDLOCK_NODES_REQUEST_LANES_HPP
#define REDLOCK_NODES_REQUEST_LANES_HPP

#include <boost/container/small_vector.hpp>
#include <boost/unordered/unordered_flat_map.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <unordered_map>
#include <utility>
#include <vector>

namespace redlock::detail {

// The order of requests per destination, for a node that reaches its keys over several connections
// (a cluster: a destination is a hash slot; a sentinel-managed master: the one master). No sockets:
// the node asks it where each request may go and when, and tells it what became of each.
//
// The rule: requests of one destination run in the order they were issued, whatever happens to
// their routes. A release must run after the SET it undoes (else the key stays a TTL), and a
// shorter extension must not run after a longer one that was confirmed (else the key expires
// before the validity the lease claims). One connection keeps its requests in order; so
//  1. a request is sent at once only when nothing of its lane waits and everything of it in
//     flight is on the route it takes; otherwise it waits behind them, in the order issued;
//  2. a request that must be sent again (a redirection; a route that failed it unsent) waits
//     where it stands in its lane, ahead of every later one;
//  3. the first waiting request of a lane goes when every earlier one is in flight on the route
//     it takes (or there is none); those behind it may then follow it there at once.
// A request may stay in flight on a former route while an earlier one is sent again elsewhere: it
// is answered there (it ran there, or meets the same redirection and takes its place again), and
// rule 1 keeps new requests waiting meanwhile.
//
// Nothing waits for ever: a waiting request leaves at its deadline (expire), a request in flight
// when its connection answers or fails it (settle). Not thread-safe: the node's executor only.
//
// `Request` is what the node needs to send a waiting request later; it has
// `std::optional<std::chrono::steady_clock::time_point> deadline`.
template <class Request>
class request_lanes {
 public:
  using lane_id = std::uint32_t;   // a hash slot, or 0
  using route_id = std::uint64_t;  // a connection, as the node numbers them
  using ticket = std::uint64_t;    // one request, from admit to settle
  using time_point = std::chrono::steady_clock::time_point;

  struct admission {
    ticket id = 0;
    bool go = false;  // send it now on the route given to admit; else it waits in its lane
  };

  // A new request of `lane` whose route is `route` now; no route: none is known yet (it waits
  // for routes_renewed). When it must wait, `make()` gives the Request to keep.
  template <class Make>
  admission admit(lane_id lane, std::optional<route_id> route, Make&& make) {
    const ticket id = ++last_ticket_;
    auto& l = lane_state_of(lane);
    const bool go = route && l.waiting == 0 && l.all_in_flight_on(*route);
    if (go) {
      l.entries.push_back(entry{id, state::in_flight, *route});
    } else {
      l.entries.push_back(entry{id, route ? state::waiting : state::stalled, 0});
      park(l, id, make());
    }
    return {id, go};
  }

  // Its answer is final, or it failed for good: it leaves its lane, and what waited behind it
  // may go.
  void settle(lane_id lane, ticket id) {
    const auto found = lanes_.find(lane);
    if (found == lanes_.end()) return;
    auto& entries = found->second.entries;
    for (auto it = entries.begin(); it != entries.end(); ++it) {
      if (it->id != id) continue;
      if (it->what != state::in_flight) unpark(found->second, id);
      entries.erase(it);
      break;
    }
    touched(found);
  }

  // A request in flight must be sent again: to `route` (an ASK's target), to its lane's route
  // when next() takes it (a MOVED, which changed that route), or, `after_new_routes`, only once
  // routes_renewed() says a new route is known (its route failed it unsent).
  enum class resend : std::uint8_t { to_lane_route, after_new_routes };
  void send_again(lane_id lane, ticket id, Request request, resend how) {
    resend_as(lane, id, how == resend::to_lane_route ? state::waiting : state::stalled, 0,
              std::move(request));
  }
  void send_again_to(lane_id lane, ticket id, route_id route, Request request) {
    resend_as(lane, id, state::pinned, route, std::move(request));
  }

  // New routes are known (a topology, a master): requests waiting for one may go.
  void routes_renewed() {
    for (auto& [id, l] : lanes_) {
      if (l.waiting == 0) continue;
      for (auto& e : l.entries) {
        if (e.what == state::stalled) e.what = state::waiting;
      }
      mark(id, l);
    }
  }

  struct ready {
    lane_id lane = 0;
    ticket id = 0;
    route_id route = 0;
    Request request;
  };
  // The next waiting request that may go now (rule 3), now in flight on the route it takes; none
  // when nothing may. `route_of(lane)` is the lane's route now.
  template <class RouteOf>
  std::optional<ready> next(RouteOf&& route_of) {
    while (!dirty_.empty()) {
      const lane_id lane = dirty_.back();
      const auto found = lanes_.find(lane);
      if (found != lanes_.end()) {
        if (auto go = first_ready(lane, found->second, route_of)) return go;
        found->second.dirty = false;
      }
      dirty_.pop_back();
    }
    return std::nullopt;
  }

  // Takes out every waiting request whose deadline is at or before `now`, handing each to
  // `expired(lane, request)`; what waited behind them may go. Returns the earliest deadline left.
  template <class Expired>
  std::optional<time_point> expire(time_point now, Expired&& expired) {
    std::optional<time_point> next_deadline;
    if (parked_.empty()) return next_deadline;
    std::vector<std::pair<lane_id, Request>> due;
    for (auto it = lanes_.begin(); it != lanes_.end();) {
      auto& l = it->second;
      for (auto e = l.entries.begin(); l.waiting > 0 && e != l.entries.end();) {
        if (e->what == state::in_flight) {
          ++e;
          continue;
        }
        const auto parked = parked_.find(e->id);
        const auto deadline = parked->second.deadline;
        if (deadline && *deadline <= now) {
          due.emplace_back(it->first, unpark(l, parked));
          e = l.entries.erase(e);
          continue;
        }
        if (deadline && (!next_deadline || *deadline < *next_deadline)) next_deadline = deadline;
        ++e;
      }
      it = touched_then_next(it);
    }
    for (auto& [lane, request] : due)
      expired(lane, request);
    return next_deadline;
  }

  // Every waiting request, lane by lane in order (the node closes); those in flight stay until
  // settled.
  std::vector<Request> take_waiting() {
    std::vector<Request> taken;
    for (auto it = lanes_.begin(); it != lanes_.end();) {
      auto& l = it->second;
      for (auto e = l.entries.begin(); e != l.entries.end();) {
        if (e->what == state::in_flight) {
          ++e;
          continue;
        }
        taken.push_back(unpark(l, parked_.find(e->id)));
        e = l.entries.erase(e);
      }
      it = touched_then_next(it);
    }
    return taken;
  }

  std::size_t waiting() const noexcept { return parked_.size(); }
  // Lanes with an unsettled request (for tests: settled lanes are forgotten).
  std::size_t lanes() const noexcept { return lanes_.size(); }

 private:
  enum class state : std::uint8_t {
    in_flight,  // sent on `route`
    waiting,    // to go on its lane's route, in its turn
    pinned,     // to go on `route` (an ASK's target), in its turn
    stalled,    // waits for routes_renewed()
  };
  struct entry {
    ticket id;
    state what;
    route_id route;  // in_flight, pinned
  };
  struct lane_state {
    // Unsettled, in the order issued (a resend keeps its place); most lanes hold one or two.
    boost::container::small_vector<entry, 3> entries;
    std::size_t waiting = 0;  // entries not in flight, each in parked_
    bool dirty = false;       // in dirty_: something in it may go

    bool all_in_flight_on(route_id route) const noexcept {
      for (const auto& e : entries) {
        if (e.route != route) return false;
      }
      return true;
    }
  };
  // Open addressing: a lane opened and forgotten per request (most requests have a slot to
  // themselves) allocates nothing, and a lookup hashes a slot number with no division.
  using lane_map = boost::unordered_flat_map<lane_id, lane_state>;

  void resend_as(lane_id lane, ticket id, state what, route_id route, Request request) {
    const auto found = lanes_.find(lane);
    if (found == lanes_.end()) return;
    for (auto& e : found->second.entries) {
      if (e.id != id || e.what != state::in_flight) continue;
      e.what = what;
      e.route = route;
      park(found->second, id, std::move(request));
      mark(lane, found->second);
      return;
    }
  }

  template <class RouteOf>
  std::optional<ready> first_ready(lane_id lane, lane_state& l, RouteOf& route_of) {
    if (l.waiting == 0) return std::nullopt;
    std::optional<route_id> earlier;  // the one route of every earlier request, all in flight
    bool mixed = false;
    for (auto& e : l.entries) {
      if (e.what == state::in_flight) {
        mixed = mixed || (earlier && *earlier != e.route);
        earlier = e.route;
        continue;
      }
      // The first waiting request decides: nothing behind it may pass it.
      if (e.what == state::stalled) return std::nullopt;
      const route_id route = e.what == state::pinned ? e.route : route_of(lane);
      if (mixed || (earlier && *earlier != route)) return std::nullopt;
      e.what = state::in_flight;
      e.route = route;
      return ready{lane, e.id, route, unpark(l, parked_.find(e.id))};
    }
    return std::nullopt;
  }

  void park(lane_state& l, ticket id, Request request) {
    parked_.emplace(id, std::move(request));
    ++l.waiting;
  }
  Request unpark(lane_state& l, typename std::unordered_map<ticket, Request>::iterator parked) {
    Request request = std::move(parked->second);
    parked_.erase(parked);
    --l.waiting;
    return request;
  }
  void unpark(lane_state& l, ticket id) { unpark(l, parked_.find(id)); }

  void mark(lane_id lane, lane_state& l) {
    if (l.dirty) return;
    l.dirty = true;
    dirty_.push_back(lane);
  }

  // After a change to a lane: forgotten when empty, else looked at by the next next(). Erasing
  // a lane moves no other, so a loop over the lanes may go on from the one after it.
  void touched(typename lane_map::iterator it) {
    if (it->second.entries.empty()) {
      lanes_.erase(it);
    } else if (it->second.waiting > 0) {
      mark(it->first, it->second);
    }
  }
  typename lane_map::iterator touched_then_next(typename lane_map::iterator it) {
    const auto after = std::next(it);
    touched(it);
    return after;
  }

  // Valid until the next lane is opened: a new lane may move the others.
  lane_state& lane_state_of(lane_id lane) { return lanes_.try_emplace(lane).first->second; }

  lane_map lanes_;
  std::unordered_map<ticket, Request> parked_;  // the requests of the entries not in flight
  std::vector<lane_id> dirty_;                  // lanes whose first waiting request may go
  ticket last_ticket_ = 0;
};

}  // namespace redlock::detail

#endif
