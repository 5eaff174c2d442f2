#include "verify/formats/builtin_readers.h"

namespace ckpt::verify {

ReaderSet builtin_readers() {
  ReaderSet set;
  set.add(make_torch_file_reader())
      .add(make_safetensors_reader())
      .add(make_hf_folder_reader())
      .add(make_dcp_reader())
      .add(make_deepspeed_reader())
      .add(make_megatron_reader())
      .add(make_torchtune_reader())
      .add(make_hf_dcp_shards_reader());
  return set;
}

}  // namespace ckpt::verify
