#ifndef REDLOCK_ALGO_INSPECTION_HPP
#define REDLOCK_ALGO_INSPECTION_HPP

#include "redlock/inspection.hpp"
#include "resp/value.hpp"

#include <boost/system/error_code.hpp>

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace redlock::detail {

// Reads every key's value and PTTL in one step per node, so that a key expiring in between cannot
// show as held with no time left, or as free with a token: an array with a {value, pttl} pair per
// key, or the key's error reply (WRONGTYPE: not a string) in its place.
extern const std::string_view read_holdings_script;

// One node's answer to read_holdings_script for `keys` keys, as a holding per key. `ec` and a
// failure's `reply.text` (which names the node) come from the connection; a reply of another shape
// (an error reply for the whole script, say) is every key's failure.
std::vector<node_holding> read_holdings(std::string_view address, boost::system::error_code ec,
                                        const resp::value& reply, std::size_t keys);

// Sets seen.state, holder and held_for from seen.nodes and seen.quorum (inspection::verdict). A
// node that did not answer may hold anything, so free and not_held are only said when no holder
// could have a quorum with those nodes; a key that is not a string counts as another holder's.
void judge(inspection& seen);

}  // namespace redlock::detail

#endif
