// A rank file's structure encoded by ckpt itself, byte for byte in HDF5's file format (version 2
// superblock, version 2 object headers, compact links and attributes, contiguous datasets, one
// global heap for the strings), without a call into the HDF5 library: what write_structure
// (rank_file.h) writes for the trees it can describe this way. The HDF5 library reads the result
// (h5py, h5dump, ckpt's own read_structure); HDF5's writer spent ~45 µs of CPU per dataset on
// bookkeeping a file written once never needs (issue 29 item 8: 9.7 ms of a 3 MB state's 23 ms
// save), this encoder well under 1 µs.
//
// The file: the superblock at 0, each tensor's extent 4 KiB aligned from 4096 on in tree order
// with nothing but zeros between them,
// then every object header (children before their parent) and the global heap. Not thread-safe
// per call; calls on different trees may run at once (no HDF5 lock is needed).
// Internal to ckpt/h5.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ckpt/format/tree.h"
#include "ckpt/h5/rank_file.h"

namespace ckpt::h5 {

struct EncodedStructure {
  std::string superblock;  // at offset 0
  uint64_t tail_offset = 0;
  std::string tail;  // object headers and heap, at tail_offset; the file ends with it
  std::vector<DatasetExtent> extents;  // sorted by offset
  uint64_t file_bytes = 0;
};

// The structure of `root`, or nullopt when the tree needs what this encoder does not write
// (more than kEncodeMaxLinks links or kEncodeMaxAttrs attributes in one group — HDF5 keeps those
// in a fractal heap and a B-tree —, a message over 64 KiB, a name HDF5 would refuse or a tensor
// whose bytes do not match its shape): write_structure then uses HDF5's own writer.
std::optional<EncodedStructure> encode_structure(const Node& root);

constexpr size_t kEncodeMaxLinks = 4096;
constexpr size_t kEncodeMaxAttrs = 256;

// Bob Jenkins' lookup3 hashlittle() with seed 0: the checksum of every HDF5 version-2 metadata
// block (H5_checksum_lookup3).
uint32_t lookup3(const void* data, size_t n);

}  // namespace ckpt::h5
