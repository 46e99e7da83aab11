#include "lock_handshake.hpp"

#include "lock/scripts.hpp"
#include "resp/encoder.hpp"
#include "token.hpp"

#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

namespace redlock::detail {

namespace {

// What the lock will ask of every node, tried in each handshake on a key of its own that nobody
// uses, so that an ACL user who may not run one of these commands is refused at connect, naming
// the command, instead of the acquire succeeding and its release failing. None of them changes
// anything: SET XX and PEXPIRE and DEL of a missing key do nothing, and the scripts only GET it.
std::vector<connection_options::probe> permission_probes() {
  const std::string key = "redlock:acl-probe:" + make_lock_token();
  const std::string token = make_lock_token();
  const std::string_view keys[] = {key};
  const std::string_view release_args[] = {token};
  const std::string_view extend_args[] = {token, "1"};
  std::vector<connection_options::probe> probes;
  auto add = [&](std::string command, std::initializer_list<std::string_view> parts) {
    std::string encoded;
    resp::encode_command(encoded, parts);
    probes.push_back({std::move(command), std::move(encoded)});
  };
  add("SET", {"SET", key, token, "XX", "PX", "1"});
  probes.push_back({"EVALSHA", encode_evalsha(release_script(), keys, release_args)});
  probes.push_back({"EVALSHA", encode_evalsha(extend_script(), keys, extend_args)});
  add("EVAL", {"EVAL", release_script().source(), "1", key, token});
  add("DEL (called by the release script)", {"DEL", key});
  add("PEXPIRE (called by the extend script)", {"PEXPIRE", key, "1"});
  return probes;
}

}  // namespace

void prepare_for_lock(connection_options& settings) {
  // Loaded at every connect: an extension is never resent after NOSCRIPT (see extend_op), so its
  // script must be in the cache before the first one is written.
  settings.preload = {
      &release_script(),         &extend_script(),           &acquire_script(),
      &fenced_acquire_script(),  &fence_write_back_script(), &semaphore_acquire_script(),
      &rw_read_acquire_script(), &rw_write_acquire_script(), &rw_read_extend_script(),
      &rw_read_release_script(), &rw_write_release_script(), &multi_acquire_script(),
      &multi_extend_script(),    &multi_release_script(),    &batch_extend_script()};
  settings.permission_probes = permission_probes();
}

}  // namespace redlock::detail
