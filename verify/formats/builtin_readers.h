// Factories of the built-in foreign-format readers, and the set of all of them. Each reader is
// stateless and thread-safe; see verify/formats/format_reader.h for the contract. A program builds
// its ReaderSet from these (cli/main.cc adds verify/ours' reader after them).
#pragma once

#include <memory>

#include "verify/formats/format_reader.h"

namespace ckpt::verify {

std::unique_ptr<FormatReader> make_torch_file_reader();   // .pt/.pth/.bin/.ckpt, Lightning
std::unique_ptr<FormatReader> make_safetensors_reader();  // *.safetensors
std::unique_ptr<FormatReader> make_hf_folder_reader();    // HF Trainer checkpoint-N/, Accelerate
std::unique_ptr<FormatReader> make_dcp_reader();          // torch.distributed.checkpoint folders
std::unique_ptr<FormatReader> make_deepspeed_reader();    // DeepSpeed save_checkpoint folders
std::unique_ptr<FormatReader> make_megatron_reader();     // Megatron-LM iter_N/ and torch_dist
std::unique_ptr<FormatReader> make_torchtune_reader();    // torchtune recipe output_dir
// shard-R-model-K-of-N.safetensors folders of DCP's HuggingFaceStorageWriter(save_distributed)
std::unique_ptr<FormatReader> make_hf_dcp_shards_reader();

// A set holding every reader above, in that order.
ReaderSet builtin_readers();

}  // namespace ckpt::verify
