#include "analytics/coverage/checkpoint_cursors.h"

#include <map>

#include "ckpt/io/env.h"
#include "ckpt/loader/sampler_node.h"
#include "ckpt/store/rank_io.h"
#include "ckpt/store/run_dir.h"

namespace ckpt::analytics {
namespace {

std::string cursor_text(const loader::LoaderCursor& c) {
  return "epoch " + std::to_string(c.epoch) + " position " + std::to_string(c.position);
}

// Where the loader stood after each save, by checkpoint name: the cursor after the last step the
// journal logged before that save (an epoch's end reads as the next epoch's start).
std::map<std::string, loader::LoaderCursor> journal_cursors(const RunJournal& journal) {
  std::map<std::string, loader::LoaderCursor> out;
  std::optional<loader::SamplerSpec> spec;
  uint64_t grad_accum = 1;
  std::optional<loader::LoaderCursor> after_last_step;
  for (const auto& e : journal.events) {
    if (e.kind == store::JournalEventType::kStart && e.sampler) {
      spec = e.sampler->spec;
      grad_accum = static_cast<uint64_t>(e.grad_accum);
    } else if (e.kind == store::JournalEventType::kProgress && e.cursor && spec) {
      const uint64_t g = spec->global_batch();
      const uint64_t length = spec->drop_last ? spec->dataset_size / g * g : spec->dataset_size;
      loader::LoaderCursor c{e.cursor->epoch, e.cursor->position + g * grad_accum};
      if (c.position >= length) c = {c.epoch + 1, 0};
      after_last_step = c;
    } else if (e.kind == store::JournalEventType::kSave && after_last_step &&
               !e.checkpoint.empty()) {
      out[e.checkpoint] = *after_last_step;
    }
  }
  return out;
}

}  // namespace

Result<std::vector<CheckpointCursorCheck>> check_checkpoint_cursors(Env* env,
                                                                    const std::string& run_dir,
                                                                    const RunJournal& journal) {
  CKPT_ASSIGN_OR_RETURN(auto entries, store::list_checkpoints(env, run_dir));
  const auto expected = journal_cursors(journal);
  std::vector<CheckpointCursorCheck> out;
  for (const auto& entry : entries) {
    if (!entry.committed) continue;
    CheckpointCursorCheck check;
    check.step = entry.step;
    check.name = step_dir_name(entry.step);
    auto commit = store::read_commit(env, entry.dir);
    if (!commit.is_ok()) {
      check.problem = commit.status().message();
      out.push_back(check);
      continue;
    }
    store::ReadOptions options;
    options.metadata_only = true;
    for (int64_t rank = 0; rank < commit->world_size && check.problem.empty(); ++rank) {
      auto root = store::read_rank(env, entry.dir, rank, options);
      if (!root.is_ok()) {
        check.problem = root.status().message();
        break;
      }
      ++check.ranks;
      const Node* node = root->find_child("loader");
      std::optional<loader::LoaderCursor> cursor;
      if (node != nullptr) {
        auto decoded = loader::sampler_from_node(*node);
        if (!decoded.is_ok()) {
          check.problem = rank_file_name(rank) + ": " + decoded.status().message();
          break;
        }
        cursor = decoded->second;
      }
      if (rank == 0) {
        check.cursor = cursor;
      } else if (cursor != check.cursor) {
        check.ranks_agree = false;
        check.problem = rank_file_name(rank) + " holds another loader cursor than rank 0";
      }
    }
    auto want = expected.find(check.name);
    if (want != expected.end()) check.journal_cursor = want->second;
    if (check.problem.empty()) {
      if (!check.cursor) {
        check.problem = "no loader component: a resume from here restarts the epoch at position 0";
      } else if (check.journal_cursor && *check.cursor != *check.journal_cursor) {
        check.problem = "loader cursor " + cursor_text(*check.cursor) +
                        ", but the journal's last "
                        "step before this save left the loader at " +
                        cursor_text(*check.journal_cursor);
      }
    }
    out.push_back(std::move(check));
  }
  return out;
}

}  // namespace ckpt::analytics
