#include "ckpt/dist/checkpoint_sync.h"

#include "ckpt/dist/process_group.h"

namespace ckpt::dist {

Status check_agreement(const std::vector<std::vector<int64_t>>& rows,
                       const std::vector<std::string>& names, const std::string& what) {
  if (rows.empty()) return Status::ok();
  for (size_t r = 1; r < rows.size(); ++r) {
    if (rows[r].size() != rows[0].size()) {
      return mismatch(what + ": rank " + std::to_string(r) + " reported " +
                      std::to_string(rows[r].size()) + " values, rank 0 reported " +
                      std::to_string(rows[0].size()));
    }
  }
  for (size_t i = 0; i < rows[0].size(); ++i) {
    bool same = true;
    for (const auto& row : rows) same = same && row[i] == rows[0][i];
    if (same) continue;
    std::string msg = what + ": ranks disagree on " +
                      (i < names.size() ? names[i] : "value " + std::to_string(i)) + ":";
    for (size_t r = 0; r < rows.size(); ++r) {
      msg +=
          (r == 0 ? " rank " : ", rank ") + std::to_string(r) + " = " + std::to_string(rows[r][i]);
    }
    return mismatch(msg);
  }
  return Status::ok();
}

std::function<Status()> checkpoint_barrier(ProcessGroupContext* group, AgreementProbe probe,
                                           std::vector<std::string> names) {
  return [group, probe = std::move(probe), names = std::move(names)]() -> Status {
    if (!probe) return group->barrier();
    CKPT_ASSIGN_OR_RETURN(auto rows, group->allgather(probe()));
    return check_agreement(rows, names, "checkpoint barrier");
  };
}

}  // namespace ckpt::dist
