/* Copies of pieces of one size into batch buffers not in cache, with and without asking for
 * the destination's lines ahead of the copy (prefetchw): what `alloc::Filler` does, in C, with
 * glibc's memcpy. No stokehold code involved.
 *
 *   cc -O2 -march=native -o write_ahead bench/shard/write_ahead.c && ./write_ahead
 *
 * 48 buffers of 256 KiB are filled in turn (each last written 47 buffers ago, as a pipeline's
 * batches in flight are), each by pieces of one size read from a 64 MiB source. With the
 * write-ahead, before each piece the lines up to 4 KiB past its end are asked for. Prints, per
 * piece size, the median GB/s of 11 alternated passes of each, and their ratio.
 */
#include <immintrin.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define BUFFERS 48
#define BUFFER (256 * 1024)
#define AHEAD 4096
#define SOURCE (64 << 20)
#define PASSES 11

static char *src;
static char *dst[BUFFERS];

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

static int by_value(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* GB/s of 200 buffers filled by pieces of `piece` bytes. */
static double fill(size_t piece, int ahead) {
  double t = now();
  size_t from = 0;
  for (int b = 0; b < 200; b++) {
    char *d = dst[b % BUFFERS];
    size_t asked = 0;
    for (size_t at = 0; at + piece <= BUFFER; at += piece) {
      if (ahead) {
        size_t want = at + piece + AHEAD < BUFFER ? at + piece + AHEAD : BUFFER;
        for (size_t l = asked & ~(size_t)63; l < want; l += 64)
          _mm_prefetch(d + l, _MM_HINT_ET0);
        if (want > asked) asked = want;
      }
      memcpy(d + at, src + from, piece);
      from = (from + piece + 4096) % (SOURCE - (1 << 20));
    }
  }
  return 200.0 * BUFFER / (now() - t) / 1e9;
}

int main(void) {
  src = malloc(SOURCE);
  memset(src, 1, SOURCE);
  for (int i = 0; i < BUFFERS; i++) {
    dst[i] = aligned_alloc(64, BUFFER);
    memset(dst[i], 0, BUFFER);
  }
  const size_t pieces[] = {256, 512, 1024, 2048, 4096, 8192, 16384};
  for (size_t k = 0; k < sizeof pieces / sizeof pieces[0]; k++) {
    double plain[PASSES], ahead[PASSES];
    for (int r = 0; r < PASSES; r++) {
      plain[r] = fill(pieces[k], 0);
      ahead[r] = fill(pieces[k], 1);
    }
    qsort(plain, PASSES, sizeof(double), by_value);
    qsort(ahead, PASSES, sizeof(double), by_value);
    printf("piece %6zu B: plain %5.2f GB/s, write-ahead %5.2f GB/s, ratio %.2f\n", pieces[k],
           plain[PASSES / 2], ahead[PASSES / 2], ahead[PASSES / 2] / plain[PASSES / 2]);
  }
  return 0;
}
