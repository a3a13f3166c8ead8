#pragma once
// Sixteen float lanes with fused multiply-add, on AVX-512, AVX2+FMA or plain C++. Every lane is
// an independent, correctly rounded fma chain and reductions use one fixed tree, so a dot product
// gives the same bits whatever the ISA, the batch size or the tiling: the CPU backend is batch-
// invariant (a request's logits never depend on what it is batched with or how it is chunked).
#include <cmath>
#include <cstdint>

#if defined(__AVX512F__) || (defined(__AVX2__) && defined(__FMA__))
#include <immintrin.h>
#endif

namespace oscar::simd {

struct Vec16 {
#if defined(__AVX512F__)
  __m512 v;
  static Vec16 zero() {
    return {_mm512_setzero_ps()};
  }
  static Vec16 load(const float* p) {
    return {_mm512_loadu_ps(p)};
  }
  static Vec16 broadcast(float x) {
    return {_mm512_set1_ps(x)};
  }
  void store(float* p) const {
    _mm512_storeu_ps(p, v);
  }
  // this = a * b + this
  void fma(const Vec16& a, const Vec16& b) {
    v = _mm512_fmadd_ps(a.v, b.v, v);
  }
  void add(const Vec16& a) {
    v = _mm512_add_ps(v, a.v);
  }
  void scale(float s) {
    v = _mm512_mul_ps(v, _mm512_set1_ps(s));
  }
#elif defined(__AVX2__) && defined(__FMA__)
  __m256 lo, hi;
  static Vec16 zero() {
    return {_mm256_setzero_ps(), _mm256_setzero_ps()};
  }
  static Vec16 load(const float* p) {
    return {_mm256_loadu_ps(p), _mm256_loadu_ps(p + 8)};
  }
  static Vec16 broadcast(float x) {
    return {_mm256_set1_ps(x), _mm256_set1_ps(x)};
  }
  void store(float* p) const {
    _mm256_storeu_ps(p, lo);
    _mm256_storeu_ps(p + 8, hi);
  }
  void fma(const Vec16& a, const Vec16& b) {
    lo = _mm256_fmadd_ps(a.lo, b.lo, lo);
    hi = _mm256_fmadd_ps(a.hi, b.hi, hi);
  }
  void add(const Vec16& a) {
    lo = _mm256_add_ps(lo, a.lo);
    hi = _mm256_add_ps(hi, a.hi);
  }
  void scale(float s) {
    lo = _mm256_mul_ps(lo, _mm256_set1_ps(s));
    hi = _mm256_mul_ps(hi, _mm256_set1_ps(s));
  }
#else
  float lane[16];
  static Vec16 zero() {
    return Vec16{};
  }
  static Vec16 load(const float* p) {
    Vec16 r;
    for (int i = 0; i < 16; ++i) r.lane[i] = p[i];
    return r;
  }
  static Vec16 broadcast(float x) {
    Vec16 r;
    for (float& l : r.lane) l = x;
    return r;
  }
  void store(float* p) const {
    for (int i = 0; i < 16; ++i) p[i] = lane[i];
  }
  void fma(const Vec16& a, const Vec16& b) {
    for (int i = 0; i < 16; ++i) lane[i] = std::fma(a.lane[i], b.lane[i], lane[i]);
  }
  void add(const Vec16& a) {
    for (int i = 0; i < 16; ++i) lane[i] += a.lane[i];
  }
  void scale(float s) {
    for (float& l : lane) l *= s;
  }
#endif

  // Sum of the 16 lanes in a fixed pairwise order.
  float sum() const {
    alignas(64) float l[16];
    store(l);
    for (int width = 8; width >= 1; width /= 2) {
      for (int i = 0; i < width; ++i) l[i] += l[i + width];
    }
    return l[0];
  }
};

// Rows whose length is a multiple of 16 (every hidden, head and MLP size oscar supports).
inline float dot(const float* a, const float* b, int64_t length) {
  Vec16 acc = Vec16::zero();
  for (int64_t i = 0; i < length; i += 16) acc.fma(Vec16::load(a + i), Vec16::load(b + i));
  return acc.sum();
}

// y += a * x over `length` floats (a multiple of 16).
inline void axpy(float a, const float* x, float* y, int64_t length) {
  const Vec16 scale = Vec16::broadcast(a);
  for (int64_t i = 0; i < length; i += 16) {
    Vec16 acc = Vec16::load(y + i);
    acc.fma(scale, Vec16::load(x + i));
    acc.store(y + i);
  }
}

}  // namespace oscar::simd
