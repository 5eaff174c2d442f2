#include "verify/formats/peft_adapter.h"

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <utility>

namespace ckpt::verify {
namespace {

constexpr uint64_t kMaxConfigBytes = 16ull << 20;
constexpr const char* kConfig = "adapter_config.json";

bool starts_with(const std::string& s, const std::string& p) {
  return s.compare(0, p.size(), p) == 0;
}

// A module list in sorted order (PEFT keeps target_modules as a set: its JSON order varies from
// run to run), or the regex string PEFT also accepts.
std::string text_of(const nlohmann::json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (!v.is_array()) return "";
  std::vector<std::string> names;
  for (const auto& x : v) {
    if (x.is_string()) names.push_back(x.get<std::string>());
  }
  std::sort(names.begin(), names.end());
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

// "base_model.model.h.0.attn.c_attn.lora_A.weight" -> {"base_model.model.h.0.attn.c_attn", 'A'};
// torchtune spells the halves lora_a / lora_b.
std::optional<std::pair<std::string, char>> lora_half(const std::string& name) {
  for (const char* mark : {".lora_A.", ".lora_a.", ".lora_B.", ".lora_b."}) {
    const size_t at = name.rfind(mark);
    if (at == std::string::npos) continue;
    const char half = mark[6] == 'A' || mark[6] == 'a' ? 'A' : 'B';
    return std::make_pair(name.substr(0, at), half);
  }
  return std::nullopt;
}

// PEFT freezes the base model: an optimizer over exactly the adapter's tensors is the whole
// trainable set, not a partial one.
void note_adapter_optimizer(size_t adapter_tensors, CheckpointView* view) {
  OptimizerPart& o = view->optimizer;
  if (!o.found || o.count != 1) return;
  size_t params = 0;
  for (const auto& g : o.groups) params += g.params.size();
  if (params != adapter_tensors) return;
  o.evidence += "; its " + std::to_string(params) + " params are the adapter's " +
                std::to_string(adapter_tensors) +
                " tensors: PEFT freezes the base model, so the adapter is all it trains";
}

}  // namespace

Result<AdapterConfig> read_adapter_config(Env* env, const std::string& path) {
  CKPT_ASSIGN_OR_RETURN(auto f, env->open_random(path));
  if (f->size() > kMaxConfigBytes) return corrupt(path + ": larger than 16 MiB");
  CKPT_ASSIGN_OR_RETURN(std::string text, f->read_string(0, f->size()));
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return corrupt(path + ": not a JSON object");
  AdapterConfig c;
  if (j.contains("peft_type") && j["peft_type"].is_string())
    c.peft_type = j["peft_type"].get<std::string>();
  if (j.contains("r") && j["r"].is_number_integer()) c.r = j["r"].get<int64_t>();
  if (j.contains("lora_alpha") && j["lora_alpha"].is_number())
    c.alpha = j["lora_alpha"].get<double>();
  if (j.contains("target_modules")) c.targets = text_of(j["target_modules"]);
  if (j.contains("base_model_name_or_path") && j["base_model_name_or_path"].is_string())
    c.base = j["base_model_name_or_path"].get<std::string>();
  c.rank_pattern =
      j.contains("rank_pattern") && j["rank_pattern"].is_object() && !j["rank_pattern"].empty();
  return c;
}

std::string describe_adapter(const AdapterConfig& c, const std::string& config_label) {
  std::string what = "a PEFT " + (c.peft_type.empty() ? std::string("?") : c.peft_type) +
                     " adapter (" + config_label + ":";
  if (c.r) what += " r " + std::to_string(*c.r) + (c.rank_pattern ? " by default" : "") + ",";
  if (c.alpha) {
    std::ostringstream a;
    a << *c.alpha;
    what += " lora_alpha " + a.str() + ",";
  }
  return what + " target_modules " + (c.targets.empty() ? std::string("?") : c.targets) + ")";
}

size_t check_lora_pairs(const std::vector<const TensorInfo*>& adapter, const AdapterConfig& c,
                        const std::string& file, CheckpointView* view) {
  std::map<std::string, std::map<char, const TensorInfo*>> modules;
  for (const TensorInfo* t : adapter) {
    if (auto h = lora_half(t->name)) modules[h->first][h->second] = t;
  }
  size_t pairs = 0;
  for (const auto& [module, halves] : modules) {
    if (halves.size() != 2) {
      const bool has_a = halves.count('A') != 0;
      view->findings.push_back({Severity::kError, AuditComponent::kModel,
                                file + ": " + module + " has lora_" + (has_a ? "A" : "B") +
                                    " but no lora_" + (has_a ? "B" : "A") +
                                    ": the adapter does not load into the LoRA layers",
                                true});
      continue;
    }
    ++pairs;
    const auto& a = halves.at('A')->shape;
    const auto& b = halves.at('B')->shape;
    if (!c.r || c.rank_pattern || a.size() < 2 || b.size() < 2) continue;
    if (a[0] != *c.r || b[1] != *c.r) {
      view->findings.push_back(
          {Severity::kError, AuditComponent::kModel,
           file + ": " + module + " has rank " + std::to_string(a[0]) + " (lora_A) / " +
               std::to_string(b[1]) + " (lora_B), but the adapter config says r " +
               std::to_string(*c.r) + ": the adapter does not load into the layers it builds",
           true});
    }
  }
  return pairs;
}

std::string note_base_model(Env* env, const std::string& base, const std::string& said_by,
                            CheckpointView* view) {
  if (base.empty()) {
    view->findings.push_back({Severity::kWarning, AuditComponent::kModel,
                              said_by + " names no base model: the training script must supply the "
                                        "frozen base the adapter was trained on",
                              false});
    return "the frozen base weights are not in this checkpoint, and no base is named";
  }
  const std::string said = "the frozen base weights are not in this checkpoint: they come from " +
                           said_by + " '" + base + "'";
  const bool local = starts_with(base, "/") || starts_with(base, "./") ||
                     starts_with(base, "../") || starts_with(base, "~");
  if (!local) return said + " (a Hub id or a path relative to the training directory)";
  if (env->exists(base)) return said + " (a local path, present here)";
  view->findings.push_back(
      {Severity::kWarning, AuditComponent::kModel,
       said_by + " '" + base +
           "' is a local path that does not exist here: resuming needs that base model as well "
           "(the checkpoint holds only the adapter), so point the config at a copy of it",
       false});
  return said + " (a local path that does not exist here)";
}

Status note_peft_adapter(Env* env, const std::string& dir, const std::vector<std::string>& names,
                         CheckpointView* view) {
  auto has = [&](const std::string& n) {
    return std::find(names.begin(), names.end(), n) != names.end();
  };
  if (!has(kConfig)) return Status::ok();
  CKPT_ASSIGN_OR_RETURN(AdapterConfig c, read_adapter_config(env, dir + "/" + kConfig));
  const std::string what = describe_adapter(c, kConfig);
  std::string file;
  for (const char* f : {"adapter_model.safetensors", "adapter_model.bin"}) {
    if (file.empty() && has(f)) file = f;
  }
  const std::string base =
      note_base_model(env, c.base, std::string(kConfig) + " base_model_name_or_path", view);
  if (file.empty()) {
    view->findings.push_back(
        {Severity::kError, AuditComponent::kModel,
         std::string(kConfig) + " describes " + what +
             ", but adapter_model.safetensors / adapter_model.bin is missing: the trained "
             "adapter weights are lost, and the base model alone is the untrained start",
         false});
    return Status::ok();
  }
  std::vector<const TensorInfo*> adapter;
  for (const TensorInfo& t : view->model.tensors) {
    if (t.file == file) adapter.push_back(&t);
  }
  const size_t pairs = c.peft_type == "LORA" ? check_lora_pairs(adapter, c, file, view) : 0;
  // (the evidence already counts the file's tensors)
  view->model.evidence += " — " + what +
                          (pairs > 0 ? ", " + std::to_string(pairs) + " lora_A/lora_B pairs" : "") +
                          "; " + base;
  note_adapter_optimizer(adapter.size(), view);
  return Status::ok();
}

}  // namespace ckpt::verify
