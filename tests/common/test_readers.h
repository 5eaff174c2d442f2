// The reader sets tests audit with, built once as cli/main.cc builds its own: the built-in
// foreign-format readers, and (for tests that link ckpt_verify_ours) those plus our format's.
#pragma once

#include "verify/formats/builtin_readers.h"
#ifdef CKPT_TEST_WITH_OURS_READER
#include "verify/ours/ours_reader.h"
#endif

namespace ckpt::test {

inline const verify::ReaderSet& foreign_readers() {
  static const verify::ReaderSet readers = verify::builtin_readers();
  return readers;
}

#ifdef CKPT_TEST_WITH_OURS_READER
inline const verify::ReaderSet& all_readers() {
  static const verify::ReaderSet readers = [] {
    verify::ReaderSet r = verify::builtin_readers();
    r.add(verify::make_ours_reader());
    return r;
  }();
  return readers;
}
#endif

}  // namespace ckpt::test
