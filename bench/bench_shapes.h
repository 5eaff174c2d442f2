// The state shapes the restore benchmarks run on, as lists of (tensor path, byte size), so that a
// figure is shown on more than one shape and the Python peers (bench/restore_bench.py, which asks
// restore_bench --list-tensors) build exactly the same tensors. All float32; sizes are multiples
// of 4. Header-only; pure.
//
//   readme    the README's state: --mb / --tensor-mb big tensors in /model and --small tensors of
//             4 B..64 KiB in /optimizer/state (bench_state.h build_state's layout);
//   adamw344  issue 26's ~1 GB torch.save checkpoint converted with `ckpt convert`: 344 parameters
//             (200 x 16 KiB, 100 x 256 KiB, 40 x 4 MiB, 4 x 32 MiB, sizes mixed as layers mix
//             them), each with AdamW's exp_avg and exp_avg_sq and a 4-byte `step`: 1,376 tensors;
//   gpt2      GPT-2 small's weights (12 layers, n_embd 768, vocab 50257, context 1024): 148
//             tensors, 498 MB, a weights-only checkpoint such as pytorch_model.bin;
//   llama     a Llama-like layer list (16 layers, dim 512, 8 heads of which 4 key/value heads,
//             FFN 1408, vocab 32000, untied head) with AdamW moments and steps: 588 tensors,
//             0.96 GB.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace ckpt::bench {

struct ShapeTensor {
  std::string path;  // "/model/h.0.attn.c_attn.weight"
  uint64_t nbytes = 0;
};

inline const char* shape_names() { return "readme, adamw344, gpt2, llama"; }

namespace shape_detail {

inline void add(std::vector<ShapeTensor>* out, const std::string& path, uint64_t elements) {
  out->push_back({path, 4 * elements});
}

// Every parameter of `params` in /model, and its AdamW state in /optimizer/state/<index>.
inline void with_adamw(const std::vector<ShapeTensor>& params, std::vector<ShapeTensor>* out) {
  for (const ShapeTensor& p : params) out->push_back(p);
  for (size_t i = 0; i < params.size(); ++i) {
    const std::string s = "/optimizer/state/" + std::to_string(i) + "/";
    out->push_back({s + "exp_avg", params[i].nbytes});
    out->push_back({s + "exp_avg_sq", params[i].nbytes});
    out->push_back({s + "step", 4});
  }
}

inline void readme(uint64_t mb, uint64_t tensor_mb, uint64_t small, std::vector<ShapeTensor>* out) {
  const uint64_t big = mb / tensor_mb > 0 ? mb / tensor_mb : 1;
  for (uint64_t i = 0; i < big; ++i) {
    out->push_back({"/model/layer" + std::to_string(i) + ".weight", tensor_mb << 20});
  }
  for (uint64_t i = 0; i < small; ++i) {
    out->push_back({"/optimizer/state/p" + std::to_string(i) + "/exp_avg",
                    4 * (1 + (i * 2654435761u) % 16384)});
  }
}

inline void adamw344(std::vector<ShapeTensor>* out) {
  std::vector<uint64_t> sizes;
  for (const auto& [count, kib] :
       {std::pair<int, uint64_t>{200, 16}, {100, 256}, {40, 4096}, {4, 32768}}) {
    for (int i = 0; i < count; ++i) sizes.push_back(kib << 10);
  }
  // Mix the size classes as a model's layers do (a fixed Fisher-Yates shuffle).
  uint64_t x = 0x2545F4914F6CDD1Dull;
  for (size_t i = sizes.size() - 1; i > 0; --i) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    std::swap(sizes[i], sizes[x % (i + 1)]);
  }
  std::vector<ShapeTensor> params;
  for (size_t i = 0; i < sizes.size(); ++i) {
    std::string index = std::to_string(i);
    index.insert(0, 3 - std::min<size_t>(3, index.size()), '0');
    params.push_back({"/model/p" + index + ".weight", sizes[i]});
  }
  with_adamw(params, out);
}

inline void gpt2(std::vector<ShapeTensor>* out) {
  const uint64_t d = 768, vocab = 50257, ctx = 1024;
  add(out, "/model/wte.weight", vocab * d);
  add(out, "/model/wpe.weight", ctx * d);
  for (int l = 0; l < 12; ++l) {
    const std::string h = "/model/h." + std::to_string(l) + ".";
    add(out, h + "ln_1.weight", d);
    add(out, h + "ln_1.bias", d);
    add(out, h + "attn.c_attn.weight", d * 3 * d);
    add(out, h + "attn.c_attn.bias", 3 * d);
    add(out, h + "attn.c_proj.weight", d * d);
    add(out, h + "attn.c_proj.bias", d);
    add(out, h + "ln_2.weight", d);
    add(out, h + "ln_2.bias", d);
    add(out, h + "mlp.c_fc.weight", d * 4 * d);
    add(out, h + "mlp.c_fc.bias", 4 * d);
    add(out, h + "mlp.c_proj.weight", 4 * d * d);
    add(out, h + "mlp.c_proj.bias", d);
  }
  add(out, "/model/ln_f.weight", d);
  add(out, "/model/ln_f.bias", d);
}

inline void llama(std::vector<ShapeTensor>* out) {
  const uint64_t d = 512, kv = 256, ffn = 1408, vocab = 32000;
  std::vector<ShapeTensor> params;
  add(&params, "/model/embed_tokens.weight", vocab * d);
  for (int l = 0; l < 16; ++l) {
    const std::string p = "/model/layers." + std::to_string(l) + ".";
    add(&params, p + "self_attn.q_proj.weight", d * d);
    add(&params, p + "self_attn.k_proj.weight", kv * d);
    add(&params, p + "self_attn.v_proj.weight", kv * d);
    add(&params, p + "self_attn.o_proj.weight", d * d);
    add(&params, p + "mlp.gate_proj.weight", ffn * d);
    add(&params, p + "mlp.up_proj.weight", ffn * d);
    add(&params, p + "mlp.down_proj.weight", d * ffn);
    add(&params, p + "input_layernorm.weight", d);
    add(&params, p + "post_attention_layernorm.weight", d);
  }
  add(&params, "/model/norm.weight", d);
  add(&params, "/model/lm_head.weight", vocab * d);
  with_adamw(params, out);
}

}  // namespace shape_detail

// The tensors of shape `name` (see the note at the top; --mb, --tensor-mb and --small shape only
// "readme"). False for an unknown name.
inline bool shape_tensors(const std::string& name, uint64_t mb, uint64_t tensor_mb, uint64_t small,
                          std::vector<ShapeTensor>* out) {
  out->clear();
  if (name == "readme") {
    shape_detail::readme(mb, tensor_mb, small, out);
  } else if (name == "adamw344") {
    shape_detail::adamw344(out);
  } else if (name == "gpt2") {
    shape_detail::gpt2(out);
  } else if (name == "llama") {
    shape_detail::llama(out);
  } else {
    return false;
  }
  return true;
}

}  // namespace ckpt::bench
