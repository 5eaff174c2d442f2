// Factories of the built-in format readers (registered by verify/audit/reader_registry.cc).
// Each reader is stateless and thread-safe; see verify/audit/reader_registry.h for the contract.
#pragma once

#include <memory>

#include "verify/audit/reader_registry.h"

namespace ckpt::verify {

std::unique_ptr<FormatReader> make_torch_file_reader();   // .pt/.pth/.bin/.ckpt, Lightning
std::unique_ptr<FormatReader> make_safetensors_reader();  // *.safetensors
std::unique_ptr<FormatReader> make_hf_folder_reader();    // HF Trainer checkpoint-N/, Accelerate
std::unique_ptr<FormatReader> make_dcp_reader();          // torch.distributed.checkpoint folders
std::unique_ptr<FormatReader> make_deepspeed_reader();    // DeepSpeed save_checkpoint folders
std::unique_ptr<FormatReader> make_megatron_reader();     // Megatron-LM iter_N/ and torch_dist

}  // namespace ckpt::verify
