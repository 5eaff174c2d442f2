#include "analytics/coverage/run_spec.h"

#include <nlohmann/json.hpp>

#include "analytics/input/json_text.h"

namespace ckpt::analytics {
namespace {

using nlohmann::json;

// Each piece becomes an epoch row of the report; beyond this the spec is surely wrong.
constexpr size_t kMaxVisits = 1'000'000;

// The loader state of a replay: epoch, steps taken in it, and (torch_random) how many
// permutations the current process's generator has drawn before this epoch's.
struct ReplayCursor {
  uint64_t epoch = 0;
  uint64_t step_in_epoch = 0;
  uint64_t draws = 0;
};

ReplayCursor advance(ReplayCursor c, uint64_t steps, uint64_t per_epoch) {
  const uint64_t total = c.step_in_epoch + steps;
  c.epoch += total / per_epoch;
  c.draws += kRandomSamplerDrawsPerEpoch * (total / per_epoch);
  c.step_in_epoch = total % per_epoch;
  return c;
}

Result<uint64_t> count_of(const json& obj, const char* key, const std::string& where,
                          std::optional<uint64_t> fallback) {
  auto it = obj.find(key);
  if (it == obj.end()) {
    if (fallback) return *fallback;
    return corrupt(where + ": missing \"" + key + "\"");
  }
  int64_t v = 0;
  if (!json_count(*it, &v)) {
    return corrupt(where + ": \"" + key + "\" must be a non-negative integer, got " + it->dump());
  }
  return static_cast<uint64_t>(v);
}

Result<bool> flag_of(const json& obj, const char* key, const std::string& where, bool fallback) {
  auto it = obj.find(key);
  if (it == obj.end()) return fallback;
  if (!it->is_boolean()) {
    return corrupt(where + ": \"" + key + "\" must be true or false, got " + it->dump());
  }
  return it->get<bool>();
}

Result<uint32_t> small_count(const json& obj, const char* key, const std::string& where,
                             std::optional<uint64_t> fallback) {
  CKPT_ASSIGN_OR_RETURN(uint64_t v, count_of(obj, key, where, fallback));
  if (v > UINT32_MAX)
    return corrupt(where + ": \"" + key + "\" is too large: " + std::to_string(v));
  return static_cast<uint32_t>(v);
}

}  // namespace

Result<RunSpec> parse_run_spec(const std::string& text, const std::string& path) {
  CKPT_ASSIGN_OR_RETURN(json doc, parse_python_json(text, path));
  if (!doc.is_object()) return corrupt(path + ": expected a JSON object");
  RunSpec spec;
  SamplerConfig& s = spec.sampler;
  CKPT_ASSIGN_OR_RETURN(s.dataset_size, count_of(doc, "dataset_size", path, std::nullopt));
  CKPT_ASSIGN_OR_RETURN(s.batch_size, small_count(doc, "batch_size", path, std::nullopt));
  CKPT_ASSIGN_OR_RETURN(s.world_size, small_count(doc, "world_size", path, 1));
  CKPT_ASSIGN_OR_RETURN(s.grad_accum, small_count(doc, "grad_accum", path, 1));
  auto sampler = doc.find("sampler");
  if (sampler == doc.end() || !sampler->is_object()) {
    return corrupt(path + ": missing \"sampler\" object");
  }
  const std::string sw = path + ": sampler";
  auto kind = sampler->find("kind");
  if (kind == sampler->end() || !kind->is_string()) return corrupt(sw + ": missing \"kind\"");
  auto k = sampler_kind_from(kind->get<std::string>());
  if (!k.is_ok()) return corrupt(sw + ": " + k.status().message());
  s.kind = *k;
  CKPT_ASSIGN_OR_RETURN(s.seed, count_of(*sampler, "seed", sw, 0));
  CKPT_ASSIGN_OR_RETURN(s.shuffle, flag_of(*sampler, "shuffle", sw, true));
  CKPT_ASSIGN_OR_RETURN(s.drop_last, flag_of(*sampler, "drop_last", sw, false));

  auto segs = doc.find("segments");
  if (segs == doc.end() || !segs->is_array() || segs->empty()) {
    return corrupt(path + ": missing \"segments\" (a non-empty list)");
  }
  for (size_t i = 0; i < segs->size(); ++i) {
    const json& e = (*segs)[i];
    const std::string where = path + ": segments[" + std::to_string(i) + "]";
    if (!e.is_object()) return corrupt(where + ": expected an object");
    RunSegment seg;
    CKPT_ASSIGN_OR_RETURN(uint64_t a, count_of(e, "start_step", where, std::nullopt));
    CKPT_ASSIGN_OR_RETURN(uint64_t b, count_of(e, "end_step", where, std::nullopt));
    if (b < a) {
      return corrupt(where + ": end_step " + std::to_string(b) + " is before start_step " +
                     std::to_string(a));
    }
    seg.start_step = static_cast<int64_t>(a);
    seg.end_step = static_cast<int64_t>(b);
    CKPT_ASSIGN_OR_RETURN(seg.loader_resumed, flag_of(e, "loader_resumed", where, false));
    spec.segments.push_back(seg);
  }
  Status valid = validate_sampler(s);
  // Values the sampler refuses are bad input (65), not bad flags.
  if (!valid.is_ok()) return corrupt(path + ": " + valid.message());
  return spec;
}

Result<RunSpec> read_run_spec(Env* env, const std::string& path) {
  CKPT_ASSIGN_OR_RETURN(std::string text, read_text_file(env, path, kMaxRunSpecBytes));
  return parse_run_spec(text, path);
}

Result<CoverageInput> replay_run(const RunSpec& spec) {
  CKPT_RETURN_IF_ERROR(validate_sampler(spec.sampler));
  const SamplerConfig& cfg = spec.sampler;
  const uint64_t per_epoch = cfg.steps_per_epoch();
  const uint64_t s = cfg.step_positions();
  const uint64_t length = cfg.epoch_length();
  const bool reseeded_order = cfg.kind == SamplerKind::kTorchRandom;

  CoverageInput out;
  out.sampler = cfg;
  std::vector<ReplayCursor> starts;  // the cursor each segment started from
  for (size_t i = 0; i < spec.segments.size(); ++i) {
    const RunSegment& seg = spec.segments[i];
    ReplayCursor c;
    if (i > 0) {
      // The checkpoint at step a was written by the latest earlier segment that got there.
      size_t from = i;
      for (size_t j = i; j-- > 0;) {
        if (spec.segments[j].start_step <= seg.start_step &&
            seg.start_step <= spec.segments[j].end_step) {
          from = j;
          break;
        }
      }
      if (from == i) {
        return invalid_argument("segments[" + std::to_string(i) + "] starts at step " +
                                std::to_string(seg.start_step) +
                                ", which no earlier segment reached");
      }
      c = advance(starts[from],
                  static_cast<uint64_t>(seg.start_step - spec.segments[from].start_step),
                  per_epoch);
      if (!seg.loader_resumed) {
        c.step_in_epoch = 0;
        c.draws = 0;  // a new process seeds its generator again
      }
      out.restarts.push_back({seg.start_step, c.epoch, c.step_in_epoch * s});
    }
    starts.push_back(c);
    uint64_t left = static_cast<uint64_t>(seg.end_step - seg.start_step);
    while (left > 0) {
      const uint64_t take = std::min(left, per_epoch - c.step_in_epoch);
      Visit v;
      v.epoch = c.epoch;
      v.order_key = reseeded_order ? c.draws : default_order_key(cfg, c.epoch);
      v.begin = c.step_in_epoch * s;
      v.end = std::min(length, (c.step_in_epoch + take) * s);
      if (!out.visits.empty()) {
        Visit& last = out.visits.back();
        if (last.epoch == v.epoch && last.order_key == v.order_key && last.end == v.begin) {
          last.end = v.end;  // a continuing segment: one visit, not one per step
        } else {
          out.visits.push_back(v);
        }
      } else {
        out.visits.push_back(v);
      }
      if (out.visits.size() > kMaxVisits) {
        return invalid_argument(
            "the run spans more than 10^6 epoch pieces; is the dataset size "
            "right?");
      }
      left -= take;
      c = advance(c, take, per_epoch);
    }
  }
  return out;
}

}  // namespace ckpt::analytics
