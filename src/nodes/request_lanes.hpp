#ifndef REDLOCK_NODES_REQUEST_LANES_HPP
#define REDLOCK_NODES_REQUEST_LANES_HPP

#include <boost/container/small_vector.hpp>

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
    auto& l = lanes_.open(lane);
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
    lane_state* const l = lanes_.find(lane);
    if (!l) return;
    auto& entries = l->entries;
    for (auto it = entries.begin(); it != entries.end(); ++it) {
      if (it->id != id) continue;
      if (it->what != state::in_flight) unpark(*l, id);
      entries.erase(it);
      break;
    }
    touched(*l);
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
    lanes_.for_each([this](lane_state& l) {
      if (l.waiting == 0) return;
      for (auto& e : l.entries) {
        if (e.what == state::stalled) e.what = state::waiting;
      }
      mark(l);
    });
  }

  struct ready {
    lane_id lane = 0;
    ticket id = 0;
    route_id route = 0;
    Request request;
  };
  // Whether next() may find a request that may go: false when no lane changed since it last
  // found none (the common case after a settle).
  bool may_have_ready() const noexcept { return !dirty_.empty(); }

  // The next waiting request that may go now (rule 3), now in flight on the route it takes; none
  // when nothing may. `route_of(lane)` is the lane's route now.
  template <class RouteOf>
  std::optional<ready> next(RouteOf&& route_of) {
    while (!dirty_.empty()) {
      const lane_id lane = dirty_.back();
      if (lane_state* const l = lanes_.find(lane)) {
        if (auto go = first_ready(lane, *l, route_of)) return go;
        l->dirty = false;
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
    lanes_.for_each([&](lane_state& l) {
      for (auto e = l.entries.begin(); l.waiting > 0 && e != l.entries.end();) {
        if (e->what == state::in_flight) {
          ++e;
          continue;
        }
        const auto parked = parked_.find(e->id);
        const auto deadline = parked->second.deadline;
        if (deadline && *deadline <= now) {
          due.emplace_back(l.lane, unpark(l, parked));
          e = l.entries.erase(e);
          continue;
        }
        if (deadline && (!next_deadline || *deadline < *next_deadline)) next_deadline = deadline;
        ++e;
      }
      touched(l);
    });
    for (auto& [lane, request] : due)
      expired(lane, request);
    return next_deadline;
  }

  // Every waiting request, lane by lane in order (the node closes); those in flight stay until
  // settled.
  std::vector<Request> take_waiting() {
    std::vector<Request> taken;
    lanes_.for_each([&](lane_state& l) {
      for (auto e = l.entries.begin(); e != l.entries.end();) {
        if (e->what == state::in_flight) {
          ++e;
          continue;
        }
        taken.push_back(unpark(l, parked_.find(e->id)));
        e = l.entries.erase(e);
      }
      touched(l);
    });
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
    lane_id lane = 0;
    // Unsettled, in the order issued (a resend keeps its place); most lanes hold one or two.
    boost::container::small_vector<entry, 3> entries;
    std::size_t waiting = 0;  // entries not in flight, each in parked_
    bool open = false;        // in use by `lane`; else a free place of lane_table
    bool dirty = false;       // in dirty_: something in it may go

    bool all_in_flight_on(route_id route) const noexcept {
      for (const auto& e : entries) {
        if (e.route != route) return false;
      }
      return true;
    }
  };
  // The open lanes, found by id with no hashing: lane ids are small numbers (a hash slot), so a
  // table by id (which grows to the largest id used: 64 KB for a cluster's slots) names each open
  // lane's place. Most requests open a lane of their own and forget it when settled; the next one
  // takes its place, so nothing is allocated in steady state.
  class lane_table {
   public:
    lane_state* find(lane_id lane) noexcept {
      if (lane >= place_of_.size() || place_of_[lane] == 0) return nullptr;
      return &places_[place_of_[lane] - 1];
    }
    // Valid until the next lane is opened: a new place may move the others.
    lane_state& open(lane_id lane) {
      if (lane_state* const l = find(lane)) return *l;
      if (lane >= place_of_.size()) place_of_.resize(std::size_t{lane} + 1, 0);
      std::uint32_t place;
      if (!free_.empty()) {
        place = free_.back();
        free_.pop_back();
      } else {
        // close() never allocates: room for every place to be free, reserved first (a failure
        // leaves no place outside both lists) and in doubling steps.
        if (free_.capacity() <= places_.size()) free_.reserve(2 * places_.size() + 8);
        places_.emplace_back();
        place = static_cast<std::uint32_t>(places_.size() - 1);
      }
      lane_state& l = places_[place];
      l.lane = lane;
      l.open = true;
      place_of_[lane] = place + 1;
      return l;
    }
    // `l` (empty) is forgotten; no other lane moves.
    void close(lane_state& l) noexcept {
      place_of_[l.lane] = 0;
      l.open = false;
      l.dirty = false;
      free_.push_back(static_cast<std::uint32_t>(&l - places_.data()));
    }
    // Calls `f(lane_state&)` for each open lane; `f` may close the lane it is given.
    template <class F>
    void for_each(F&& f) {
      for (auto& l : places_) {
        if (l.open) f(l);
      }
    }
    std::size_t size() const noexcept { return places_.size() - free_.size(); }

   private:
    std::vector<std::uint32_t> place_of_;  // by lane id: its place + 1, or 0 when not open
    std::vector<lane_state> places_;
    std::vector<std::uint32_t> free_;  // places not open
  };

  void resend_as(lane_id lane, ticket id, state what, route_id route, Request request) {
    lane_state* const l = lanes_.find(lane);
    if (!l) return;
    for (auto& e : l->entries) {
      if (e.id != id || e.what != state::in_flight) continue;
      e.what = what;
      e.route = route;
      park(*l, id, std::move(request));
      mark(*l);
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

  void mark(lane_state& l) {
    if (l.dirty) return;
    l.dirty = true;
    dirty_.push_back(l.lane);
  }

  // After a change to a lane: forgotten when empty (a loop over the lanes may go on: no other
  // lane moves), else looked at by the next next().
  void touched(lane_state& l) {
    if (l.entries.empty()) {
      lanes_.close(l);
    } else if (l.waiting > 0) {
      mark(l);
    }
  }

  lane_table lanes_;
  std::unordered_map<ticket, Request> parked_;  // the requests of the entries not in flight
  std::vector<lane_id> dirty_;                  // lanes whose first waiting request may go
  ticket last_ticket_ = 0;
};

}  // namespace redlock::detail

#endif
