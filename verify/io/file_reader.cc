#include "verify/io/file_reader.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace ckpt::verify {

Result<std::unique_ptr<FileReader>> FileReader::open(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    int e = errno;
    std::string msg = path + ": cannot open: " + std::strerror(e);
    if (e == ENOENT || e == ENOTDIR) return not_found(msg);
    return io_error(msg);
  }
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    int e = errno;
    ::close(fd);
    return io_error(path + ": cannot stat: " + std::strerror(e));
  }
  if (S_ISDIR(st.st_mode)) {
    ::close(fd);
    return invalid_argument(path + ": is a directory, expected a file");
  }
  std::unique_ptr<FileReader> r(new FileReader());
  r->name_ = path;
  r->fd_ = fd;
  r->size_ = static_cast<uint64_t>(st.st_size);
  return r;
}

std::unique_ptr<FileReader> FileReader::from_bytes(std::string name, std::string bytes) {
  std::unique_ptr<FileReader> r(new FileReader());
  r->name_ = std::move(name);
  r->memory_ = std::move(bytes);
  r->size_ = r->memory_.size();
  return r;
}

FileReader::~FileReader() {
  if (fd_ >= 0) ::close(fd_);
}

Status FileReader::read_at(uint64_t offset, size_t len, void* out) const {
  if (!range_inside(offset, len, size_)) {
    return corrupt(name_ + ": truncated: need " + std::to_string(len) + " bytes at offset " +
                   std::to_string(offset) + ", file has " + std::to_string(size_));
  }
  if (len == 0) return Status::ok();
  if (fd_ < 0) {
    std::memcpy(out, memory_.data() + offset, len);
    bytes_read_ += len;
    return Status::ok();
  }
  char* p = static_cast<char*>(out);
  size_t done = 0;
  while (done < len) {
    ssize_t n = ::pread(fd_, p + done, len - done, static_cast<off_t>(offset + done));
    if (n < 0) {
      if (errno == EINTR) continue;
      return io_error(name_ + ": read failed at offset " + std::to_string(offset + done) + ": " +
                      std::strerror(errno));
    }
    if (n == 0) {
      return corrupt(name_ + ": truncated while reading at offset " +
                     std::to_string(offset + done));
    }
    done += static_cast<size_t>(n);
  }
  bytes_read_ += len;
  return Status::ok();
}

Result<std::string> FileReader::read_string(uint64_t offset, size_t len) const {
  if (!range_inside(offset, len, size_)) {
    return corrupt(name_ + ": truncated: need " + std::to_string(len) + " bytes at offset " +
                   std::to_string(offset) + ", file has " + std::to_string(size_));
  }
  std::string s(len, '\0');
  CKPT_RETURN_IF_ERROR(read_at(offset, len, s.data()));
  return s;
}

}  // namespace ckpt::verify
