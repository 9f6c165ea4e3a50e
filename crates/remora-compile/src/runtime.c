/* remora's C runtime: pasted in front of every compiled program.
 *
 * A pool of POSIX threads for parallel loops (REMORA_THREADS, else every
 * core), values in and out in Futhark's binary data format, and run-time
 * errors as a line "remora-error: WHAT" on stderr with exit status 3.
 * Plain C11; builds with gcc and clang as distributions install them. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void rt_fail(const char *what) {
  fprintf(stderr, "remora-error: %s\n", what);
  fflush(stderr);
  _Exit(3);
}

/* ---- scalars: the language's Int and Float operations ---- */

static inline int64_t rt_add(int64_t a, int64_t b) { return (int64_t)((uint64_t)a + (uint64_t)b); }
static inline int64_t rt_sub(int64_t a, int64_t b) { return (int64_t)((uint64_t)a - (uint64_t)b); }
static inline int64_t rt_mul(int64_t a, int64_t b) { return (int64_t)((uint64_t)a * (uint64_t)b); }
static inline int64_t rt_div(int64_t a, int64_t b) {
  if (b == 0) rt_fail("divide by zero");
  if (a == INT64_MIN && b == -1) rt_fail("arithmetic overflow");
  int64_t q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}
static inline int64_t rt_mod(int64_t a, int64_t b) {
  if (b == 0) rt_fail("divide by zero");
  if (b == -1) return 0;
  int64_t r = a % b;
  return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
}
static inline int64_t rt_pow(int64_t base, int64_t e) {
  if (e < 0) rt_fail("Negative exponent");
  uint64_t acc = 1, b = (uint64_t)base;
  while (e > 0) {
    if (e & 1) acc *= b;
    b *= b;
    e >>= 1;
  }
  return (int64_t)acc;
}
static inline int64_t rt_max(int64_t a, int64_t b) { return a > b ? a : b; }
static inline int64_t rt_min(int64_t a, int64_t b) { return a < b ? a : b; }
static inline int64_t rt_shl(int64_t a, int64_t n) {
  if (n < 0) rt_fail("arithmetic overflow");
  return n >= 64 ? 0 : (int64_t)((uint64_t)a << n);
}
static inline int64_t rt_shr(int64_t a, int64_t n) {
  if (n < 0) rt_fail("arithmetic overflow");
  return n >= 64 ? (a < 0 ? -1 : 0) : (a >> n);
}
static inline int64_t rt_popc(int64_t a) { return (int64_t)__builtin_popcountll((unsigned long long)a); }
static inline int64_t rt_abs(int64_t a) { return a < 0 ? rt_sub(0, a) : a; }
static inline int64_t rt_signum(int64_t a) { return (a > 0) - (a < 0); }
static inline float rt_fmax(float a, float b) { return (isnan(a) || isnan(b)) ? NAN : (a <= b ? b : a); }
static inline float rt_fmin(float a, float b) { return (isnan(a) || isnan(b)) ? NAN : (a <= b ? a : b); }
static inline float rt_fmod(float a, float b) {
  float r = fmodf(a, b);
  if (r == 0.0f) return copysignf(0.0f, b);
  return ((r < 0.0f) != (b < 0.0f)) ? r + b : r;
}
static inline float rt_fsignum(float x) { return x > 0.0f ? 1.0f : (x < 0.0f ? -1.0f : x); }
/* Half to even (the default rounding mode). */
static inline float rt_round_even(float x) { return nearbyintf(x); }
/* An integral float as Int through an unbounded integer, wrapping at 64
 * bits; NaN and infinities give 0. */
static inline int64_t rt_integral(float x) {
  if (!isfinite(x)) return 0;
  uint32_t bits;
  memcpy(&bits, &x, sizeof bits);
  int exp = (int)((bits >> 23) & 0xff);
  if (exp == 0) return 0;
  int64_t mantissa = (int64_t)((bits & 0x7fffff) | 0x800000);
  int shift = exp - 150;
  uint64_t magnitude;
  if (shift >= 64) magnitude = 0;
  else if (shift >= 0) magnitude = (uint64_t)mantissa << shift;
  else magnitude = (uint64_t)(mantissa >> (-shift > 63 ? 63 : -shift));
  return x < 0.0f ? (int64_t)(0 - magnitude) : (int64_t)magnitude;
}

/* ---- memory ---- */

static void *rt_alloc(int64_t n, size_t size) {
  if (n < 0 || (uint64_t)n > (uint64_t)(SIZE_MAX / 2) / size) rt_fail("allocation too large");
  void *p = malloc(n == 0 ? 1 : (size_t)n * size);
  if (p == NULL) rt_fail("allocation too large");
  return p;
}

/* ---- the thread pool ---- */

typedef void (*rt_task)(void *ctx, int64_t lo, int64_t hi);

static int rt_threads = 1;
static int rt_started = 0;
static _Thread_local int rt_inside = 0;
static pthread_mutex_t rt_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t rt_go = PTHREAD_COND_INITIALIZER;
static pthread_cond_t rt_done = PTHREAD_COND_INITIALIZER;
static rt_task rt_job;
static void *rt_job_ctx;
static int64_t rt_job_n, rt_job_chunk;
static atomic_llong rt_next;
static uint64_t rt_generation = 0;
static int rt_pending = 0;

static void rt_chunks(void) {
  for (;;) {
    int64_t lo = (int64_t)atomic_fetch_add(&rt_next, rt_job_chunk);
    if (lo >= rt_job_n) return;
    int64_t hi = lo + rt_job_chunk < rt_job_n ? lo + rt_job_chunk : rt_job_n;
    rt_job(rt_job_ctx, lo, hi);
  }
}

static void *rt_worker(void *unused) {
  (void)unused;
  rt_inside = 1;
  uint64_t seen = 0;
  for (;;) {
    pthread_mutex_lock(&rt_mu);
    while (rt_generation == seen) pthread_cond_wait(&rt_go, &rt_mu);
    seen = rt_generation;
    pthread_mutex_unlock(&rt_mu);
    rt_chunks();
    pthread_mutex_lock(&rt_mu);
    if (--rt_pending == 0) pthread_cond_signal(&rt_done);
    pthread_mutex_unlock(&rt_mu);
  }
  return NULL;
}

static void rt_start(void) {
  rt_started = 1;
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, 64u << 20);
  for (int k = 1; k < rt_threads; k++) {
    pthread_t t;
    if (pthread_create(&t, &attr, rt_worker, NULL) != 0) {
      rt_threads = k;
      break;
    }
    pthread_detach(t);
  }
  pthread_attr_destroy(&attr);
}

/* f(ctx, lo, hi) over 0 … n-1 in chunks, on every thread; `heavy` when an
 * iteration holds a loop of its own (smaller chunks, no size cut-off). */
static void rt_parallel_for(int64_t n, int heavy, rt_task f, void *ctx) {
  if (n <= 0) return;
  if (rt_threads <= 1 || rt_inside || n < 2 || (!heavy && n < 16384)) {
    f(ctx, 0, n);
    return;
  }
  if (!rt_started) rt_start();
  int64_t chunk = heavy ? n / ((int64_t)rt_threads * 16) : n / ((int64_t)rt_threads * 4);
  if (chunk < 1) chunk = 1;
  if (!heavy && chunk < 4096) chunk = 4096;
  pthread_mutex_lock(&rt_mu);
  rt_job = f;
  rt_job_ctx = ctx;
  rt_job_n = n;
  rt_job_chunk = chunk;
  atomic_store(&rt_next, 0);
  rt_pending = rt_threads - 1;
  rt_generation++;
  pthread_cond_broadcast(&rt_go);
  pthread_mutex_unlock(&rt_mu);
  rt_inside = 1;
  rt_chunks();
  rt_inside = 0;
  pthread_mutex_lock(&rt_mu);
  while (rt_pending > 0) pthread_cond_wait(&rt_done, &rt_mu);
  pthread_mutex_unlock(&rt_mu);
}

/* The two halves of a tree reduction: half(c, lo, mid, l), half(c, mid,
 * hi, r). Over many items and outside a parallel loop, the right half is
 * given to the pool while this thread does the left; the tree is the same
 * either way, so the result is too. */
typedef void (*rt_half)(void *c, int64_t lo, int64_t hi, void *out);
typedef struct {
  rt_half half;
  void *c;
  int64_t lo, mid, hi;
  void *l, *r;
} rt_pair_job;
static void rt_pair_task(void *raw, int64_t lo, int64_t hi) {
  rt_pair_job *j = raw;
  for (int64_t k = lo; k < hi; k++) {
    if (k == 0) j->half(j->c, j->lo, j->mid, j->l);
    else j->half(j->c, j->mid, j->hi, j->r);
  }
}
static void rt_pair(rt_half half, void *c, int64_t lo, int64_t mid, int64_t hi, void *l, void *r, size_t size) {
  (void)size;
  if (!rt_inside && rt_threads > 1 && hi - lo >= 65536) {
    rt_pair_job j = {half, c, lo, mid, hi, l, r};
    rt_parallel_for(2, 1, rt_pair_task, &j);
    return;
  }
  half(c, lo, mid, l);
  half(c, mid, hi, r);
}

/* ---- values in and out: Futhark's binary format ---- */

static const char *rt_type_names[3] = {" i64", " f32", "bool"};
static const size_t rt_sizes[3] = {8, 4, 1};

static void rt_read_exact(void *p, size_t n) {
  if (n > 0 && fread(p, 1, n, stdin) != n) rt_fail("input ends early");
}

static void *rt_read(int type, int rank, int64_t *shape) {
  unsigned char head[7];
  rt_read_exact(head, 7);
  if (head[0] != 'b' || head[1] != 2) rt_fail("input is not in the binary data format");
  if (head[2] != rank) rt_fail("input of another rank");
  if (memcmp(head + 3, rt_type_names[type], 4) != 0) rt_fail("input of another type");
  int64_t n = 1;
  for (int k = 0; k < rank; k++) {
    uint64_t d;
    rt_read_exact(&d, 8);
    if (d > (uint64_t)INT64_MAX) rt_fail("allocation too large");
    shape[k] = (int64_t)d;
    if (shape[k] != 0 && n > INT64_MAX / shape[k]) rt_fail("allocation too large");
    n *= shape[k];
  }
  void *p = rt_alloc(n, rt_sizes[type]);
  rt_read_exact(p, (size_t)n * rt_sizes[type]);
  if (type == 2) {
    unsigned char *b = p;
    for (int64_t k = 0; k < n; k++) b[k] = b[k] != 0;
  }
  return p;
}

static void rt_write(int type, int rank, const int64_t *shape, const void *data) {
  unsigned char head[7] = {'b', 2, (unsigned char)rank};
  memcpy(head + 3, rt_type_names[type], 4);
  fwrite(head, 1, 7, stdout);
  int64_t n = 1;
  for (int k = 0; k < rank; k++) {
    uint64_t d = (uint64_t)shape[k];
    fwrite(&d, 8, 1, stdout);
    n *= shape[k];
  }
  if (n > 0) fwrite(data, rt_sizes[type], (size_t)n, stdout);
}

static void rt_init(int argc, char **argv) {
  (void)argc;
  (void)argv;
  const char *t = getenv("REMORA_THREADS");
  long n = t ? strtol(t, NULL, 10) : sysconf(_SC_NPROCESSORS_ONLN);
  if (n < 1) n = 1;
  if (n > 256) n = 256;
  rt_threads = (int)n;
}

static void rt_finish(void) {
  if (fflush(stdout) != 0) rt_fail("cannot write the results");
}

/* ---- structure and gathers: linspace, mean ---- */

/* n points from a to b, both included, in double precision (the last
   exactly b), as the interpreter's linspace. */
static void rt_linspace(float *out, float a, float b, int64_t n) {
  if (n <= 0) return;
  if (n == 1) {
    out[0] = a;
    return;
  }
  double div = (double)(n - 1), da = (double)a, delta = (double)b - da, step = delta / div;
  for (int64_t i = 0; i < n - 1; i++) {
    double y = step == 0.0 ? (double)i / div * delta : (double)i * step;
    out[i] = (float)(y + da);
  }
  out[n - 1] = b;
}

/* The mean of n Ints at x[offset + i*stride]: summed exactly in 128 bits,
   divided in double precision, rounded to a float (NaN when empty). */
static void rt_mean_int(float *out, const int64_t *x, int64_t offset, int64_t n, int64_t stride) {
  __int128 sum = 0;
  for (int64_t i = 0; i < n; i++) sum += x[offset + i * stride];
  *out = (float)((double)sum / (double)n);
}
