// INDEX checks of a sharded checkpoint (index_check.h).
#include "verify/ours/index_check.h"

#include <algorithm>
#include <cctype>
#include <limits>
#include <set>

#include "ckpt/base/hash.h"
#include "ckpt/store/box_index.h"
#include "ckpt/store/commit_index.h"

namespace ckpt::verify {

namespace {
constexpr uint64_t kMaxIndexBytes = 4ull << 30;
}  // namespace

IndexCheck check_index(Env* env, const std::string& step_dir, const CommitRecord& rec,
                       const std::vector<std::string>& damaged) {
  IndexCheck c;
  const CommitFile* listed = nullptr;
  for (const CommitFile& f : rec.files) {
    if (f.name == store::kIndexFileName) listed = &f;
  }
  if (listed == nullptr) return c;
  c.present = true;
  const std::string path = path_join(step_dir, store::kIndexFileName);
  auto size = env->file_size(path);
  if (!size.is_ok()) {
    c.problems.push_back(path +
                         ": missing (COMMIT.json lists it): the boxes of the sharded "
                         "tensors cannot be found");
    return c;
  }
  if (*size != listed->bytes || listed->bytes > kMaxIndexBytes) {
    c.problems.push_back(path + ": " + std::to_string(*size) + " bytes, COMMIT.json says " +
                         std::to_string(listed->bytes));
    return c;
  }
  auto bytes = env->read_all(path, kMaxIndexBytes);
  if (!bytes.is_ok()) {
    c.problems.push_back(bytes.status().message());
    return c;
  }
  const uint64_t h = xxh3_64(bytes->data(), bytes->size());
  if (h != listed->xxh3) {
    c.problems.push_back(path + ": xxh3 of the file is " + hex64(h) + ", COMMIT.json says " +
                         hex64(listed->xxh3));
    return c;
  }
  auto index = store::decode_index(*bytes, path);
  if (!index.is_ok()) {
    c.problems.push_back(index.status().message());
    return c;
  }
  // What a restoring rank checks the head it reads alone against: wrong here, every restore of
  // this checkpoint that reads the head alone refuses it.
  if (listed->regions_xxh3 && index->version() >= 2 &&
      store::index_head_xxh3(*bytes) != *listed->regions_xxh3) {
    c.problems.push_back(path + ": xxh3 of its head is " + hex64(store::index_head_xxh3(*bytes)) +
                         ", COMMIT.json says " + hex64(*listed->regions_xxh3));
    return c;
  }
  c.decoded = true;
  c.tensors = index->tensor_count();
  c.boxes = index->box_count();
  c.files = index->file_count();
  const store::TilingReport tiling = store::check_index_tiling(*index);
  c.tiled = tiling.ok();
  for (const store::TilingFinding& f : tiling.findings)
    c.problems.push_back(path + ": boxes do not tile: " + f.message);
  if (tiling.left_off > 0)
    c.problems.push_back(path + ": " + std::to_string(tiling.left_off) + " more tiling problems");

  const std::set<std::string> known(damaged.begin(), damaged.end());
  for (uint32_t f = 0; f < index->file_count(); ++f) {
    const std::string name(index->file_name(f));
    const CommitFile* entry = nullptr;
    for (const CommitFile& cf : rec.files) {
      if (cf.name == name) entry = &cf;
    }
    auto fsize = env->file_size(path_join(step_dir, name));
    std::string why;
    if (entry == nullptr)
      why = "the index names it, COMMIT.json does not list it";
    else if (!fsize.is_ok())
      why = "missing";
    else if (*fsize != entry->bytes)
      why = std::to_string(*fsize) + " bytes, COMMIT.json says " + std::to_string(entry->bytes);
    else if (known.count(name) != 0)
      why = "damaged";
    if (why.empty()) continue;
    c.damaged_files.push_back(name);
    if (why != "damaged") c.problems.push_back(path_join(step_dir, name) + ": " + why);
  }
  if (!c.damaged_files.empty()) {
    auto loss = store::account_loss(*index, c.damaged_files);
    if (loss.is_ok()) {
      c.loss = std::move(*loss);
      c.loss_lines = c.loss.lines(std::numeric_limits<size_t>::max());
      for (const std::string& line : c.loss_lines) c.problems.push_back(path + ": " + line);
    }
  }
  c.index = std::make_shared<const store::GlobalIndex>(std::move(*index));
  return c;
}

std::vector<std::string> rank_files_named(const std::vector<std::string>& problems) {
  std::set<std::string> names;
  for (const std::string& p : problems) {
    for (size_t at = p.find("rank-"); at != std::string::npos; at = p.find("rank-", at + 1)) {
      const size_t end = p.find(".h5", at);
      if (end == std::string::npos) break;
      const std::string digits = p.substr(at + 5, end - at - 5);
      if (digits.size() == 5 && std::all_of(digits.begin(), digits.end(), ::isdigit))
        names.insert(p.substr(at, end + 3 - at));
    }
  }
  return {names.begin(), names.end()};
}

}  // namespace ckpt::verify
