// The non-executing unpickler: every opcode family, protocols 2-5, memo, persistent ids and
// tensor rebuilds, opaque and dangerous globals, and the caps that stop bombs.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <string>

#include "verify/pickle/pickle_reader.h"

using namespace ckpt::verify;
using namespace std::string_literals;

namespace {

// A tiny pickle assembler: opcodes as bytes, with helpers for the length-prefixed ones.
struct P {
  std::string b;
  P& op(char c) {
    b.push_back(c);
    return *this;
  }
  P& u8(unsigned v) {
    b.push_back(static_cast<char>(v));
    return *this;
  }
  P& u32(uint32_t v) {
    for (int i = 0; i < 4; ++i) b.push_back(static_cast<char>(v >> (8 * i)));
    return *this;
  }
  P& u64(uint64_t v) {
    for (int i = 0; i < 8; ++i) b.push_back(static_cast<char>(v >> (8 * i)));
    return *this;
  }
  P& proto(int p) { return op('\x80').u8(p); }
  P& str(const std::string& s) {
    op('X').u32(static_cast<uint32_t>(s.size()));
    b += s;
    return *this;
  }
  P& sstr(const std::string& s) {
    op('\x8c').u8(static_cast<unsigned>(s.size()));
    b += s;
    return *this;
  }
  P& i1(unsigned v) { return op('K').u8(v); }
  P& global(const std::string& m, const std::string& n) {
    op('c');
    b += m + "\n" + n + "\n";
    return *this;
  }
  P& stop() { return op('.'); }
};

std::unique_ptr<PickleDoc> parse_ok(const std::string& bytes) {
  auto r = read_pickle(bytes, "test.pkl");
  INFO(r.status().to_string());
  REQUIRE(r.is_ok());
  return std::move(r).value();
}

}  // namespace

TEST_CASE("protocol 2 dict: ints, strings, floats, long ints, memo", "[verify]") {
  P p;
  p.proto(2).op('}').op('q').u8(0).op('(');
  p.str("a").i1(7);
  p.str("b").op('J').u32(static_cast<uint32_t>(-5));
  p.str("c").op('G');
  const unsigned char one_half[8] = {0x3f, 0xe0, 0, 0, 0, 0, 0, 0};  // 0.5 big-endian
  p.b.append(reinterpret_cast<const char*>(one_half), 8);
  p.str("d").op('\x8a').u8(5).u32(0xffffffffu).u8(0);  // 2^32 - 1 as a 5-byte LONG1
  p.str("e").op('h').u8(0);                            // the dict itself (cycle through memo)
  p.str("f").op('\x88');
  p.op('u').stop();
  auto doc = parse_ok(p.b);
  const Value* d = doc->root;
  REQUIRE(d->kind == Kind::kDict);
  CHECK(doc->protocol == 2);
  CHECK(d->get("a")->i == 7);
  CHECK(d->get("b")->i == -5);
  CHECK(d->get("c")->f == 0.5);
  CHECK(d->get("d")->i == 4294967295LL);
  CHECK(d->get("e") == d);
  CHECK(d->get("f")->b);
}

TEST_CASE("protocol 4: FRAME, SHORT_BINUNICODE, MEMOIZE, STACK_GLOBAL, sets, bytes", "[verify]") {
  P p;
  p.proto(4).op('\x95').u64(0);
  p.op(']').op('\x94');                                    // list, memo 0
  p.op('\x8f').op('\x94').op('(').i1(1).i1(2).op('\x90');  // {1, 2}
  p.op('a');
  p.op('C').u8(3).b += "xyz";  // SHORT_BINBYTES
  p.op('a');
  p.sstr("collections").sstr("OrderedDict").op('\x93').op(')').op('R');  // OrderedDict()
  p.op('a');
  p.op('h').u8(0).op('a');  // the list inside itself
  p.stop();
  auto doc = parse_ok(p.b);
  const Value* l = doc->root;
  REQUIRE(l->kind == Kind::kList);
  REQUIRE(l->items.size() == 4);
  CHECK(l->items[0]->kind == Kind::kSet);
  CHECK(l->items[0]->items.size() == 2);
  CHECK(l->items[1]->kind == Kind::kBytes);
  CHECK(l->items[1]->s == "xyz");
  CHECK(l->items[2]->kind == Kind::kDict);
  CHECK(l->items[3] == l);
  CHECK(doc->protocol == 4);
}

TEST_CASE("tuples, POP, POP_MARK, DUP, LIST, DICT, text INT/FLOAT/STRING", "[verify]") {
  P p;
  p.proto(2).op('(').i1(1).i1(2).i1(3).op('t');  // (1, 2, 3)
  p.i1(9).op('0');                               // push and POP
  p.op('(').i1(4).op('1');                       // POP_MARK
  p.op('2');                                     // DUP the tuple
  p.op('\x86');                                  // TUPLE2 (t, t)
  p.op('(').op('I');
  p.b += "42\n";
  p.op('F');
  p.b += "1.5\n";
  p.op('S');
  p.b += "'hi'\n";
  p.op('l');
  p.op('(').str("k").op('N').op('d');
  p.op('\x87').stop();  // TUPLE3 ((t, t), [..], {..})
  auto doc = parse_ok(p.b);
  const Value* t = doc->root;
  REQUIRE(t->kind == Kind::kTuple);
  REQUIRE(t->items.size() == 3);
  CHECK(t->items[0]->items[0] == t->items[0]->items[1]);
  CHECK(t->items[0]->items[0]->items.size() == 3);
  CHECK(t->items[1]->items[0]->i == 42);
  CHECK(t->items[1]->items[1]->f == 1.5);
  CHECK(t->items[1]->items[2]->s == "hi");
  CHECK(t->items[2]->get("k")->kind == Kind::kNone);
}

namespace {
// torch._utils._rebuild_tensor_v2(('storage', FloatStorage, key, loc, numel), off, size, stride,
// False, OrderedDict())
P tensor_pickle(int numel, int rows, int cols, const std::string& loc) {
  P p;
  p.proto(2).global("torch._utils", "_rebuild_tensor_v2").op('(');
  p.op('(')
      .str("storage")
      .global("torch", "FloatStorage")
      .str("0")
      .str(loc)
      .op('J')
      .u32(numel)
      .op('t')
      .op('Q');
  p.i1(0).i1(rows).i1(cols).op('\x86').i1(cols).i1(1).op('\x86').op('\x89');
  p.global("collections", "OrderedDict").op(')').op('R');
  p.op('t').op('R').stop();
  return p;
}
}  // namespace

TEST_CASE("persistent ids become tensor records without tensor bytes", "[verify]") {
  auto doc = parse_ok(tensor_pickle(12, 3, 4, "cuda:1").b);
  const Value* t = doc->root;
  REQUIRE(t->kind == Kind::kTensor);
  CHECK(t->tensor->dtype.name() == "float32");
  CHECK(t->tensor->shape == std::vector<int64_t>{3, 4});
  CHECK(t->tensor->location == "cuda:1");
  CHECK(t->tensor->storage_key == "0");
  CHECK(t->tensor->nbytes() == 48);
  // A view that runs past its storage is corrupt, not an out-of-bounds read later.
  auto bad = read_pickle(tensor_pickle(11, 3, 4, "cpu").b, "t.pkl");
  REQUIRE_FALSE(bad.is_ok());
  CHECK(bad.status().message().find("extends past its storage") != std::string::npos);
}

TEST_CASE("unknown globals stay opaque, dangerous ones are classed and never run", "[verify]") {
  const std::string marker = "/tmp/ckpt_verify_test_marker_" + std::to_string(::getpid());
  std::filesystem::remove(marker);
  P p;
  p.proto(2).op('(');
  p.global("posix", "system").str("touch " + marker).op('\x85').op('R');
  p.global("mylib.models", "Config").op(')').op('\x81').op('}').str("lr").i1(3).op('s').op('b');
  p.op('l').stop();
  auto doc = parse_ok(p.b);
  CHECK_FALSE(std::filesystem::exists(marker));
  REQUIRE(doc->root->items.size() == 2);
  const Value* call = doc->root->items[0];
  CHECK(call->kind == Kind::kObject);
  CHECK(call->qualname() == "posix.system");
  const Value* cfg = doc->root->items[1];
  CHECK(cfg->qualname() == "mylib.models.Config");
  CHECK(cfg->state->get("lr")->i == 3);
  REQUIRE(doc->globals.size() == 2);
  CHECK(doc->globals[0].second == GlobalClass::kDangerous);
  CHECK(doc->globals[1].second == GlobalClass::kOpaque);
  CHECK(classify_global("torch._utils._rebuild_tensor_v2") == GlobalClass::kKnown);
  CHECK(classify_global("builtins.eval") == GlobalClass::kDangerous);
  CHECK(classify_global("__main__.Payload") == GlobalClass::kOpaque);
}

TEST_CASE("io.BytesIO is read as the bytes it holds", "[verify]") {
  // pickle.dumps({"a": io.BytesIO(b"hi")}, protocol=4) by CPython 3.11: NEWOBJ(BytesIO, ()), then
  // BUILD (value, position, __dict__); how DCP and torchtitan's TrainState values are saved.
  auto doc = parse_ok(
      "\x80\x04\x95(\x00\x00\x00\x00\x00\x00\x00}\x94\x8c\x01"
      "a\x94\x8c\x03_io\x94\x8c\x07"
      "BytesIO\x94\x93\x94)\x81\x94"
      "C\x02hi\x94K\x00N\x87\x94"
      "bs."s);
  const Value* a = doc->root->get("a");
  REQUIRE(a != nullptr);
  CHECK(a->kind == Kind::kBytes);
  CHECK(a->s == "hi");
  REQUIRE(doc->globals.size() == 1);
  CHECK(doc->globals[0].second == GlobalClass::kKnown);
  CHECK(classify_global("io.BytesIO") == GlobalClass::kKnown);
  CHECK(classify_global("io.FileIO") == GlobalClass::kDangerous);

  // BytesIO(b"xy") called with its initial bytes; a state that is not (bytes, ...) stays opaque.
  P p;
  p.proto(2).op('(').global("io", "BytesIO").op('C').u8(2);
  p.b += "xy";
  p.op('\x85').op('R').global("_io", "BytesIO").op(')').op('\x81').i1(1).op('b').op('l').stop();
  auto doc2 = parse_ok(p.b);
  REQUIRE(doc2->root->items.size() == 2);
  CHECK(doc2->root->items[0]->kind == Kind::kBytes);
  CHECK(doc2->root->items[0]->s == "xy");
  CHECK(doc2->root->items[1]->kind == Kind::kObject);
}

TEST_CASE("bytes via _codecs.encode and numpy arrays are decoded", "[verify]") {
  P p;
  // numpy.core.multiarray._reconstruct(ndarray, (0,), b'b') + BUILD (1, (2,), dtype('u4'), False,
  // raw)
  p.proto(2).op('(');
  p.global("_codecs", "encode").str("\xc3\xbf\x01").str("latin1").op('\x86').op('R');
  p.global("numpy.core.multiarray", "_reconstruct")
      .global("numpy", "ndarray")
      .i1(0)
      .op('\x85')
      .op('C')
      .u8(1);
  p.b += "b";
  p.op('\x87').op('R');
  p.op('(')
      .i1(1)
      .i1(2)
      .op('\x85')
      .global("numpy", "dtype")
      .str("u4")
      .op('\x89')
      .op('\x88')
      .op('\x87')
      .op('R');
  p.op('\x89').op('C').u8(8);
  p.b += std::string(8, '\x01');
  p.op('t').op('b');
  p.op('l').stop();
  auto doc = parse_ok(p.b);
  REQUIRE(doc->root->items.size() == 2);
  CHECK(doc->root->items[0]->kind == Kind::kBytes);
  CHECK(doc->root->items[0]->s == std::string("\xff\x01", 2));
  const Value* arr = doc->root->items[1];
  REQUIRE(arr->kind == Kind::kTensor);
  CHECK(arr->tensor->shape == std::vector<int64_t>{2});
  CHECK(arr->tensor->element_size == 4);
  CHECK(arr->tensor->location == "numpy");
}

TEST_CASE("caps: value count, nesting depth, memo misuse, truncation, unknown opcodes",
          "[verify]") {
  P bomb;
  bomb.proto(2).op(']');
  for (int i = 0; i < 1000; ++i) bomb.op('N').op('a');
  bomb.stop();
  PickleLimits small;
  small.max_values = 100;
  auto r = read_pickle(bomb.b, "bomb.pkl", small);
  REQUIRE_FALSE(r.is_ok());
  CHECK(r.status().message().find("pickle bomb") != std::string::npos);

  P deep;
  deep.proto(2);
  for (int i = 0; i < 2000; ++i) deep.op(']');
  for (int i = 0; i < 1999; ++i) deep.op('a');
  deep.stop();
  r = read_pickle(deep.b, "deep.pkl");
  REQUIRE_FALSE(r.is_ok());
  CHECK(r.status().message().find("nests deeper") != std::string::npos);

  P unset;
  unset.proto(2).op('h').u8(3).stop();
  r = read_pickle(unset.b, "memo.pkl");
  REQUIRE_FALSE(r.is_ok());
  CHECK(r.status().message().find("memo slot 3") != std::string::npos);

  P trunc;
  trunc.proto(2).op('X').u32(1000);
  trunc.b += "abc";
  r = read_pickle(trunc.b, "trunc.pkl");
  REQUIRE_FALSE(r.is_ok());
  CHECK(r.status().message().find("truncated") != std::string::npos);

  r = read_pickle(std::string("\x80\x02\xff", 3), "op.pkl");
  REQUIRE_FALSE(r.is_ok());
  CHECK(r.status().message().find("unknown opcode 0xff") != std::string::npos);

  r = read_pickle(std::string("\x80\x02N", 3), "nostop.pkl");
  REQUIRE_FALSE(r.is_ok());
  CHECK(r.status().message().find("no STOP") != std::string::npos);
}
