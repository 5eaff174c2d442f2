// From input files to one RankTrace per rank (the layouts PyTorch writes; trace_import.h says the
// rules). What torch really leaves in a trace folder:
//   - one file per rank (the plain case), the rank in distributedInfo or in the name;
//   - tensorboard_trace_handler with schedule(repeat=N): N files per process, named
//     "<worker>.<ms>.pt.trace.json[.gz]" (worker: "<host>_<pid>" unless given), every one with
//     the same distributedInfo.rank;
//   - several captures of one process (two profile() sessions), numbered from step 0 each time;
//   - .json and .json.gz side by side.
// Files of one rank are joined as consecutive windows: ordered by first step number (then by their
// clock), each later window shifted to start where the previous one ended, so the time between
// captures (not in any trace) is neither a pause nor a slow step.
#include <algorithm>
#include <cctype>
#include <map>

#include "profile/import/input_file.h"
#include "profile/import/trace_import.h"
#include "profile/recorder/recorder_file.h"

namespace ckpt::profile {

namespace {

std::string base_name(const std::string& path) {
  size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// "host_123.1700000000123.pt.trace.json.gz" -> "host_123": tensorboard_trace_handler's worker name,
// the part before ".<digits>.pt.trace.json". Empty for other names.
std::string worker_name(const std::string& path) {
  std::string name = base_name(path);
  size_t pt = name.find(".pt.trace.json");
  if (pt == std::string::npos || pt == 0) return "";
  size_t dot = name.rfind('.', pt - 1);
  if (dot == std::string::npos || dot == 0 || dot + 1 >= pt) return "";
  for (size_t i = dot + 1; i < pt; ++i) {
    if (!std::isdigit(static_cast<unsigned char>(name[i]))) return "";
  }
  return name.substr(0, dot);
}

std::string join_names(const std::vector<const RankTrace*>& ts) {
  std::string out;
  for (const RankTrace* t : ts) out += (out.empty() ? "" : ", ") + t->source;
  return out;
}

// Joins the captures of one rank (sorted already) into one trace of consecutive windows.
RankTrace join_captures(std::vector<RankTrace*> parts, std::vector<std::string>& notes) {
  std::stable_sort(parts.begin(), parts.end(), [](const RankTrace* a, const RankTrace* b) {
    int64_t sa = a->steps.empty() ? 0 : a->steps.front().step;
    int64_t sb = b->steps.empty() ? 0 : b->steps.front().step;
    if (sa != sb) return sa < sb;
    // Same first step: Kineto's clock orders captures of one process; the legacy form's clock
    // restarts with each capture, so the order given stands.
    return a->pid >= 0 && b->pid >= 0 && a->origin_s < b->origin_s;
  });
  RankTrace out = std::move(*parts[0]);
  bool overlap = false;
  for (size_t i = 1; i < parts.size(); ++i) {
    RankTrace& p = *parts[i];
    if (!out.steps.empty() && !p.steps.empty() && p.steps.front().step <= out.steps.back().step) {
      overlap = true;
    }
    double shift = out.steps.empty() ? 0 : out.steps.back().start_s + out.steps.back().duration_s;
    for (auto& s : p.steps) {
      s.start_s += shift;
      out.steps.push_back(s);
    }
    for (auto& c : p.cpu) {
      c.t_s += shift;
      out.cpu.push_back(c);
    }
    out.end_s = shift + p.end_s;
    out.clean_end = p.clean_end;
    out.has_gpu |= p.has_gpu;
    out.world_size = std::max(out.world_size, p.world_size);
    if (out.loader_iter.empty()) out.loader_iter = p.loader_iter;
    out.source += " + " + p.source;
  }
  if (overlap) {
    notes.push_back("rank " + std::to_string(out.rank) + ": its captures (" + out.source +
                    ") repeat step numbers (each capture counts from its own start): joined in "
                    "that order as consecutive windows; steps are compared across ranks by "
                    "number, so give one capture per rank for a multi-rank comparison");
  }
  return out;
}

}  // namespace

std::optional<int> rank_from_file_name(const std::string& path) {
  std::string name = base_name(path);
  for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  size_t pos = 0;
  while ((pos = name.find("rank", pos)) != std::string::npos) {
    size_t i = pos + 4;
    while (i < name.size() && (name[i] == '_' || name[i] == '-' || name[i] == '.')) ++i;
    size_t j = i;
    while (j < name.size() && std::isdigit(static_cast<unsigned char>(name[j]))) ++j;
    if (j > i && j - i < 9) return std::stoi(name.substr(i, j - i));
    pos += 4;
  }
  return std::nullopt;
}

Result<std::string> read_file_text(const std::string& path) {
  return read_bounded_file(path, kMaxTraceBytes);
}

Result<std::vector<RankTrace>> load_traces(const std::vector<std::string>& args,
                                           const LoadOptions& options,
                                           std::vector<std::string>* warnings) {
  CKPT_ASSIGN_OR_RETURN(std::vector<std::string> paths, expand_trace_paths(args));
  std::vector<std::string> sorted = paths;
  std::sort(sorted.begin(), sorted.end());
  auto dup = std::adjacent_find(sorted.begin(), sorted.end());
  if (dup != sorted.end()) return invalid_argument(*dup + ": given twice");
  std::vector<RankTrace> files;
  files.reserve(paths.size());
  for (const auto& path : paths) {
    Result<RankTrace> t = corrupt(path + ": not read");
    {
      // One file in memory at a time: the text is gone before the next file is read.
      CKPT_ASSIGN_OR_RETURN(std::string text, read_file_text(path));
      t = looks_like_recorder_file(text) ? decode_recorder_text(text, path)
                                         : import_pytorch_trace_padded(text, text.capacity(), path);
    }
    if (!t.is_ok()) return t.status();
    files.push_back(std::move(*t));
  }
  std::vector<std::string> notes;
  // 1. Who each file is: a rank it names, else the process it came from.
  std::map<int, std::vector<RankTrace*>> by_rank;
  std::map<std::string, std::vector<RankTrace*>> by_process;  // key -> files, rank unknown
  for (auto& t : files) {
    if (options.one_rank) {
      by_rank[0].push_back(&t);
      continue;
    }
    if (t.rank < 0) {
      if (auto r = rank_from_file_name(t.source)) t.rank = *r;
    }
    if (t.rank >= 0) {
      by_rank[t.rank].push_back(&t);
      continue;
    }
    std::string w = worker_name(t.source);
    std::string key = !w.empty()   ? "worker name " + w
                      : t.pid >= 0 ? "process id " + std::to_string(t.pid)
                                   : "file " + t.source;
    by_process[key].push_back(&t);
  }
  if (options.one_rank && files.size() > 1) {
    notes.push_back("--one-rank: the " + std::to_string(files.size()) +
                    " files are analysed as consecutive windows of one rank");
  }
  std::vector<int> known;
  for (const auto& [rank, group] : by_rank) {
    if (group.size() > 1 && !options.one_rank) known.push_back(rank);
  }
  // 2. Files without a rank: a rank per process, the next free ones in name order.
  std::vector<const RankTrace*> guessed;
  int next = 0;
  for (auto& [key, group] : by_process) {
    while (by_rank.count(next)) ++next;
    for (RankTrace* t : group) t->rank = next;
    by_rank[next] = group;
    std::vector<const RankTrace*> g(group.begin(), group.end());
    if (key.rfind("file ", 0) == 0) {
      guessed.push_back(group.front());
    } else if (group.size() > 1) {
      notes.push_back(join_names(g) + ": one process (" + key + ", no rank recorded): analysed " +
                      "as consecutive windows of rank " + std::to_string(next));
    } else if (files.size() > 1) {
      notes.push_back(group.front()->source + ": no rank recorded (" + key +
                      "): analysed as rank " + std::to_string(next));
    }
  }
  // One file alone is rank 0 whatever it says: nothing to decide, nothing to warn about.
  if (!guessed.empty() && files.size() > 1) {
    std::string ranks;
    for (const RankTrace* t : guessed)
      ranks += (ranks.empty() ? "" : ", ") + std::to_string(t->rank);
    notes.push_back(
        join_names(guessed) + ": no rank recorded (no distributedInfo, no \"rank<N>\" in the " +
        "name, no process id): analysed as rank" + (guessed.size() > 1 ? "s " : " ") + ranks +
        " in the order given" +
        (guessed.size() > 1 ? "; if they are captures of one process, pass --one-rank (one rank, "
                              "consecutive windows), or name them trace_rank<N>.json"
                            : ""));
  }
  // 3. One trace per rank: captures of one rank joined.
  std::vector<RankTrace> out;
  for (auto& [rank, group] : by_rank) {
    if (std::count(known.begin(), known.end(), rank)) {
      std::vector<const RankTrace*> g(group.begin(), group.end());
      notes.push_back("rank " + std::to_string(rank) + ": " + std::to_string(group.size()) +
                      " files (" + join_names(g) +
                      "; schedule(repeat=N) cycles or several captures), analysed as "
                      "consecutive windows");
    }
    out.push_back(join_captures(group, notes));
    out.back().rank = rank;
  }
  int world = static_cast<int>(out.size());
  for (auto& t : out) {
    if (t.world_size < world) t.world_size = world;
  }
  if (!out.empty()) out.front().layout_notes = notes;
  if (warnings != nullptr) *warnings = notes;
  return out;
}

}  // namespace ckpt::profile
