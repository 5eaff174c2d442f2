#include "profile/recorder/recorder.h"

#include <cerrno>
#include <cstring>

#include "profile/recorder/cpu_sampler.h"
#include "profile/recorder/recorder_file.h"

namespace ckpt::profile {

Result<std::unique_ptr<StepRecorder>> StepRecorder::open(RecorderOptions options) {
  if (options.world_size < 1 || options.rank < 0 || options.rank >= options.world_size) {
    return invalid_argument("profile recorder: need 0 <= rank < world_size, got rank " +
                            std::to_string(options.rank) + " of " +
                            std::to_string(options.world_size));
  }
  if (options.sample_period.count() <= 0) {
    return invalid_argument("profile recorder: sample period must be positive");
  }
  std::unique_ptr<StepRecorder> r(new StepRecorder());
  r->path_ = options.path;
  r->file_ = std::fopen(options.path.c_str(), "w");
  if (r->file_ == nullptr) {
    return io_error(options.path + ": cannot create profile file (" + std::strerror(errno) + ")");
  }
  CpuMeter probe;
  double unix_s =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  std::string header = encode_header(options.rank, options.world_size, probe.cores(), unix_s);
  if (std::fwrite(header.data(), 1, header.size(), r->file_) != header.size() ||
      std::fflush(r->file_) != 0) {
    std::fclose(r->file_);
    r->file_ = nullptr;
    return io_error(options.path + ": cannot write profile header (" + std::strerror(errno) + ")");
  }
  r->step_ = options.first_step;
  r->current_step_.store(options.first_step);
  r->period_ = options.sample_period;
  r->gpu_ = std::move(options.gpu);
  r->origin_ns_ = now_ns();
  r->step_start_ns_ = r->origin_ns_;
  r->since_ = r->origin_ns_;
  r->writer_ = std::thread([p = r.get()] { p->writer_loop(); });
  return r;
}

StepRecorder::~StepRecorder() { (void)close(); }

void StepRecorder::end_step(int64_t samples, int64_t tokens) {
  int64_t now = now_ns();
  if (depth_ > 0) {
    acc_[index(stack_[depth_ - 1])] += now - since_;
    since_ = now;
  }
  StepRecord r;
  r.step = step_;
  r.start_s = double(step_start_ns_ - origin_ns_) * 1e-9;
  r.duration_s = double(now - step_start_ns_) * 1e-9;
  for (int i = 0; i < kNumPhases; ++i) r.phase_s[i] = double(acc_[i]) * 1e-9;
  r.samples = samples;
  r.tokens = tokens;
  r.pageable_h2d = pageable_;
  r.pinned_h2d = pinned_;
  if (gpu_) gpu_->close_step(step_);
  acc_.fill(0);
  pinned_ = pageable_ = 0;
  step_start_ns_ = now;
  ++step_;
  current_step_.store(step_, std::memory_order_relaxed);
  std::lock_guard<std::mutex> lock(mu_);
  pending_.push_back(r);
  ++ended_;
}

// Collecting GPU timings may wait for the device; that is why it happens here and not in
// end_step.
void StepRecorder::write_pending(std::vector<StepRecord>& batch, std::string& buf) {
  buf.clear();
  for (auto& r : batch) {
    if (gpu_) r.gpu_s = gpu_->collect(r.step);
    append_step_line(buf, r);
  }
}

void StepRecorder::writer_loop() {
  CpuMeter meter;
  meter.sample(0);  // the baseline; utilisation needs two readings
  std::vector<StepRecord> batch;
  std::string buf;
  auto next_sample = std::chrono::steady_clock::now() + period_;
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    wake_.wait_until(lock, next_sample, [&] { return stop_ || flush_requested_; });
    bool stopping = stop_;
    flush_requested_ = false;
    batch.swap(pending_);
    uint64_t upto = ended_;
    lock.unlock();

    write_pending(batch, buf);
    auto now = std::chrono::steady_clock::now();
    if (now >= next_sample) {
      double t = double(now_ns() - origin_ns_) * 1e-9;
      if (auto u = meter.sample(t)) {
        CpuSample c{t,
                    u->host_busy,
                    u->host_iowait,
                    u->process_busy,
                    current_step_.load(std::memory_order_relaxed),
                    current_phase_.load(std::memory_order_relaxed)};
        append_cpu_line(buf, c);
      }
      next_sample = now + period_;
    }
    if (stopping) append_end_line(buf, double(now_ns() - origin_ns_) * 1e-9);
    Status st;
    if (!buf.empty() &&
        (std::fwrite(buf.data(), 1, buf.size(), file_) != buf.size() || std::fflush(file_) != 0)) {
      st = io_error(path_ + ": cannot write profile records (" + std::strerror(errno) + ")");
    }
    batch.clear();

    lock.lock();
    if (!st.is_ok() && error_.is_ok()) error_ = st;
    written_n_ = upto;
    written_.notify_all();
    if (stopping) return;
  }
}

Status StepRecorder::flush() {
  std::unique_lock<std::mutex> lock(mu_);
  if (closed_) return error_;
  uint64_t target = ended_;
  flush_requested_ = true;
  wake_.notify_one();
  written_.wait(lock, [&] { return written_n_ >= target; });
  return error_;
}

Status StepRecorder::close() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (closed_) return error_;
    closed_ = true;
    stop_ = true;
  }
  wake_.notify_one();
  if (writer_.joinable()) writer_.join();
  if (file_ != nullptr && std::fclose(file_) != 0 && error_.is_ok()) {
    error_ = io_error(path_ + ": cannot close profile file (" + std::strerror(errno) + ")");
  }
  file_ = nullptr;
  return error_;
}

}  // namespace ckpt::profile
