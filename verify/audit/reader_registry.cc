#include "verify/audit/reader_registry.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <mutex>

#include "verify/formats/builtin_readers.h"

namespace ckpt::verify {
namespace {

std::vector<std::unique_ptr<FormatReader>>& table() {
  static std::vector<std::unique_ptr<FormatReader>> readers;
  return readers;
}

std::mutex& table_mutex() {
  static std::mutex m;
  return m;
}

void add_builtins_once() {
  static std::once_flag once;
  std::call_once(once, [] {
    std::vector<std::unique_ptr<FormatReader>> builtins;
    builtins.push_back(make_torch_file_reader());
    builtins.push_back(make_safetensors_reader());
    builtins.push_back(make_hf_folder_reader());
    builtins.push_back(make_dcp_reader());
    builtins.push_back(make_deepspeed_reader());
    builtins.push_back(make_megatron_reader());
    std::lock_guard<std::mutex> lock(table_mutex());
    auto& t = table();
    t.insert(t.begin(), std::make_move_iterator(builtins.begin()),
             std::make_move_iterator(builtins.end()));
  });
}

}  // namespace

void register_reader(std::unique_ptr<FormatReader> reader) {
  std::lock_guard<std::mutex> lock(table_mutex());
  table().push_back(std::move(reader));
}

const std::vector<std::unique_ptr<FormatReader>>& registered_readers() {
  add_builtins_once();
  return table();
}

Result<CheckpointView> read_checkpoint(const std::string& path, const ReadOptions& options) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    int e = errno;
    std::string msg = path + ": cannot open: " + std::strerror(e);
    return e == ENOENT || e == ENOTDIR ? not_found(msg) : io_error(msg);
  }
  // Readers probe by reading; one that cannot read must not make "permission denied" look like
  // "not a checkpoint". O_NONBLOCK: opening a FIFO must not wait for a writer.
  const int fd = ::open(
      path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | (S_ISDIR(st.st_mode) ? O_DIRECTORY : 0));
  if (fd < 0) return io_error(path + ": cannot open: " + std::strerror(errno));
  ::close(fd);
  const FormatReader* best = nullptr;
  int best_score = 0;
  for (const auto& r : registered_readers()) {
    int s = r->probe(path);
    if (s > best_score) {
      best_score = s;
      best = r.get();
    }
  }
  if (best == nullptr) {
    return corrupt(
        path +
        ": not a checkpoint: no reader recognises it (expected a torch.save file, "
        "safetensors, an HF/Accelerate folder, a DCP, DeepSpeed or Megatron folder or a ckpt run)");
  }
  return best->read(path, options);
}

}  // namespace ckpt::verify
