#include "backend/cuda/nccl_group.h"

#include <cstdlib>
#include <cstring>
#include <exception>
#include <string_view>
#include <thread>

#include "backend/cuda/cuda_check.h"
#include "util/error.h"

#if OSCAR_HAVE_NCCL
#include <nccl.h>
// Windows registered for NCCL's symmetric kernels (ncclCommWindowRegister) came in NCCL 2.27.
#define OSCAR_NCCL_WINDOWS (NCCL_VERSION_CODE >= NCCL_VERSION(2, 27, 0))
#endif

namespace oscar::cuda {

#if OSCAR_HAVE_NCCL

struct NcclGroup::Comm {
  ncclComm_t comm = nullptr;
  void* window_memory = nullptr;  // the reduce window (ncclMemAlloc), registered on every rank
  size_t window_bytes = 0;
#if OSCAR_NCCL_WINDOWS
  ncclWindow_t window = nullptr;
#endif
};

namespace {

using Clock = std::chrono::steady_clock;
// How often a wait asks whether a peer failed (a socket poll each time).
constexpr auto kPeerCheckInterval = std::chrono::milliseconds(2);

void check_nccl(ncclResult_t result, const char* what) {
  if (result == ncclSuccess || result == ncclInProgress) return;
  fail("{}: {} ({})", what, ncclGetErrorString(result), ncclGetLastError(nullptr));
}

}  // namespace

bool nccl_available() {
  return true;
}

UniqueId make_nccl_unique_id() {
  static_assert(sizeof(ncclUniqueId) == kUniqueIdBytes);
  ncclUniqueId id;
  check_nccl(ncclGetUniqueId(&id), "ncclGetUniqueId");
  UniqueId bytes;
  std::memcpy(bytes.data(), &id, sizeof id);
  return bytes;
}

NcclGroup::NcclGroup(GpuGroup options)
    : options_(std::move(options)), comm_(std::make_unique<Comm>()) {
  require(options_.world_size >= 1 && options_.rank >= 0 && options_.rank < options_.world_size,
          "NCCL group: rank {} of {} ranks", options_.rank, options_.world_size);
  // Every connection at creation, none made lazily by the first collective of a kind: that one
  // may be inside a graph capture. A user's own setting wins.
  ::setenv("NCCL_RUNTIME_CONNECT", "0", 0);
  ncclUniqueId id;
  std::memcpy(&id, options_.unique_id.data(), sizeof id);
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;  // so that joining can be watched and abandoned (wait_for_nccl)
  check_nccl(ncclCommInitRankConfig(&comm_->comm, options_.world_size, id, options_.rank, &config),
             "ncclCommInitRankConfig");
  wait_for_nccl("joining the NCCL group");
}

// Abort, not destroy: ncclCommDestroy finalizes first, which may wait for peers, and a rank
// that ends on an error must not wait for the others. The abort releases the window's
// registration; its memory goes after.
NcclGroup::~NcclGroup() {
  if (std::uncaught_exceptions() > 0 && options_.leaving_on_error) options_.leaving_on_error();
  if (comm_->comm != nullptr) ncclCommAbort(comm_->comm);
  if (comm_->window_memory != nullptr) ncclMemFree(comm_->window_memory);
}

void NcclGroup::fail_group(const std::string& cause) {
  if (comm_->comm != nullptr) ncclCommAbort(comm_->comm);
  comm_->comm = nullptr;
  failure_ = cause;
  fail("tensor-parallel rank {}: {}", options_.rank, cause);
}

// Throws (after aborting the communicator) when NCCL reported an error, a peer failed or the
// deadline passed; else returns whether NCCL still has work of a non-blocking call in progress.
bool NcclGroup::check_group(const char* what, std::chrono::steady_clock::time_point deadline) {
  ncclResult_t state = ncclSuccess;
  check_nccl(ncclCommGetAsyncError(comm_->comm, &state), "ncclCommGetAsyncError");
  if (state != ncclSuccess && state != ncclInProgress) {
    fail_group(fmt::format("{}: NCCL error: {} ({})", what, ncclGetErrorString(state),
                           ncclGetLastError(comm_->comm)));
  }
  if (options_.peer_failure) {
    if (const std::string cause = options_.peer_failure(); !cause.empty()) {
      fail_group(fmt::format("{}: {}", what, cause));
    }
  }
  if (Clock::now() > deadline) {
    fail_group(fmt::format("{}: no answer from every rank within {} s", what,
                           options_.timeout.count() / 1000.0));
  }
  return state == ncclInProgress;
}

// A non-blocking communicator's call may return before its work is enqueued; the next call must
// wait until NCCL reports it done.
void NcclGroup::wait_for_nccl(const char* what) {
  const auto deadline = Clock::now() + options_.timeout;
  while (check_group(what, deadline)) std::this_thread::sleep_for(std::chrono::microseconds(200));
}

void NcclGroup::enqueue_all_reduce(void* values, int64_t count, bool bf16, cudaStream_t stream) {
  require(failure_.empty(), "the tensor-parallel group ended: {}", failure_);
  const ncclResult_t result =
      ncclAllReduce(values, values, size_t(count), bf16 ? ncclBfloat16 : ncclFloat32, ncclSum,
                    comm_->comm, stream);
  check_nccl(result, "ncclAllReduce");
  if (result == ncclInProgress) wait_for_nccl("ncclAllReduce");
}

void NcclGroup::all_reduce_sum(float* values, int64_t count, cudaStream_t stream) {
  enqueue_all_reduce(values, count, false, stream);
}

void NcclGroup::all_reduce_sum_bf16(void* values, int64_t count, cudaStream_t stream) {
  enqueue_all_reduce(values, count, true, stream);
}

float* NcclGroup::reduce_window(int64_t count) {
  require(failure_.empty(), "the tensor-parallel group ended: {}", failure_);
  const size_t bytes = size_t(count) * sizeof(float);
  if (comm_->window_memory != nullptr) {
    require(bytes <= comm_->window_bytes,
            "NCCL group: the reduce window holds {} bytes, {} were asked for", comm_->window_bytes,
            bytes);
    return static_cast<float*>(comm_->window_memory);
  }
#if OSCAR_NCCL_WINDOWS
  const char* setting = std::getenv("OSCAR_NCCL_SYMMETRIC");
  if (setting != nullptr && std::string_view(setting) == "0") return nullptr;
  int version = 0;  // the library's, which may be older than the headers
  check_nccl(ncclGetVersion(&version), "ncclGetVersion");
  if (version < NCCL_VERSION(2, 27, 0)) return nullptr;
  check_nccl(ncclMemAlloc(&comm_->window_memory, bytes), "ncclMemAlloc (the reduce window)");
  comm_->window_bytes = bytes;
  check_nccl(ncclCommWindowRegister(comm_->comm, comm_->window_memory, bytes, &comm_->window,
                                    NCCL_WIN_COLL_SYMMETRIC),
             "ncclCommWindowRegister (OSCAR_NCCL_SYMMETRIC=0 runs without the window)");
  wait_for_nccl("registering the reduce window with NCCL");
  return static_cast<float*>(comm_->window_memory);
#else
  return nullptr;
#endif
}

void NcclGroup::all_gather(float* gathered, int64_t count, cudaStream_t stream) {
  require(failure_.empty(), "the tensor-parallel group ended: {}", failure_);
  const ncclResult_t result = ncclAllGather(gathered + options_.rank * count, gathered,
                                            size_t(count), ncclFloat32, comm_->comm, stream);
  check_nccl(result, "ncclAllGather");
  if (result == ncclInProgress) wait_for_nccl("ncclAllGather");
}

// Polls instead of cudaStreamSynchronize, which would wait forever for a collective whose peer
// is gone.
void NcclGroup::synchronize(cudaStream_t stream, const char* what) {
  require(failure_.empty(), "the tensor-parallel group ended: {}", failure_);
  const auto start = Clock::now();
  const auto deadline = start + options_.timeout;
  auto next_peer_check = start + kPeerCheckInterval;
  while (true) {
    const cudaError_t status = cudaStreamQuery(stream);
    if (status == cudaSuccess) return;
    if (status != cudaErrorNotReady) check(status, what);
    const auto now = Clock::now();
    if (now < next_peer_check) {
      std::this_thread::yield();
      continue;
    }
    next_peer_check = now + kPeerCheckInterval;
    check_group(what, deadline);
  }
}

#else  // built without NCCL

struct NcclGroup::Comm {};

namespace {
[[noreturn]] void refuse() {
  fail(
      "tensor parallelism on GPUs needs NCCL, and this oscar was built without it (nccl.h and "
      "libnccl were not found when it was configured)");
}
}  // namespace

bool nccl_available() {
  return false;
}
UniqueId make_nccl_unique_id() {
  refuse();
}
NcclGroup::NcclGroup(GpuGroup options) : options_(std::move(options)) {
  refuse();
}
NcclGroup::~NcclGroup() = default;
void NcclGroup::fail_group(const std::string& cause) {
  fail("{}", cause);
}
bool NcclGroup::check_group(const char*, std::chrono::steady_clock::time_point) {
  refuse();
}
void NcclGroup::wait_for_nccl(const char*) {
  refuse();
}
void NcclGroup::all_reduce_sum(float*, int64_t, cudaStream_t) {
  refuse();
}
void NcclGroup::all_gather(float*, int64_t, cudaStream_t) {
  refuse();
}
void NcclGroup::enqueue_all_reduce(void*, int64_t, bool, cudaStream_t) {
  refuse();
}
void NcclGroup::all_reduce_sum_bf16(void*, int64_t, cudaStream_t) {
  refuse();
}
float* NcclGroup::reduce_window(int64_t) {
  refuse();
}
void NcclGroup::synchronize(cudaStream_t, const char*) {
  refuse();
}

#endif

}  // namespace oscar::cuda
