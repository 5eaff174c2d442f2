#include "ckpt/io/env.h"

#include <cstring>

namespace ckpt {
namespace {

Status truncated(const std::string& name, uint64_t offset, uint64_t n, uint64_t size) {
  return corrupt(name + ": truncated: need bytes [" + std::to_string(offset) + ", " +
                 std::to_string(offset + n) + ") but the file has " + std::to_string(size));
}

class MemoryFile final : public RandomAccessFile {
 public:
  MemoryFile(std::string name, std::string bytes)
      : name_(std::move(name)), bytes_(std::move(bytes)) {}
  Status read_at(uint64_t offset, void* dst, size_t n) const override {
    if (!range_inside(offset, n, bytes_.size())) return truncated(name_, offset, n, size());
    if (n > 0) std::memcpy(dst, bytes_.data() + offset, n);
    count_read(n);
    return Status::ok();
  }
  uint64_t size() const override { return bytes_.size(); }
  const std::string& path() const override { return name_; }

 private:
  std::string name_;
  std::string bytes_;
};

}  // namespace

std::unique_ptr<RandomAccessFile> memory_file(std::string name, std::string bytes) {
  return std::make_unique<MemoryFile>(std::move(name), std::move(bytes));
}

Status WritableFile::write_gather_at(uint64_t offset, const WriteSpan* spans, size_t count) {
  for (size_t k = 0; k < count; ++k) {
    CKPT_RETURN_IF_ERROR(write_at(offset, spans[k].src, spans[k].nbytes));
    offset += spans[k].nbytes;
  }
  return Status::ok();
}

Status RandomAccessFile::read_scatter_at(uint64_t offset, const ReadSpan* spans,
                                         size_t count) const {
  uint64_t total = 0;
  for (size_t k = 0; k < count; ++k) total += spans[k].nbytes;
  if (!range_inside(offset, total, size())) return truncated(path(), offset, total, size());
  for (size_t k = 0; k < count; ++k) {
    CKPT_RETURN_IF_ERROR(read_at(offset, spans[k].dst, spans[k].nbytes));
    offset += spans[k].nbytes;
  }
  return Status::ok();
}

Status RandomAccessFile::read_visiting(uint64_t offset, void* dst, size_t n, ByteVisitor visit,
                                       void* arg) const {
  CKPT_RETURN_IF_ERROR(read_at(offset, dst, n));
  if (n != 0) visit(static_cast<const unsigned char*>(dst), n, arg);
  return Status::ok();
}

Result<std::string> RandomAccessFile::read_string(uint64_t offset, size_t len) const {
  if (!range_inside(offset, len, size())) return truncated(path(), offset, len, size());
  std::string s(len, '\0');
  CKPT_RETURN_IF_ERROR(read_at(offset, s.data(), len));
  return s;
}

std::vector<std::string> Env::list_dir_or_empty(const std::string& dir) {
  auto names = list_dir(dir);
  return names.is_ok() ? std::move(names).value() : std::vector<std::string>{};
}

Result<std::string> Env::read_whole(const std::string& path, uint64_t max_bytes) {
  CKPT_ASSIGN_OR_RETURN(auto file, open_random(path));
  if (file->size() > max_bytes) {
    return corrupt(path + ": " + std::to_string(file->size()) + " bytes, more than the " +
                   std::to_string(max_bytes) + " allowed for this kind of file");
  }
  std::string out(file->size(), '\0');
  CKPT_RETURN_IF_ERROR(file->read_at(0, out.data(), out.size()));
  return out;
}

Status write_synced(Env* env, const std::string& path, const std::string& contents) {
  Status written = [&]() -> Status {
    CKPT_ASSIGN_OR_RETURN(auto f, env->new_writable(path));
    CKPT_RETURN_IF_ERROR(f->append(contents.data(), contents.size()));
    CKPT_RETURN_IF_ERROR(f->sync());
    return f->close();
  }();
  if (!written.is_ok() && env->exists(path)) (void)env->remove_file(path);
  return written;
}

Status Env::write_atomic(const std::string& path, const std::string& contents) {
  const std::string tmp = path + ".tmp";
  CKPT_RETURN_IF_ERROR(write_synced(this, tmp, contents));  // a full disk leaves no .tmp behind
  CKPT_RETURN_IF_ERROR(rename(tmp, path));
  return sync_dir(path_dirname(path));
}

std::string path_join(const std::string& a, const std::string& b) {
  if (a.empty()) return b;
  if (b.empty()) return a;
  if (a.back() == '/') return a + b;
  return a + "/" + b;
}

std::string path_dirname(const std::string& p) {
  auto pos = p.find_last_of('/');
  if (pos == std::string::npos) return ".";
  if (pos == 0) return "/";
  return p.substr(0, pos);
}

std::string path_basename(const std::string& p) {
  auto pos = p.find_last_of('/');
  return pos == std::string::npos ? p : p.substr(pos + 1);
}

}  // namespace ckpt
