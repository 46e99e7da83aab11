#include "sim/runtime/sim_timer.hpp"

namespace redlock::sim {

namespace asio = boost::asio;
using boost::system::error_code;

struct sim_timer::wait {
  asio::any_completion_handler<void(error_code)> handler;
  asio::any_io_executor executor;  // the handler's associated one
  world::event_id due{};
  bool done = false;
};

std::size_t sim_timer::cancel() {
  std::size_t cancelled = 0;
  while (!waits_.empty()) {
    finish(waits_.front(), asio::error::operation_aborted, false);
    ++cancelled;
  }
  return cancelled;
}

void sim_timer::start(asio::any_completion_handler<void(error_code)> handler,
                      asio::any_io_executor executor) {
  auto w = std::make_shared<wait>();
  // Swapped in: Boost 1.81's move assignment of any_completion_handler wraps the handler in
  // itself endlessly.
  w->handler.swap(handler);
  w->executor = std::move(executor);
  waits_.push_back(w);
  w->due = world::current().at(expiry_, [this, weak = std::weak_ptr<wait>(w)] {
    if (auto self = weak.lock(); self && !self->done) finish(self, {}, false);
  });
  auto slot = asio::get_associated_cancellation_slot(w->handler);
  if (slot.is_connected()) {
    slot.assign([this, weak = std::weak_ptr<wait>(w)](asio::cancellation_type type) {
      if (type == asio::cancellation_type::none) return;
      if (auto self = weak.lock(); self && !self->done) {
        finish(self, asio::error::operation_aborted, true);
      }
    });
  }
}

void sim_timer::finish(std::shared_ptr<wait> w, error_code ec, bool from_slot) {
  w->done = true;
  world& here = world::current();
  here.cancel(w->due);
  waits_.remove(w);
  auto handler = std::move(w->handler);
  // The slot's handler is the caller when from_slot: it must not be destroyed while it runs.
  auto slot = asio::get_associated_cancellation_slot(handler);
  if (slot.is_connected() && !from_slot) slot.clear();
  // While the world ends, the event loops are being destroyed: nothing may be posted to them.
  if (here.closing()) return;
  asio::post(w->executor, [handler = std::move(handler), ec]() mutable { std::move(handler)(ec); });
}

}  // namespace redlock::sim
