#include "server/engine_service.h"

#include "kvcache/page_layout.h"
#include "server/api_error.h"
#include "util/error.h"

namespace oscar {

std::optional<RequestOutput> RequestStream::next(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mutex_);
  if (!ready_.wait_for(lock, timeout, [&] { return !outputs_.empty(); })) return std::nullopt;
  RequestOutput output = std::move(outputs_.front());
  outputs_.pop_front();
  return output;
}

void RequestStream::push(RequestOutput output) {
  {
    const std::lock_guard lock(mutex_);
    outputs_.push_back(std::move(output));
  }
  ready_.notify_all();
}

RequestId RequestStream::wait_accepted() {
  std::unique_lock lock(mutex_);
  ready_.wait(lock, [&] { return accepted_ || rejection_.has_value(); });
  if (rejection_) throw invalid_request(*rejection_);
  return id_;
}

EngineService::EngineService(std::unique_ptr<Engine> engine, ServerMetrics& metrics)
    : engine_(std::move(engine)), metrics_(metrics) {
  snapshot_.kv_description = describe(engine_->backend().kv_config());
  publish_snapshot();
  thread_ = std::thread([this] { loop(); });
}

EngineService::~EngineService() {
  {
    const std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  work_.notify_all();
  thread_.join();
}

std::vector<std::shared_ptr<RequestStream>> EngineService::submit(
    std::vector<GenerationRequest> requests) {
  std::vector<std::shared_ptr<RequestStream>> streams;
  {
    // All in one admission: one at a time, each would wait for a step of the loop.
    const std::lock_guard lock(mutex_);
    if (stopping_) throw ApiError(503, "server_shutting_down", "the server is shutting down");
    for (GenerationRequest& request : requests) {
      auto stream = std::make_shared<RequestStream>();
      stream->submitted_ = std::chrono::steady_clock::now();
      pending_.emplace_back(std::move(request), stream);
      streams.push_back(std::move(stream));
    }
  }
  work_.notify_all();
  std::optional<ApiError> refused;
  std::vector<RequestId> accepted;
  for (const auto& stream : streams) {
    try {
      accepted.push_back(stream->wait_accepted());
    } catch (const ApiError& error) {
      if (!refused) refused = error;
    }
  }
  if (refused) {
    for (const RequestId id : accepted) cancel(id);
    throw *refused;
  }
  return streams;
}

void EngineService::cancel(RequestId id) {
  {
    const std::lock_guard lock(mutex_);
    cancellations_.push_back(id);
  }
  work_.notify_all();
}

void EngineService::reset_prefix_cache() {
  std::future<void> done;
  {
    const std::lock_guard lock(mutex_);
    if (stopping_) throw ApiError(503, "server_shutting_down", "the server is shutting down");
    done = prefix_cache_resets_.emplace_back().get_future();
  }
  work_.notify_all();
  done.wait();
}

EngineSnapshot EngineService::snapshot() const {
  const std::lock_guard lock(mutex_);
  return snapshot_;
}

void EngineService::admit_pending() {
  std::vector<std::pair<GenerationRequest, std::shared_ptr<RequestStream>>> pending;
  std::vector<RequestId> cancellations;
  std::vector<std::promise<void>> resets;
  {
    const std::lock_guard lock(mutex_);
    pending.swap(pending_);
    cancellations.swap(cancellations_);
    resets.swap(prefix_cache_resets_);
  }
  for (auto& [request, stream] : pending) {
    const int64_t prompt_tokens = int64_t(request.prompt.size());
    try {
      const RequestId id = engine_->submit(std::move(request));
      streams_[id] = stream;
      {
        const std::lock_guard lock(stream->mutex_);
        stream->id_ = id;
        stream->accepted_ = true;
      }
      const std::lock_guard lock(mutex_);
      snapshot_.prompt_tokens += prompt_tokens;
    } catch (const std::exception& error) {
      const std::lock_guard lock(stream->mutex_);
      stream->rejection_ = error.what();
      metrics_.count_request("rejected");
    }
    stream->ready_.notify_all();
  }
  for (const RequestId id : cancellations) engine_->cancel(id);
  if (!resets.empty()) {
    engine_->reset_prefix_cache();
    publish_snapshot();
    for (std::promise<void>& reset : resets) reset.set_value();
  }
}

void EngineService::run_step() {
  const std::vector<RequestOutput> outputs = engine_->step();
  const auto now = std::chrono::steady_clock::now();
  int64_t tokens = 0;
  for (const RequestOutput& output : outputs) {
    const auto it = streams_.find(output.id);
    if (it == streams_.end()) continue;
    RequestStream& stream = *it->second;
    if (!output.tokens.empty()) {
      const double since = std::chrono::duration<double>(
                               now - (stream.has_token_ ? stream.last_token_ : stream.submitted_))
                               .count();
      if (stream.has_token_) {
        metrics_.observe_inter_token_latency(since / double(output.tokens.size()));
      } else {
        metrics_.observe_time_to_first_token(since);
      }
      stream.has_token_ = true;
      stream.last_token_ = now;
      tokens += int64_t(output.tokens.size());
    }
  }
  recent_tokens_.emplace_back(now, tokens);
  // The snapshot first: a client that has its last token and then reads /metrics must find the
  // step counted (its tokens, the request no longer running).
  publish_snapshot();
  deliver(outputs);
}

void EngineService::deliver(const std::vector<RequestOutput>& outputs) {
  for (const RequestOutput& output : outputs) {
    const auto it = streams_.find(output.id);
    if (it == streams_.end()) continue;
    if (output.finished) {
      metrics_.count_request(output.finish_reason == FinishReason::error       ? "error"
                             : output.finish_reason == FinishReason::cancelled ? "cancelled"
                                                                               : "ok");
    }
    it->second->push(output);
    if (output.finished) streams_.erase(it);
  }
}

void EngineService::abort_in_flight(const std::string& error) {
  deliver(engine_->abort_all(error));
  publish_snapshot();
}

void EngineService::publish_snapshot() {
  const KvPagePools& pools = engine_->pools();
  const Scheduler& scheduler = engine_->scheduler();
  const PageLayout& layout = engine_->backend().page_layout();
  // Bits per element count the running requests' own pages: the pools also hold the cached
  // prefixes of finished requests, which are no bytes of the tokens counted here.
  int64_t tokens = 0;
  KvPageCounts held;
  for (const Sequence* sequence : scheduler.running()) {
    tokens += sequence->pages.num_tokens();
    for (const LogicalPage& page : sequence->pages.pages()) {
      held.full += page.full >= 0 ? 1 : 0;
      held.quantized += page.quantized >= 0 ? 1 : 0;
      held.band += page.band >= 0 ? 1 : 0;
    }
  }
  const auto now = std::chrono::steady_clock::now();
  while (!recent_tokens_.empty() && now - recent_tokens_.front().first > std::chrono::seconds(10)) {
    recent_tokens_.pop_front();
  }
  int64_t recent = 0;
  for (const auto& [time, count] : recent_tokens_) recent += count;
  const std::lock_guard lock(mutex_);
  snapshot_.backend_failure = engine_->backend().failure();
  snapshot_.running = int64_t(scheduler.running().size());
  snapshot_.waiting = int64_t(scheduler.waiting().size());
  snapshot_.full_pages_used = pools.full.used_pages();
  snapshot_.full_pages_free = pools.full.free_pages();
  snapshot_.quantized_pages_used = pools.quantized.used_pages();
  snapshot_.quantized_pages_free = pools.quantized.free_pages();
  snapshot_.band_pages_used = pools.band.used_pages();
  snapshot_.band_pages_free = pools.band.free_pages();
  snapshot_.bits_per_element = tokens > 0 ? bits_per_element(layout, held, tokens) : 0.0;
  snapshot_.kv_cache_usage = engine_->kv_cache_usage();
  snapshot_.generated_tokens = engine_->counters().generated_tokens;
  snapshot_.cached_prompt_tokens = engine_->counters().cached_prompt_tokens;
  snapshot_.preemptions = scheduler.preemptions();
  snapshot_.tokens_per_second = recent_tokens_.empty() ? 0.0 : double(recent) / 10.0;
}

void EngineService::loop() {
  while (true) {
    {
      std::unique_lock lock(mutex_);
      work_.wait_for(lock, std::chrono::milliseconds(50), [&] {
        return stopping_ || !pending_.empty() || !cancellations_.empty() ||
               !prefix_cache_resets_.empty() || !engine_->idle();
      });
      if (stopping_) break;
    }
    // The engine ends a request whose own work fails with an error; whatever escapes it belongs to
    // no one request, and ends those in flight, never the server.
    try {
      admit_pending();
      if (engine_->idle()) {
        publish_snapshot();
        continue;
      }
      run_step();
    } catch (const std::exception& error) {
      abort_in_flight(fmt::format("the engine failed: {}", error.what()));
    }
  }
  // Shutting down: every request still in flight ends as cancelled.
  for (auto& [id, stream] : streams_) {
    RequestOutput output;
    output.id = id;
    output.finished = true;
    output.finish_reason = FinishReason::cancelled;
    stream->push(output);
  }
  const std::lock_guard lock(mutex_);
  for (auto& [request, stream] : pending_) {
    const std::lock_guard stream_lock(stream->mutex_);
    stream->rejection_ = "the server is shutting down";
    stream->ready_.notify_all();
  }
  for (std::promise<void>& reset : prefix_cache_resets_) reset.set_value();
}

}  // namespace oscar
