#include "lock/scripts.hpp"

#include "unsafe_switches.hpp"

#include <fmt/format.h>

#include <string_view>

namespace redlock::detail {

// ARGV[2], when given and not empty, is the channel on which the deletion is announced: with
// PUBLISH, or with SPUBLISH when ARGV[3] is "shard" (a cluster node; the channel is then in the
// key's slot, which a script may reach). The announcement is a courtesy: pcall, so that a user
// whose ACL does not allow publishing on it still releases (its waiters then rely on the TTL
// bound).
const script& release_script() {
  if (has_defect(known_defect::release_without_token)) {  // unsafe: tests only
    static const script unchecked(
        "local deleted = redis.call('DEL', KEYS[1]) "
        "if ARGV[2] and ARGV[2] ~= '' then "
        "redis.pcall(ARGV[3] == 'shard' and 'SPUBLISH' or 'PUBLISH', ARGV[2], KEYS[1]) end "
        "return deleted");
    return unchecked;
  }
  static const script lua(
      "if redis.call('GET', KEYS[1]) == ARGV[1] then "
      "local deleted = redis.call('DEL', KEYS[1]) "
      "if ARGV[2] and ARGV[2] ~= '' then "
      "redis.pcall(ARGV[3] == 'shard' and 'SPUBLISH' or 'PUBLISH', ARGV[2], KEYS[1]) end "
      "return deleted else return 0 end");
  return lua;
}

// SET NX PX, and on refusal the holder's remaining TTL: one request per node for the rounds that
// need both. PTTL through pcall, so that a user whose ACL does not allow it still acquires (its
// refusals then carry no TTL, and waiting falls back to the backoff).
const script& acquire_script() {
  static const script lua(
      "local granted = redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) "
      "if granted then return granted end "
      "local left = redis.pcall('PTTL', KEYS[1]) "
      "if type(left) == 'number' then return left end "
      "return false");
  return lua;
}

// Every fenced script answers with a counter as the text GET reads back, never as INCR's result:
// a script's numbers are Lua doubles, and a counter above 2^53 would come back rounded (near 2^63,
// negative). The text is exact up to the counter's ceiling, 2^63 - 1, where INCR fails and the
// script with it.
const script& fenced_acquire_script() {
  static const script lua(
      "if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then "
      "redis.call('INCR', KEYS[2]) "
      "return {redis.call('GET', KEYS[2])} end "
      "local left = redis.pcall('PTTL', KEYS[1]) "
      "if type(left) == 'number' then return left end "
      "return false");
  return lua;
}

// Counters are compared as decimal strings (no leading zeros: INCR and this script write them),
// by length first: Lua's numbers are doubles, exact only up to 2^53.
const script& fence_write_back_script() {
  static const script lua(
      "local ours "
      "if ARGV[3] == 'member' then ours = redis.call('ZSCORE', KEYS[1], ARGV[1]) "
      "else ours = redis.call('GET', KEYS[1]) == ARGV[1] end "
      "if not ours then return 0 end "
      "local current = redis.call('GET', KEYS[2]) or '0' "
      "if #current < #ARGV[2] or (#current == #ARGV[2] and current < ARGV[2]) then "
      "redis.call('SET', KEYS[2], ARGV[2]) end "
      "return 1");
  return lua;
}

// The refusal is one string, not an array of integers: a client's reply limit counts every value
// of an array (about a hundred bytes each, parsed), and a full semaphore of max_permits slots would
// exceed the default limit. As text it takes at most 21 bytes a slot.
//
// The permits record lives at least as long as any slot key: it is given the TTL of every grant
// (unless it already lives longer) and is extended with every slot lease (extend_script's second
// key). So while anyone holds a permit the record says how many permits its holders count with,
// and once the semaphore is idle it expires, and another size may be used.
const script& semaphore_acquire_script() {
  static const script lua(
      "local permits = tonumber(ARGV[4]) "
      "local record = KEYS[permits + 1] "
      "local recorded = redis.call('GET', record) "
      "if recorded and recorded ~= ARGV[4] then return {'permits', recorded} end "
      "if redis.call('SET', KEYS[tonumber(ARGV[1])], ARGV[2], 'NX', 'PX', ARGV[3]) then "
      "local lives = redis.pcall('PTTL', record) "
      "if type(lives) ~= 'number' or lives < tonumber(ARGV[3]) then "
      "redis.call('SET', record, ARGV[4], 'PX', ARGV[3]) end "
      "if ARGV[5] == '1' then "
      "redis.call('INCR', KEYS[permits + 2]) "
      "return {redis.call('GET', KEYS[permits + 2])} end "
      "return redis.status_reply('OK') end "
      "local left = {} "
      "for i = 1, permits do "
      "local ttl = redis.pcall('PTTL', KEYS[i]) "
      "if type(ttl) ~= 'number' then ttl = -3 end "
      "left[i] = string.format('%d', ttl) end "
      "return table.concat(left, ',')");
  return lua;
}

// Pieces shared by the read-write scripts. Readers' deadlines are on the node's own clock (TIME),
// as PX expiries are: a reader's entry counts for as long as a writer's key of the same TTL would
// live. Scores are whole milliseconds, exact in a double. TIME is allowed before writes: scripts
// replicate their effects (Redis 7), so replicas get the deadlines, not the clock.
namespace {

constexpr std::string_view rw_prelude =
    "local function left(key) "
    "local ms = redis.pcall('PTTL', key) "
    "if type(ms) == 'number' then return ms end "
    "return false end "
    "local function now_ms() "
    "local clock = redis.call('TIME') "
    "return tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000) end "
    // The readers' set expires with its last live entry; ZREMRANGEBYSCORE leaves no empty set.
    "local function keep_readers(key) "
    "local last = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES') "
    "if last[2] then redis.call('PEXPIREAT', key, last[2]) end "
    "return last end "
    "local function announce(channel, shard, message) "
    "if channel and channel ~= '' then "
    "redis.pcall(shard == 'shard' and 'SPUBLISH' or 'PUBLISH', channel, message) end end ";

std::string rw_script_source(std::string_view body) {
  return fmt::format("{}{}", rw_prelude, body);
}

}  // namespace

const script& rw_read_acquire_script() {
  static const script lua(
      rw_script_source("if redis.call('EXISTS', KEYS[1]) == 1 then return left(KEYS[1]) end "
                       "if redis.call('EXISTS', KEYS[3]) == 1 then return left(KEYS[3]) end "
                       "local now = now_ms() "
                       "redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now) "
                       "redis.call('ZADD', KEYS[2], now + tonumber(ARGV[2]), ARGV[1]) "
                       "keep_readers(KEYS[2]) "
                       "if ARGV[3] == '1' then return {redis.call('GET', KEYS[4]) or '0'} end "
                       "return redis.status_reply('OK')"));
  return lua;
}

const script& rw_write_acquire_script() {
  static const script lua(
      rw_script_source("if redis.call('EXISTS', KEYS[1]) == 1 then return left(KEYS[1]) end "
                       "local mark = redis.call('GET', KEYS[3]) "
                       "if mark and mark ~= ARGV[4] then return left(KEYS[3]) end "
                       "local now = now_ms() "
                       "redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now) "
                       "local last = keep_readers(KEYS[2]) "
                       "if last[2] then "
                       "redis.call('SET', KEYS[3], ARGV[4], 'PX', ARGV[2]) "
                       "return {'readers', tonumber(last[2]) - now} end "
                       "redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2]) "
                       "if mark then redis.call('DEL', KEYS[3]) end "
                       "if ARGV[3] == '1' then "
                       "redis.call('INCR', KEYS[4]) "
                       "return {redis.call('GET', KEYS[4])} end "
                       "return redis.status_reply('OK')"));
  return lua;
}

const script& rw_read_extend_script() {
  static const script lua(
      rw_script_source("local deadline = tonumber(redis.call('ZSCORE', KEYS[1], ARGV[1]) or '0') "
                       "local now = now_ms() "
                       "if deadline <= now then "
                       "redis.call('ZREM', KEYS[1], ARGV[1]) "
                       "return 0 end "
                       "redis.call('ZADD', KEYS[1], 'XX', now + tonumber(ARGV[2]), ARGV[1]) "
                       "keep_readers(KEYS[1]) "
                       "return 1"));
  return lua;
}

const script& rw_read_release_script() {
  static const script lua(
      rw_script_source("local deadline = tonumber(redis.call('ZSCORE', KEYS[1], ARGV[1]) or '0') "
                       "if deadline == 0 then return 0 end "
                       "redis.call('ZREM', KEYS[1], ARGV[1]) "
                       "local now = now_ms() "
                       "if redis.call('ZCOUNT', KEYS[1], '(' .. now, '+inf') == 0 then "
                       "announce(ARGV[2], ARGV[3], ARGV[4]) end "
                       "if deadline <= now then return 0 end "
                       "return 1"));
  return lua;
}

const script& rw_write_release_script() {
  static const script lua(rw_script_source(
      "local deleted = 0 "
      "if redis.call('GET', KEYS[1]) == ARGV[1] then deleted = redis.call('DEL', KEYS[1]) end "
      "local unmarked = 0 "
      "if ARGV[5] and ARGV[5] ~= '' and redis.call('GET', KEYS[2]) == ARGV[5] then "
      "unmarked = redis.call('DEL', KEYS[2]) end "
      "if deleted + unmarked > 0 then announce(ARGV[2], ARGV[3], ARGV[4]) end "
      "return deleted"));
  return lua;
}

// The second key, when given, is never created, shortened, or given an expiry it did not have.
const script& extend_script() {
  static const script lua(
      "if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end "
      "local extended = redis.call('PEXPIRE', KEYS[1], ARGV[2]) "
      "if KEYS[2] then "
      "local lives = redis.pcall('PTTL', KEYS[2]) "
      "if type(lives) == 'number' and lives >= 0 and lives < tonumber(ARGV[2]) then "
      "redis.pcall('PEXPIRE', KEYS[2], ARGV[2]) end end "
      "return extended");
  return lua;
}

// A key that cannot be read (another type) answers with its error in its place: the other keys'
// renewals do not fail with it.
const script& batch_extend_script() {
  if (has_defect(known_defect::renewal_without_token)) {  // unsafe: tests only
    static const script unchecked(
        "local extended = {} "
        "for i = 1, #KEYS do "
        "local held = redis.pcall('GET', KEYS[i]) "
        "if type(held) == 'table' then extended[i] = held "
        "elseif held then extended[i] = redis.call('PEXPIRE', KEYS[i], ARGV[2 * i]) "
        "else extended[i] = 0 end end "
        "return extended");
    return unchecked;
  }
  static const script lua(
      "local extended = {} "
      "for i = 1, #KEYS do "
      "local held = redis.pcall('GET', KEYS[i]) "
      "if type(held) == 'table' then extended[i] = held "
      "elseif held == ARGV[2 * i - 1] then "
      "extended[i] = redis.call('PEXPIRE', KEYS[i], ARGV[2 * i]) "
      "else extended[i] = 0 end end "
      "return extended");
  return lua;
}

// A set of locks (client::async_acquire_all): every script below acts on all of its keys or on
// none, so that on one node the set is either wholly ours or not ours. A lock key of the set is
// the same key a single lock of that resource uses: a set and a lock of one of its resources
// exclude each other.
const script& multi_acquire_script() {
  if (has_defect(known_defect::set_checks_first_key_only)) {  // unsafe: tests only
    static const script first_only(
        "local n = #KEYS "
        "if ARGV[3] == '1' then n = n / 2 end "
        "if redis.call('EXISTS', KEYS[1]) == 1 then "
        "local left = redis.pcall('PTTL', KEYS[1]) "
        "if type(left) ~= 'number' then return false end "
        "return left end "
        "for i = 1, n do redis.call('SET', KEYS[i], ARGV[1], 'PX', ARGV[2]) end "
        "if ARGV[3] ~= '1' then return redis.status_reply('OK') end "
        "local counters = {} "
        "for i = 1, n do "
        "redis.call('INCR', KEYS[n + i]) "
        "counters[i] = redis.call('GET', KEYS[n + i]) end "
        "return counters");
    return first_only;
  }
  static const script lua(
      "local n = #KEYS "
      "if ARGV[3] == '1' then n = n / 2 end "
      "local longest = -2 "
      "for i = 1, n do "
      "if redis.call('EXISTS', KEYS[i]) == 1 then "
      "local left = redis.pcall('PTTL', KEYS[i]) "
      "if type(left) ~= 'number' then return false end "
      "if left == -1 then return -1 end "
      "if left > longest then longest = left end end end "
      "if longest ~= -2 then return longest end "
      "for i = 1, n do redis.call('SET', KEYS[i], ARGV[1], 'PX', ARGV[2]) end "
      "if ARGV[3] ~= '1' then return redis.status_reply('OK') end "
      "local counters = {} "
      "for i = 1, n do "
      "redis.call('INCR', KEYS[n + i]) "
      "counters[i] = redis.call('GET', KEYS[n + i]) end "
      "return counters");
  return lua;
}

const script& multi_extend_script() {
  static const script lua(
      "for i = 1, #KEYS do "
      "if redis.call('GET', KEYS[i]) ~= ARGV[1] then return 0 end end "
      "for i = 1, #KEYS do redis.call('PEXPIRE', KEYS[i], ARGV[2]) end "
      "return 1");
  return lua;
}

const script& multi_release_script() {
  static const script lua(
      "local mine = 0 "
      "for i = 1, #KEYS do "
      "if redis.call('GET', KEYS[i]) == ARGV[1] then "
      "redis.call('DEL', KEYS[i]) "
      "mine = mine + 1 "
      "if ARGV[2] and ARGV[2] ~= '' then "
      "redis.pcall(ARGV[3] == 'shard' and 'SPUBLISH' or 'PUBLISH', ARGV[2], KEYS[i]) end end end "
      "if mine == #KEYS then return 1 end "
      "return 0");
  return lua;
}

bool acquire_granted(const resp::value& reply) noexcept {
  if (reply.kind == resp::type::simple_string) return true;
  if (reply.kind != resp::type::array || reply.elements.empty()) return false;
  // Counters are decimal text; a refusal's array starts with a word ("readers", "permits").
  return std::all_of(reply.elements.begin(), reply.elements.end(), [](const resp::value& e) {
    return e.kind == resp::type::bulk_string && !e.text.empty() &&
           std::all_of(e.text.begin(), e.text.end(), [](char c) { return c >= '0' && c <= '9'; });
  });
}

bool some_key_extended(const resp::value& reply) noexcept {
  return reply.kind == resp::type::array &&
         std::any_of(reply.elements.begin(), reply.elements.end(), script_acted);
}

bool script_acted(const resp::value& reply) noexcept {
  return reply.kind == resp::type::integer && reply.integer == 1;
}

const script& release_script_for(hold_kind kind) {
  switch (kind) {
    case hold_kind::reader:
      return rw_read_release_script();
    case hold_kind::writer:
      return rw_write_release_script();
    case hold_kind::set:
      return multi_release_script();
    case hold_kind::lock:
      break;
  }
  return release_script();
}

}  // namespace redlock::detail
