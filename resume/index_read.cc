#include "resume/index_read.h"

#include <algorithm>

#include "ckpt/base/hash.h"
#include "ckpt/store/commit_index.h"

namespace ckpt::resume {
namespace {

std::string unlisted_index(const std::string& step_dir) {
  return step_dir +
         ": no INDEX in COMMIT.json (a format version 1 checkpoint holds no sharded tensors)";
}

// Bytes [offset, offset + n) of the INDEX: from `have` (the bytes at 0 already read) where they
// lie in it, else read.
struct IndexFile {
  const RandomAccessFile& file;
  std::string have;
  IndexReadStats* stats;

  Result<std::string> read(uint64_t offset, uint64_t n) {
    if (offset + n <= have.size()) return have.substr(offset, n);
    ++stats->reads;
    stats->bytes += n;
    return file.read_string(offset, n);
  }
};

}  // namespace

Result<std::string> read_listed(Env* env, const std::string& step_dir, const CommitRecord& record,
                                const std::string& name, const std::string& unlisted) {
  const std::string path = path_join(step_dir, name);
  const auto listed = std::find_if(record.files.begin(), record.files.end(),
                                   [&](const CommitFile& f) { return f.name == name; });
  if (listed == record.files.end()) return not_found(unlisted);
  CKPT_ASSIGN_OR_RETURN(std::string bytes, env->read_all(path, listed->bytes + 1));
  if (bytes.size() != listed->bytes) {
    return corrupt(path + ": " + std::to_string(bytes.size()) + " bytes, the commit record says " +
                   std::to_string(listed->bytes));
  }
  const uint64_t got = xxh3_64(bytes.data(), bytes.size());
  if (got != listed->xxh3) {
    return corrupt(path + ": xxh3 of the file is " + hex64(got) + ", the commit record says " +
                   hex64(listed->xxh3));
  }
  return bytes;
}

Result<store::GlobalIndex> read_index_for(Env* env, const std::string& step_dir,
                                          const CommitRecord& record,
                                          const std::vector<TargetBox>& targets,
                                          const IndexReadOptions& options, IndexReadStats* stats) {
  IndexReadStats local;
  IndexReadStats& st = stats != nullptr ? *stats : local;
  st = IndexReadStats{};
  const std::string path = path_join(step_dir, store::kIndexFileName);
  const auto listed =
      std::find_if(record.files.begin(), record.files.end(),
                   [](const CommitFile& f) { return f.name == store::kIndexFileName; });
  if (listed == record.files.end()) return not_found(unlisted_index(step_dir));
  st.file_bytes = listed->bytes;
  auto whole = [&]() -> Result<store::GlobalIndex> {
    st.whole = true;
    st.reads = 1;
    st.bytes = listed->bytes;
    CKPT_ASSIGN_OR_RETURN(
        std::string bytes,
        read_listed(env, step_dir, record, store::kIndexFileName, unlisted_index(step_dir)));
    return store::decode_index(bytes, path);
  };
  if (!listed->regions_xxh3 || listed->bytes < options.whole_below) return whole();

  CKPT_ASSIGN_OR_RETURN(std::unique_ptr<RandomAccessFile> opened, env->open_random(path));
  if (opened->size() != listed->bytes) {
    return corrupt(path + ": " + std::to_string(opened->size()) +
                   " bytes, the commit record says " + std::to_string(listed->bytes));
  }
  IndexFile f{*opened, {}, &st};
  CKPT_ASSIGN_OR_RETURN(
      f.have,
      f.read(0, std::min<uint64_t>(std::max<uint64_t>(options.first_read, 64), listed->bytes)));
  auto head_bytes = store::index_head_bytes(f.have, listed->bytes, path);
  if (head_bytes.status().code() == Code::kUnsupported) return whole();  // index version 1
  CKPT_RETURN_IF_ERROR(head_bytes.status());
  if (*head_bytes > f.have.size()) {
    CKPT_ASSIGN_OR_RETURN(std::string rest, f.read(f.have.size(), *head_bytes - f.have.size()));
    f.have += rest;
  }
  const std::string head = f.have.substr(0, *head_bytes);
  const uint64_t got = xxh3_64(head.data(), head.size());
  if (got != *listed->regions_xxh3) {
    return corrupt(path + ": xxh3 of its head (" + std::to_string(head.size()) + " bytes) is " +
                   hex64(got) + ", the commit record says " + hex64(*listed->regions_xxh3));
  }
  CKPT_ASSIGN_OR_RETURN(store::GlobalIndex index, store::decode_index_head(head, path));

  // The records the targets need, in file order, close ones read together.
  CKPT_ASSIGN_OR_RETURN(std::vector<TouchedBox> met, boxes_for_targets(index, targets));
  struct Want {
    uint64_t offset;
    TouchedBox box;
  };
  std::vector<Want> want;
  want.reserve(met.size());
  for (const TouchedBox& tb : met) {
    want.push_back({index.record_offset(index.tensor(tb.tensor), tb.box), tb});
  }
  std::sort(want.begin(), want.end(),
            [](const Want& a, const Want& b) { return a.offset < b.offset; });
  for (size_t i = 0; i < want.size();) {
    size_t j = i + 1;
    uint64_t end = want[i].offset + store::kIndexRecordBytes;
    while (j < want.size() && want[j].offset <= end + options.merge_gap) {
      end = want[j].offset + store::kIndexRecordBytes;
      ++j;
    }
    CKPT_ASSIGN_OR_RETURN(std::string run, f.read(want[i].offset, end - want[i].offset));
    const auto* p = reinterpret_cast<const unsigned char*>(run.data());
    for (size_t k = i; k < j; ++k) {
      CKPT_RETURN_IF_ERROR(index.load_record(want[k].box.tensor, want[k].box.box,
                                             p + (want[k].offset - want[i].offset), path));
    }
    i = j;
  }
  return index;
}

}  // namespace ckpt::resume
