#include "ckpt/base/stream_copy.h"

#include <cstdint>
#include <cstring>

#if defined(__x86_64__)
#include <emmintrin.h>  // SSE2: every x86-64 has it
#endif

namespace ckpt {

void stream_copy(void* dst, const void* src, size_t n) {
  if (n == 0) return;  // either end may then be null, which memcpy does not allow
#if defined(__x86_64__)
  if (n >= kStreamCopyMin) {
    auto* d = static_cast<unsigned char*>(dst);
    const auto* s = static_cast<const unsigned char*>(src);
    const size_t head = (16 - reinterpret_cast<uintptr_t>(d) % 16) % 16;  // to a 16-byte store
    std::memcpy(d, s, head);
    d += head;
    s += head;
    n -= head;
    for (; n >= 64; n -= 64, d += 64, s += 64) {
      const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s));
      const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + 16));
      const __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + 32));
      const __m128i e = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + 48));
      _mm_stream_si128(reinterpret_cast<__m128i*>(d), a);
      _mm_stream_si128(reinterpret_cast<__m128i*>(d + 16), b);
      _mm_stream_si128(reinterpret_cast<__m128i*>(d + 32), c);
      _mm_stream_si128(reinterpret_cast<__m128i*>(d + 48), e);
    }
    std::memcpy(d, s, n);
    _mm_sfence();  // the streamed stores are visible before whatever the caller does next
    return;
  }
#endif
  std::memcpy(dst, src, n);
}

}  // namespace ckpt
