#include "ckpt/io/fault_injection_env.h"

namespace ckpt {
namespace {

class FaultyWritable final : public WritableFile {
 public:
  FaultyWritable(std::unique_ptr<WritableFile> f, FaultInjectionEnv* env)
      : f_(std::move(f)), env_(env) {}
  Status append(const void* d, size_t n) override {
    CKPT_RETURN_IF_ERROR(env_->tick("append"));
    return f_->append(d, n);
  }
  Status write_at(uint64_t off, const void* d, size_t n) override {
    CKPT_RETURN_IF_ERROR(env_->tick("write"));
    return f_->write_at(off, d, n);
  }
  Status sync() override {
    CKPT_RETURN_IF_ERROR(env_->tick("fsync"));
    return f_->sync();
  }
  Status close() override { return f_->close(); }

 private:
  std::unique_ptr<WritableFile> f_;
  FaultInjectionEnv* env_;
};

}  // namespace

Status FaultInjectionEnv::tick(const std::string& what) {
  ++ops_;
  if (fail_at_ != 0 && ops_ >= fail_at_) {
    return io_error("injected fault at operation " + std::to_string(ops_) + " (" + what + ")");
  }
  return Status::ok();
}

Result<std::unique_ptr<WritableFile>> FaultInjectionEnv::wrap(
    Result<std::unique_ptr<WritableFile>> f) {
  if (!f.is_ok()) return f.status();
  return std::unique_ptr<WritableFile>(new FaultyWritable(std::move(f).value(), this));
}

Result<std::unique_ptr<WritableFile>> FaultInjectionEnv::new_writable(const std::string& path) {
  CKPT_RETURN_IF_ERROR(tick("create " + path));
  return wrap(base_->new_writable(path));
}
Result<std::unique_ptr<WritableFile>> FaultInjectionEnv::open_for_update(const std::string& path) {
  CKPT_RETURN_IF_ERROR(tick("open " + path));
  return wrap(base_->open_for_update(path));
}
Result<std::unique_ptr<WritableFile>> FaultInjectionEnv::open_append(const std::string& path) {
  CKPT_RETURN_IF_ERROR(tick("open " + path));
  return wrap(base_->open_append(path));
}
Status FaultInjectionEnv::rename(const std::string& from, const std::string& to) {
  CKPT_RETURN_IF_ERROR(tick("rename " + from));
  return base_->rename(from, to);
}
Status FaultInjectionEnv::sync_dir(const std::string& dir) {
  CKPT_RETURN_IF_ERROR(tick("fsync " + dir));
  return base_->sync_dir(dir);
}
Status FaultInjectionEnv::make_dirs(const std::string& dir) {
  CKPT_RETURN_IF_ERROR(tick("mkdir " + dir));
  return base_->make_dirs(dir);
}
Status FaultInjectionEnv::remove_file(const std::string& path) {
  CKPT_RETURN_IF_ERROR(tick("unlink " + path));
  return base_->remove_file(path);
}
Status FaultInjectionEnv::remove_tree(const std::string& dir) {
  CKPT_RETURN_IF_ERROR(tick("remove " + dir));
  return base_->remove_tree(dir);
}

}  // namespace ckpt
