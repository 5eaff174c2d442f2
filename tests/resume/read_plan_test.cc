#include "resume/read_plan.h"

#include <catch2/catch.hpp>
#include <map>
#include <set>

namespace ckpt::resume::read_plan_test {
namespace {

ManifestEntry entry(const std::string& path, uint64_t offset, uint64_t nbytes) {
  ManifestEntry e;
  e.path = path;
  e.dtype = DType::kUInt8;
  e.shape = {static_cast<int64_t>(nbytes)};
  e.offset = offset;
  e.nbytes = nbytes;
  return e;
}

// Every byte of every tensor is covered exactly once, in order; chunks respect the size limit;
// pieces lie inside their chunk at the right file offset; no tensor spans two units.
void check_invariants(const ReadPlan& plan, const PlanOptions& o) {
  std::map<uint32_t, uint64_t> covered;  // tensor → bytes seen so far (pieces must be in order)
  std::map<uint32_t, size_t> unit_of;
  uint64_t prev_end = 0;
  for (size_t u = 0; u < plan.units.size(); ++u) {
    const PlanUnit& unit = plan.units[u];
    REQUIRE(unit.chunk_count > 0);
    for (uint32_t ci = unit.first_chunk; ci < unit.first_chunk + unit.chunk_count; ++ci) {
      const PlanChunk& c = plan.chunks.at(ci);
      REQUIRE(c.nbytes > 0);
      REQUIRE(c.nbytes <= o.chunk_bytes);
      if (c.piece_count > 1 && o.coalesce_bytes != 0) REQUIRE(c.nbytes <= o.coalesce_bytes);
      REQUIRE(c.offset >= prev_end);
      prev_end = c.offset + c.nbytes;
      REQUIRE(c.piece_count > 0);
      for (uint32_t k = 0; k < c.piece_count; ++k) {
        const PlanPiece& p = plan.pieces.at(c.first_piece + k);
        const PlanTensor& t = plan.tensors.at(p.tensor);
        REQUIRE(p.chunk_offset + p.nbytes <= c.nbytes);
        REQUIRE(c.offset + p.chunk_offset == t.offset + p.tensor_offset);
        REQUIRE(covered[p.tensor] == p.tensor_offset);
        covered[p.tensor] += p.nbytes;
        auto [it, fresh] = unit_of.emplace(p.tensor, u);
        REQUIRE((fresh || it->second == u));
      }
    }
  }
  uint64_t total = 0;
  for (uint32_t i = 0; i < plan.tensors.size(); ++i) {
    INFO(plan.tensors[i].path);
    REQUIRE(covered[i] == plan.tensors[i].nbytes);
    total += plan.tensors[i].nbytes;
  }
  REQUIRE(total == plan.tensor_bytes);
  uint64_t read = 0;
  for (const auto& c : plan.chunks) read += c.nbytes;
  REQUIRE(read == plan.read_bytes);
}

TEST_CASE("neighbouring small tensors coalesce into one read", "[resume]") {
  std::vector<ManifestEntry> es = {entry("/m/c", 8192, 100), entry("/m/a", 0, 10),
                                   entry("/m/b", 4096, 4096), entry("/m/e", 0, 0)};
  auto plan = make_read_plan(es, PlanOptions{1u << 20, 64u << 10});
  REQUIRE(plan.is_ok());
  check_invariants(*plan, PlanOptions{1u << 20, 64u << 10});
  REQUIRE(plan->chunks.size() == 1);
  REQUIRE(plan->chunks[0].offset == 0);
  REQUIRE(plan->chunks[0].nbytes == 8192 + 100);
  REQUIRE(plan->chunks[0].piece_count == 3);
  REQUIRE(plan->units.size() == 1);
  REQUIRE(plan->tensors.size() == 4);  // the empty one is planned, without a piece
  REQUIRE(!plan->is_direct(plan->chunks[0]));
}

TEST_CASE("a gap larger than max_gap or a full chunk starts a new read", "[resume]") {
  std::vector<ManifestEntry> es = {entry("/a", 0, 4096), entry("/b", 4096 + 65536, 4096),
                                   entry("/c", 4096 + 65536 + 4096 + 65536 + 4096, 10)};
  const PlanOptions o{1u << 20, 65536};
  auto plan = make_read_plan(es, o);
  REQUIRE(plan.is_ok());
  check_invariants(*plan, o);
  REQUIRE(plan->chunks.size() == 2);  // a+b (gap = 64 KiB allowed), c (gap 68 KiB)
  REQUIRE(plan->chunks[0].piece_count == 2);
  REQUIRE(plan->read_bytes == 4096 + 65536 + 4096 + 10);

  const PlanOptions tight{8192, 65536};
  auto plan2 = make_read_plan(es, tight);
  REQUIRE(plan2.is_ok());
  check_invariants(*plan2, tight);
  REQUIRE(plan2->chunks.size() == 3);
  for (const auto& c : plan2->chunks) REQUIRE(plan2->is_direct(c));
}

TEST_CASE("a tensor larger than a chunk is split into one unit of ordered chunks", "[resume]") {
  std::vector<ManifestEntry> es = {entry("/small", 0, 100), entry("/big", 4096, 10000),
                                   entry("/after", 16384, 5)};
  const PlanOptions o{4096, 65536};
  auto plan = make_read_plan(es, o);
  REQUIRE(plan.is_ok());
  check_invariants(*plan, o);
  REQUIRE(plan->chunks.size() == 5);  // small | big ×3 (4096, 4096, 1808) | after
  REQUIRE(plan->units.size() == 3);
  REQUIRE(plan->units[1].chunk_count == 3);
  REQUIRE(plan->chunks[3].nbytes == 10000 - 8192);
}

TEST_CASE("only tensors that fit coalesce_bytes share a read and larger ones read alone",
          "[resume]") {
  // 16 KiB tensors around a 4 MiB one, as in a model's layer list, planned as the unhashed copy
  // read of a check-first restore plans them: 8 MiB reads, 1 MiB staging.
  std::vector<ManifestEntry> es;
  uint64_t off = 4096;
  for (int i = 0; i < 80; ++i) {
    const uint64_t n = i == 40 ? (4u << 20) : (16u << 10);
    es.push_back(entry("/t" + std::to_string(i), off, n));
    off += n + 4096;  // a dataset header between neighbours
  }
  const PlanOptions o{8u << 20, 64u << 10, 1u << 20};
  auto plan = make_read_plan(es, o);
  REQUIRE(plan.is_ok());
  check_invariants(*plan, o);
  size_t big_chunks = 0;
  for (const PlanChunk& c : plan->chunks) {
    const PlanTensor& first = plan->tensors[plan->pieces[c.first_piece].tensor];
    if (first.nbytes == (4u << 20)) {
      ++big_chunks;
      REQUIRE(plan->is_direct(c));
    } else {
      REQUIRE(c.nbytes <= (1u << 20));
    }
  }
  REQUIRE(big_chunks == 1);
  // 40 small tensors on each side, 20 KiB apart: 1 MiB holds 51 of them, so one read per side.
  REQUIRE(plan->chunks.size() == 3);
  // Without coalesce_bytes the 4 MiB tensor shares an 8 MiB read with its neighbours.
  auto wide = make_read_plan(es, PlanOptions{8u << 20, 64u << 10});
  REQUIRE(wide.is_ok());
  REQUIRE(wide->chunks.size() == 1);
}

TEST_CASE("plans of many shapes keep their invariants", "[resume]") {
  for (uint64_t chunk : {4096ull, 5000ull, 65536ull, 1ull << 20}) {
    for (uint64_t gap : {0ull, 4096ull, 65536ull}) {
      std::vector<ManifestEntry> es;
      uint64_t off = 0;
      uint32_t seed = static_cast<uint32_t>(chunk + gap);
      for (int i = 0; i < 200; ++i) {
        seed = seed * 1103515245u + 12345u;
        const uint64_t n = (seed >> 8) % (i % 7 == 0 ? 300000 : 9000);
        es.push_back(entry("/t" + std::to_string(i), n == 0 ? 0 : off, n));
        if (n > 0) off += (n + 4095) / 4096 * 4096 + ((seed >> 4) % 3) * 4096 * (seed % 20);
      }
      for (uint64_t coalesce : {uint64_t{0}, uint64_t{4096}, chunk / 2}) {
        const PlanOptions o{chunk, gap, coalesce};
        auto plan = make_read_plan(es, o);
        INFO("chunk " << chunk << " gap " << gap << " coalesce " << coalesce);
        REQUIRE(plan.is_ok());
        check_invariants(*plan, o);
      }
    }
  }
}

TEST_CASE("overlapping extents and a zero chunk size are refused", "[resume]") {
  auto overlap = make_read_plan({entry("/a", 0, 5000), entry("/b", 4096, 10)});
  REQUIRE(!overlap.is_ok());
  REQUIRE(overlap.status().message().find("\"/a\" and \"/b\" overlap") != std::string::npos);
  auto zero = make_read_plan({entry("/a", 0, 1)}, PlanOptions{0, 0});
  REQUIRE(zero.status().code() == Code::kInvalidArgument);
}

}  // namespace
}  // namespace ckpt::resume::read_plan_test
