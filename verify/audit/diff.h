// `ckpt diff A B`: two checkpoints of any format the auditor reads, side by side — component
// statuses, counters, learning rates, hyperparameters, the model's tensors (names, dtypes,
// shapes) and the digests a format records (our config/environment digests; HF
// training_args.bin, Lightning hyper_parameters). Each side is read with the reader registry
// and judged with apply_rules, so "differs" means the same thing for every format. Pure over the
// two views; thread-safe.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "ckpt/base/status.h"
#include "verify/audit/rules.h"
#include "verify/formats/format_reader.h"
#include "verify/formats/view.h"

namespace ckpt::verify {

// One side's numbers: nullopt where that checkpoint does not record them.
struct DiffCounters {
  std::optional<int64_t> global_step;
  std::optional<double> epoch;
  std::optional<double> optimizer_step;
  std::optional<int64_t> scheduler_last_epoch;
  std::optional<int64_t> samples;
};

struct DiffTensor {
  std::string name;
  std::string a, b;  // "float32 [8,4]"
  // --deep: same dtype and shape, other bytes; the largest |a - b| over the elements (NaN when
  // one side holds a NaN where the other does not; integer and bool dtypes as numbers).
  std::optional<double> max_abs_diff;
};

struct CheckpointDiff {
  std::string a, b;  // the paths
  CheckpointFormat format_a = CheckpointFormat::kTorchSave, format_b = format_a;
  struct Status2 {
    AuditComponent component;
    ComponentStatus a, b;
    // Set when a and b differ only because one format cannot tell: `missing` on a side whose
    // format does not record what decides it (DCP records no devices, so rng_cuda), and
    // `not_applicable` on the other. Such a pair says nothing about the state: it is printed
    // as a note and not counted in `differences`.
    std::string note;
  };
  std::vector<Status2> components;
  DiffCounters counters_a, counters_b;
  std::vector<double> lr_a, lr_b;  // every optimizer's param_groups[i].lr, in order
  struct Hyper {
    std::string key, a, b;  // "" where a side lacks the key
  };
  std::vector<Hyper> hyperparameters;  // the ones that differ
  size_t hyperparameters_same = 0;
  std::vector<std::string> only_a, only_b;  // model tensors on one side only
  std::vector<DiffTensor> changed;          // same name, other dtype or shape (or bytes: --deep)
  size_t tensors_same = 0;
  bool deep = false;            // tensor values were compared
  size_t tensors_by_value = 0;  // --deep: equal tensors whose bytes both sides provided
  size_t tensors_unread = 0;    // --deep: equal metadata, but a side has no bytes to compare
  struct Digest {
    std::optional<std::string> a, b;
  };
  Digest config, environment;
  // The number of differing items: each component status, counter, hyperparameter, tensor and
  // digest that differs counts one, the LR list one. It is the number of rows `diff_to_text` shows.
  int differences = 0;
};

// The two views → their difference. Exposed for tests.
CheckpointDiff diff_views(const CheckpointView& a, const CheckpointView& b);

// Reads both paths with `readers` through `env` (errors as audit_path: NotFound/IoError,
// Corrupt/Unsupported, naming the path) and diffs them. `deep`: also read every model tensor's
// bytes and compare the values (formats whose readers provide them: torch.save files and the
// folders made of them).
Result<CheckpointDiff> diff_paths(const ReaderSet& readers, Env* env, const std::string& a,
                                  const std::string& b, bool deep = false);

// --deep: the largest |a - b| over the elements of two byte-strings of one dtype and length;
// nullopt for a dtype it cannot read as numbers (then only "the bytes differ" is known).
std::optional<double> max_abs_difference(const AnyDType& dtype, const std::string& a,
                                         const std::string& b);

// The documented --json object (docs/cli.md, "ckpt diff").
nlohmann::json diff_to_json(const CheckpointDiff& d);
// A table: what differs first, then what is the same in one line.
std::string diff_to_text(const CheckpointDiff& d);

}  // namespace ckpt::verify
