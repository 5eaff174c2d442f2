#include "ckpt/dist/process_group.h"

#include <torch/torch.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

#include "ckpt/dist/dist_compat.h"

namespace ckpt::dist {
namespace {

std::string who(const ProcessGroupOptions& o) {
  return "rank " + std::to_string(o.rank) + " of " + std::to_string(o.world_size);
}

// Publishes the picked port: temp file, then rename, so a reader never sees a partial number.
Status write_port_file(const std::string& path, uint16_t port) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << port << "\n";
    out.flush();
    if (!out) return io_error("cannot write the port file " + tmp + ": " + std::strerror(errno));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    return io_error("cannot rename " + tmp + " to " + path + ": " + std::strerror(errno));
  }
  return Status::ok();
}

// Polls `path` until rank 0 has published a port in it, or the deadline passes.
Result<uint16_t> read_port_file(const std::string& path, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::string last;
  while (true) {
    std::ifstream in(path);
    if (in) {
      std::stringstream ss;
      ss << in.rdbuf();
      last = ss.str();
      char* end = nullptr;
      const long v = std::strtol(last.c_str(), &end, 10);
      if (end != last.c_str() && (*end == '\n' || *end == '\0') && v > 0 && v < 65536) {
        return static_cast<uint16_t>(v);
      }
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      return io_error("port file " + path +
                      (last.empty() ? " did not appear" : " holds \"" + last + "\", not a port") +
                      " within " + std::to_string(timeout.count()) +
                      " ms (is rank 0 running, with the same --port-file?)");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

}  // namespace

struct ProcessGroupContext::Impl {
  c10::intrusive_ptr<::c10d::TCPStore> store;
  c10::intrusive_ptr<::c10d::ProcessGroupGloo> group;
};

ProcessGroupContext::ProcessGroupContext(ProcessGroupOptions options)
    : options_(std::move(options)), impl_(std::make_unique<Impl>()) {}

ProcessGroupContext::~ProcessGroupContext() {
  // The group's worker threads finish (or time out on) queued work before the store goes away.
  impl_->group.reset();
  impl_->store.reset();
}

Result<std::unique_ptr<ProcessGroupContext>> ProcessGroupContext::create(
    ProcessGroupOptions options) {
  if (options.world_size < 1 || options.rank < 0 || options.rank >= options.world_size) {
    return invalid_argument("process group: rank " + std::to_string(options.rank) +
                            " is outside world size " + std::to_string(options.world_size));
  }
  if (options.port == 0 && options.port_file.empty()) {
    return invalid_argument(
        "process group: port 0 (pick a free one) needs a port file to "
        "publish it to the other ranks");
  }
  if (options.timeout.count() <= 0) {
    return invalid_argument("process group: timeout must be positive, got " +
                            std::to_string(options.timeout.count()) + " ms");
  }
  std::unique_ptr<ProcessGroupContext> ctx(new ProcessGroupContext(std::move(options)));
  const ProcessGroupOptions& o = ctx->options_;
  uint16_t port = o.port;
  if (port == 0 && o.rank != 0) {
    CKPT_ASSIGN_OR_RETURN(port, read_port_file(o.port_file, o.timeout));
  }
  const std::string where = who(o) + ", store " + o.master_addr + ":";
  try {
    ctx->impl_->store = c10::make_intrusive<::c10d::TCPStore>(
        o.master_addr, compat::make_store_options(o.rank == 0, port, o.world_size, o.timeout));
    ctx->port_ = ctx->impl_->store->getPort();
  } catch (const std::exception& e) {
    return io_error("process group: " + where + std::to_string(port) + ": cannot " +
                    (o.rank == 0 ? "host" : "reach") + " the store: " + compat::describe(e));
  }
  if (o.port == 0 && o.rank == 0) {
    CKPT_RETURN_IF_ERROR(write_port_file(o.port_file, ctx->port_));
  }
  try {
    auto gloo_options = compat::make_gloo_options(compat::make_device(o.master_addr), o.timeout);
    ctx->impl_->group = c10::make_intrusive<::c10d::ProcessGroupGloo>(
        c10::static_intrusive_pointer_cast<::c10d::Store>(ctx->impl_->store), o.rank, o.world_size,
        gloo_options);
  } catch (const std::exception& e) {
    return io_error("process group: " + where + std::to_string(ctx->port_) +
                    ": the Gloo rendezvous did not complete within " +
                    std::to_string(o.timeout.count()) + " ms: " + compat::describe(e));
  }
  return ctx;
}

Status ProcessGroupContext::run_collective(const std::string& what,
                                           const std::function<void()>& body) {
  if (!broken_.is_ok()) return broken_;
  try {
    body();
    return Status::ok();
  } catch (const std::exception& e) {
    broken_ = io_error("process group: " + what + " failed on " + who(options_) +
                       " (a peer died, hung or left early; timeout " +
                       std::to_string(options_.timeout.count()) + " ms): " + compat::describe(e));
    return broken_;
  }
}

Status ProcessGroupContext::barrier() {
  return run_collective("barrier", [&] {
    ::c10d::BarrierOptions opts;
    opts.timeout = options_.timeout;
    impl_->group->barrier(opts)->wait(options_.timeout);
  });
}

Status ProcessGroupContext::allreduce_mean(std::vector<at::Tensor>& tensors) {
  if (!broken_.is_ok()) return broken_;
  if (tensors.empty()) return Status::ok();
  const c10::ScalarType dtype =
      tensors.front().defined() ? tensors.front().scalar_type() : c10::ScalarType::Undefined;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const at::Tensor& t = tensors[i];
    if (!t.defined() || !t.device().is_cpu() || !at::isFloatingType(t.scalar_type()) ||
        t.scalar_type() != dtype) {
      return invalid_argument(
          "allreduce_mean: tensor " + std::to_string(i) + " is " +
          (t.defined() ? std::string(c10::toString(t.scalar_type())) + " on " + t.device().str()
                       : std::string("undefined")) +
          "; expected defined CPU tensors of one floating dtype (" +
          (dtype == c10::ScalarType::Undefined ? "none" : c10::toString(dtype)) + ")");
    }
  }
  return run_collective("allreduce_mean of " + std::to_string(tensors.size()) + " tensors", [&] {
    // One flat buffer: a single Gloo call (Gloo reduces several inputs only when they are
    // per-device copies of one tensor), and a fixed element order.
    std::vector<at::Tensor> flat_views;
    flat_views.reserve(tensors.size());
    for (const at::Tensor& t : tensors) flat_views.push_back(t.detach().reshape({-1}));
    std::vector<at::Tensor> buffer = {at::cat(flat_views)};
    ::c10d::AllreduceOptions opts;
    opts.reduceOp = ::c10d::ReduceOp::SUM;
    opts.timeout = options_.timeout;
    impl_->group->allreduce(buffer, opts)->wait(options_.timeout);
    buffer[0].div_(options_.world_size);
    int64_t offset = 0;
    at::NoGradGuard no_grad;
    for (at::Tensor& t : tensors) {
      const int64_t n = t.numel();
      t.copy_(buffer[0].narrow(0, offset, n).view(t.sizes()));
      offset += n;
    }
  });
}

Result<std::vector<std::vector<int64_t>>> ProcessGroupContext::allgather(
    const std::vector<int64_t>& values) {
  std::vector<std::vector<int64_t>> rows(static_cast<size_t>(options_.world_size));
  const int w = options_.world_size;
  auto gather_fixed = [&](const at::Tensor& mine, std::vector<at::Tensor>* out) {
    std::vector<std::vector<at::Tensor>> outputs(1);
    for (int r = 0; r < w; ++r) outputs[0].push_back(at::empty_like(mine));
    std::vector<at::Tensor> inputs = {mine};
    ::c10d::AllgatherOptions opts;
    opts.timeout = options_.timeout;
    impl_->group->allgather(outputs, inputs, opts)->wait(options_.timeout);
    *out = std::move(outputs[0]);
  };
  CKPT_RETURN_IF_ERROR(run_collective("allgather", [&] {
    // Lengths first, so ranks may pass different lengths: Gloo's allgather needs equal sizes.
    std::vector<at::Tensor> lengths;
    gather_fixed(at::full({1}, static_cast<int64_t>(values.size()), at::kLong), &lengths);
    int64_t longest = 0;
    for (const at::Tensor& l : lengths) longest = std::max(longest, l.item<int64_t>());
    at::Tensor mine = at::zeros({std::max<int64_t>(longest, 1)}, at::kLong);
    std::copy(values.begin(), values.end(), mine.data_ptr<int64_t>());
    std::vector<at::Tensor> gathered;
    gather_fixed(mine, &gathered);
    for (int r = 0; r < w; ++r) {
      const int64_t n = lengths[static_cast<size_t>(r)].item<int64_t>();
      const int64_t* p = gathered[static_cast<size_t>(r)].data_ptr<int64_t>();
      rows[static_cast<size_t>(r)].assign(p, p + n);
    }
  }));
  return rows;
}

}  // namespace ckpt::dist
