#include "parallel/tcp_bootstrap.h"

#include <unistd.h>

#include <fmt/ranges.h>

#include "parallel/rank_messages.h"
#include "util/error.h"

namespace oscar {
namespace {

constexpr uint32_t kProtocolVersion = 1;

std::string this_host_name() {
  char name[256] = {};
  ::gethostname(name, sizeof(name) - 1);
  return name;
}

// A rank's record, as the hello and the welcome's table carry it.
void put_rank(ByteWriter& out, const RankInfo& info) {
  out.put(int32_t(info.rank));
  out.put(int32_t(info.node_rank));
  out.put(int32_t(info.local_rank));
  out.put(info.process_id);
  out.put_string(info.host_name);
}

RankInfo get_rank(ByteReader& in) {
  RankInfo info;
  info.rank = in.get<int32_t>();
  info.node_rank = in.get<int32_t>();
  info.local_rank = in.get<int32_t>();
  info.process_id = in.get<int64_t>();
  info.host_name = in.get_string();
  return info;
}

std::vector<std::byte> encode_hello(const DistributedOptions& options, const RankInfo& me) {
  ByteWriter out;
  out.put(kProtocolVersion);
  out.put(int32_t(options.tensor_parallel_size));
  out.put(int32_t(options.nnodes));
  put_rank(out, me);
  return std::move(out.bytes);
}

// A follower's hello, checked against rank 0's view of the job.
RankInfo decode_hello(const Frame& frame, const DistributedOptions& options,
                      const std::vector<bool>& arrived) {
  ByteReader in(frame.payload, "bootstrap hello");
  const auto version = in.get<uint32_t>();
  require(version == kProtocolVersion,
          "bootstrap: a rank speaks protocol version {}, rank 0 version {} (mixed oscar builds)",
          version, kProtocolVersion);
  const auto tp = in.get<int32_t>();
  const auto nnodes = in.get<int32_t>();
  const RankInfo info = get_rank(in);
  in.expect_end();
  require(tp == options.tensor_parallel_size && nnodes == options.nnodes,
          "bootstrap: rank {} on {} was started with --tensor-parallel-size {} --nnodes {}, rank 0 "
          "with {} and {}",
          info.rank, info.host_name, tp, nnodes, options.tensor_parallel_size, options.nnodes);
  require(info.rank > 0 && info.rank < tp, "bootstrap: a peer on {} claims rank {} of {}",
          info.host_name, info.rank, tp);
  require(!arrived[size_t(info.rank)],
          "bootstrap: rank {} connected twice (the second from {}, pid {}): two processes were "
          "given the same --node-rank",
          info.rank, info.host_name, info.process_id);
  return info;
}

std::vector<std::byte> encode_welcome(const RankLinks& links) {
  ByteWriter out;
  out.put_bytes(links.unique_id);
  out.put(uint32_t(links.ranks.size()));
  for (const RankInfo& info : links.ranks) put_rank(out, info);
  return std::move(out.bytes);
}

void decode_welcome(const Frame& frame, RankLinks& links) {
  ByteReader in(frame.payload, "bootstrap welcome");
  in.get_bytes(links.unique_id);
  const auto count = in.get<uint32_t>();
  require(int(count) == links.world_size, "bootstrap: rank 0 sent a table of {} ranks, not {}",
          count, links.world_size);
  links.ranks.resize(count);
  for (RankInfo& info : links.ranks) info = get_rank(in);
  in.expect_end();
}

void lead_bootstrap(const DistributedOptions& options, RankLinks& links) {
  const Deadline deadline = deadline_after(options.timeout);
  TcpSocket listener = listen_on(options.init_address, links.world_size);
  std::vector<TcpSocket> sockets(size_t(links.world_size));
  std::vector<bool> arrived(size_t(links.world_size));
  arrived[0] = true;
  for (int connected = 1; connected < links.world_size; ++connected) {
    std::vector<int> missing;
    for (int r = 1; r < links.world_size; ++r)
      if (!arrived[size_t(r)]) missing.push_back(r);
    const std::string waiting =
        fmt::format("bootstrap: rank 0 at {}:{} waited {} ms for rank(s) {} of {}",
                    options.init_address.host, options.init_address.port, options.timeout.count(),
                    fmt::join(missing, ", "), links.world_size);
    TcpSocket socket = accept_before(listener, deadline, waiting);
    const Frame hello = receive_expected(socket, FrameType::hello, deadline, waiting);
    RankInfo info;
    try {
      info = decode_hello(hello, options, arrived);
    } catch (const Error& e) {
      // Tell the peer why before every rank ends.
      const std::string message = e.what();
      send_frame(socket, FrameType::failure, std::as_bytes(std::span(message)), deadline,
                 "bootstrap peer");
      throw;
    }
    arrived[size_t(info.rank)] = true;
    links.ranks[size_t(info.rank)] = info;
    sockets[size_t(info.rank)] = std::move(socket);
  }
  const std::vector<std::byte> welcome = encode_welcome(links);
  for (int r = 1; r < links.world_size; ++r) {
    send_frame(sockets[size_t(r)], FrameType::welcome, welcome, deadline, describe_rank(links, r));
    links.followers.push_back(std::move(sockets[size_t(r)]));
  }
}

void follow_bootstrap(const DistributedOptions& options, RankLinks& links) {
  const Deadline deadline = deadline_after(options.timeout);
  const std::string leader =
      fmt::format("bootstrap: rank {} (node {}) waiting up to {} ms for rank 0 at {}:{}",
                  links.rank, options.node_rank, options.timeout.count(), options.init_address.host,
                  options.init_address.port);
  links.leader = connect_before(options.init_address, deadline, leader);
  send_frame(links.leader, FrameType::hello, encode_hello(options, links.ranks[size_t(links.rank)]),
             deadline, leader);
  decode_welcome(receive_expected(links.leader, FrameType::welcome, deadline, leader), links);
}

}  // namespace

void check_distributed_options(const DistributedOptions& options) {
  require(options.tensor_parallel_size >= 1, "--tensor-parallel-size must be at least 1 (got {})",
          options.tensor_parallel_size);
  require(options.nnodes >= 1, "--nnodes must be at least 1 (got {})", options.nnodes);
  require(options.tensor_parallel_size % options.nnodes == 0,
          "--tensor-parallel-size {} is not a multiple of --nnodes {}: every node runs the same "
          "number of ranks",
          options.tensor_parallel_size, options.nnodes);
  require(options.node_rank >= 0 && options.node_rank < options.nnodes,
          "--node-rank {} outside 0..{} (--nnodes {})", options.node_rank, options.nnodes - 1,
          options.nnodes);
  require(options.timeout.count() > 0, "the rank timeout must be positive");
}

int ranks_per_node(const DistributedOptions& options) {
  return options.tensor_parallel_size / options.nnodes;
}

int global_rank(const DistributedOptions& options, int local_rank) {
  require(local_rank >= 0 && local_rank < ranks_per_node(options),
          "local rank {} outside the {} ranks of a node", local_rank, ranks_per_node(options));
  return options.node_rank * ranks_per_node(options) + local_rank;
}

RankLinks bootstrap_ranks(const DistributedOptions& options, int local_rank,
                          const UniqueId* unique_id) {
  check_distributed_options(options);
  RankLinks links;
  links.rank = global_rank(options, local_rank);
  links.world_size = options.tensor_parallel_size;
  links.timeout = options.timeout;
  links.ranks.resize(size_t(links.world_size));
  RankInfo& me = links.ranks[size_t(links.rank)];
  me = {links.rank, options.node_rank, local_rank, int64_t(::getpid()), this_host_name()};
  if (links.world_size == 1) return links;
  if (links.rank == 0) {
    require(unique_id != nullptr, "bootstrap: rank 0 needs the job's unique id to send");
    links.unique_id = *unique_id;
    lead_bootstrap(options, links);
  } else {
    follow_bootstrap(options, links);
  }
  return links;
}

std::string describe_rank(const RankLinks& links, int rank) {
  const RankInfo& info = links.ranks.at(size_t(rank));
  return fmt::format("rank {} (node {}, {} pid {})", rank, info.node_rank, info.host_name,
                     info.process_id);
}

}  // namespace oscar
