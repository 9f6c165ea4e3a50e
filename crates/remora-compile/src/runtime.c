/* remora's C runtime: pasted in front of every compiled program.
 *
 * A pool of POSIX threads for parallel loops (REMORA_THREADS, else every
 * core), values in and out in Futhark's binary data format, and run-time
 * errors as a line "remora-error: WHAT" on stderr with exit status 3.
 * Plain C11; builds with gcc and clang as distributions install them. */
#define _POSIX_C_SOURCE 200809L
#define _DEFAULT_SOURCE /* mmap's MAP_ANONYMOUS, madvise (the big buffers' region) */
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <time.h>
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
static inline int64_t rt_dim_add(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_add_overflow(a, b, &r)) rt_fail("this dimension's arithmetic overflows 64 bits");
  return r;
}
static inline int64_t rt_dim_mul(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_mul_overflow(a, b, &r)) rt_fail("this dimension's arithmetic overflows 64 bits");
  return r;
}
/* An index j in [0, 2d) brought into [0, d): a rotation's. */
static inline int64_t rt_wrap(int64_t j, int64_t d) { return j >= d ? j - d : j; }
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
/* f.max and f.min: NaN if either operand is, else the larger (the
 * smaller), the second (the first) of equal operands. Written as the
 * ordered answers first and NaN last, not as a NaN test first: the C
 * compiler then makes the ordered choice one compare (and a branch or a
 * blend) on the operands themselves, with nothing moved out of the float
 * registers, so a fold's chain of maxima (a running peak) waits about half
 * as long per step, and a loop of them still vectorises. The same bits. */
static inline float rt_fmax(float a, float b) {
  if (a > b) return a;
  if (a <= b) return b;
  return NAN;
}
static inline float rt_fmin(float a, float b) {
  if (a <= b) return a;
  if (b < a) return b;
  return NAN;
}
/* The same as selects, NaN chosen last: in a loop that also reduces (a
 * reduction's order keys of clipped items), the C compiler vectorises
 * these, not the branches above. */
static inline float rt_fmax_sel(float a, float b) {
  float m = a > b ? a : b;
  return a != a || b != b ? NAN : m;
}
static inline float rt_fmin_sel(float a, float b) {
  float m = a <= b ? a : b;
  return a != a || b != b ? NAN : m;
}
/* A float's place in an order of its bits as an Int (-0 before +0, and
 * its own inverse): a reduction by f.max or f.min compares these, which
 * the C compiler vectorises, where rt_fmax's choice among equal operands
 * would keep the items in order (c/lanes.rs). */
static inline int32_t rt_order_key(float x) {
  int32_t b;
  memcpy(&b, &x, sizeof b);
  return b ^ (int32_t)((uint32_t)(b >> 31) >> 1);
}
static inline float rt_order_float(int32_t k) {
  int32_t b = k ^ (int32_t)((uint32_t)(k >> 31) >> 1);
  float x;
  memcpy(&x, &b, sizeof x);
  return x;
}
static inline float rt_fmod(float a, float b) {
  float r = fmodf(a, b);
  if (r == 0.0f) return copysignf(0.0f, b);
  return ((r < 0.0f) != (b < 0.0f)) ? r + b : r;
}
static inline float rt_fsignum(float x) { return x > 0.0f ? 1.0f : (x < 0.0f ? -1.0f : x); }
/* Half to even (the default rounding mode). */
static inline float rt_round_even(float x) { return nearbyintf(x); }
/* An integral float as Int through an unbounded integer, wrapping at 64
 * bits; NaN and infinities give 0. Below 2^63 in magnitude (every bin
 * number, every index) it is the C conversion, one instruction: the
 * general path branches on the exponent, which varies from item to item
 * (a histogram's bins of items in [0, 1) ran at a third of the speed). */
static inline int64_t rt_integral(float x) {
  if (x > -0x1p63f && x < 0x1p63f) return (int64_t)x;
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

/* A hint that the atom of `size` bytes at `index` from `base` is read
 * soon (a gather's, some items ahead): never faults, computes nothing.
 * The address is integer arithmetic: an index out of range (which the
 * gather itself then fails on) names no object. */
static inline void rt_prefetch(const void *base, int64_t index, int64_t size) {
  __builtin_prefetch((const void *)((uintptr_t)base + (uintptr_t)index * (uintptr_t)size));
}

/* ---- memory ---- */

/* Buffers carry their size in a header, so that big ones, freed, are
 * kept for the next allocation of (about) their size: a loop that
 * allocates the same big buffers every step (the steps of `iterate`) reuses
 * them instead of mapping and faulting in fresh pages each time. The
 * header is a cache line (RT_HEAD words), and every buffer of RT_LINE
 * bytes or more starts one: parts of a buffer written by different
 * threads (a hist's per-thread bins) share a line only where their
 * ranges do, and vector loads of a row start aligned. */
#define RT_HEAD 8
#define RT_LINE ((size_t)256)
#define RT_KEEP 32
#define RT_BIG ((size_t)1 << 16)
static pthread_mutex_t rt_kept_mu = PTHREAD_MUTEX_INITIALIZER;
static size_t *rt_kept[RT_KEEP];

/* Big buffers not kept are mapped in huge pages where the system gives
 * them (Linux's transparent huge pages, asked for by madvise): a fresh
 * buffer's first touch then faults in 2 MiB at once, where pages of 4 KiB
 * fault one by one, about two microseconds each on a virtual machine (80
 * MiB of buffers: 42 ms of faults in 4 KiB pages, 3.7 ms in huge pages).
 * A buffer of RT_OWN bytes or more is a mapping of its own, aligned to
 * 2 MiB (header word 1: 2), unmapped when it is freed and cannot be kept;
 * smaller ones share a region of RT_REGION bytes, used once front to back
 * (header word 1: 1): a buffer freed that cannot be kept gives its pages
 * back but not its place, and a region used up is followed by a fresh
 * one. Where mapping fails, buffers come from malloc (header word 1: 0).
 * Called holding rt_kept_mu. */
#define RT_REGION ((size_t)64 << 20)
#define RT_HUGE ((size_t)2 << 20)
#define RT_OWN ((size_t)2 << 20)
static char *rt_region_next, *rt_region_end;
#if defined(MAP_ANONYMOUS) && defined(MADV_HUGEPAGE)
/* `bytes` (a multiple of RT_HUGE) of fresh memory aligned to RT_HUGE, in
 * huge pages where the system has them; NULL where it cannot be mapped. */
static char *rt_map_huge(size_t bytes) {
  void *p = mmap(NULL, bytes + RT_HUGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) return NULL;
  char *start = (char *)(((uintptr_t)p + RT_HUGE - 1) & ~(uintptr_t)(RT_HUGE - 1));
  /* The unaligned ends given back: the mapping is exactly [start, start + bytes). */
  if (start > (char *)p) (void)munmap(p, (size_t)(start - (char *)p));
  size_t tail = (size_t)((char *)p + bytes + RT_HUGE - (start + bytes));
  if (tail > 0) (void)munmap(start + bytes, tail);
  (void)madvise(start, bytes, MADV_HUGEPAGE);
  return start;
}
#endif
static size_t *rt_region_take(size_t bytes) {
#if defined(MAP_ANONYMOUS) && defined(MADV_HUGEPAGE)
  bytes = (bytes + 63) & ~(size_t)63;
  if (bytes >= RT_OWN) {
    size_t mapped = (bytes + RT_HUGE - 1) & ~(RT_HUGE - 1);
    if (mapped < bytes) return NULL;
    size_t *h = (size_t *)rt_map_huge(mapped);
    if (h != NULL) h[1] = 2;
    return h;
  }
  if (rt_region_next == NULL || bytes > (size_t)(rt_region_end - rt_region_next)) {
    char *start = rt_map_huge(RT_REGION);
    if (start == NULL) return NULL;
    rt_region_next = start;
    rt_region_end = start + RT_REGION;
  }
  size_t *h = (size_t *)rt_region_next;
  rt_region_next += bytes;
  h[1] = 1;
  return h;
#else
  (void)bytes;
  return NULL;
#endif
}

static void *rt_alloc(int64_t n, size_t size) {
  if (n < 0 || (uint64_t)n > (uint64_t)(SIZE_MAX / 4) / size) rt_fail("allocation too large");
  size_t bytes = (n == 0 ? 1 : (size_t)n * size);
  if (bytes >= RT_BIG) {
    pthread_mutex_lock(&rt_kept_mu);
    for (int k = 0; k < RT_KEEP; k++) {
      size_t *h = rt_kept[k];
      if (h != NULL && h[0] >= bytes && h[0] / 2 <= bytes) {
        rt_kept[k] = NULL;
        pthread_mutex_unlock(&rt_kept_mu);
        return h + RT_HEAD;
      }
    }
    size_t *h = rt_region_take(bytes + RT_HEAD * sizeof(size_t));
    pthread_mutex_unlock(&rt_kept_mu);
    if (h != NULL) {
      h[0] = bytes;
      return h + RT_HEAD;
    }
  }
  size_t whole = bytes + RT_HEAD * sizeof(size_t);
  size_t *h = bytes >= RT_LINE ? aligned_alloc(64, (whole + 63) & ~(size_t)63) : malloc(whole);
  if (h == NULL) rt_fail("allocation too large");
  h[0] = bytes, h[1] = 0;
  return h + RT_HEAD;
}

static void rt_free(void *p) {
  if (p == NULL) return;
  size_t *h = (size_t *)p - RT_HEAD;
  if (h[0] >= RT_BIG) {
    pthread_mutex_lock(&rt_kept_mu);
    for (int k = 0; k < RT_KEEP; k++) {
      if (rt_kept[k] == NULL) {
        rt_kept[k] = h;
        pthread_mutex_unlock(&rt_kept_mu);
        return;
      }
    }
    pthread_mutex_unlock(&rt_kept_mu);
  }
  if (h[1] == 0) {
    free(h);
    return;
  }
#if defined(MAP_ANONYMOUS) && defined(MADV_HUGEPAGE)
  if (h[1] == 2) {
    /* A mapping of its own: unmapped. */
    size_t mapped = (h[0] + RT_HEAD * sizeof(size_t) + 63) & ~(size_t)63;
    (void)munmap(h, (mapped + RT_HUGE - 1) & ~(RT_HUGE - 1));
    return;
  }
#endif
#if defined(MADV_DONTNEED)
  /* The region's buffer not kept: its whole pages given back. */
  uintptr_t lo = ((uintptr_t)h + 4095) & ~(uintptr_t)4095;
  uintptr_t hi = ((uintptr_t)p + h[0]) & ~(uintptr_t)4095;
  if (hi > lo) (void)madvise((void *)lo, hi - lo, MADV_DONTNEED);
#endif
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
/* Changed (under rt_mu) for each job; read without it by a spinning
 * worker. */
static atomic_ullong rt_generation;
/* Whether workers may still join the job, and how many are in it
 * (changed under rt_mu; read without it by the main thread spinning). */
static int rt_open = 0;
/* Whether the last generation was rt_warm's, and the memory its worker
 * faults in (under rt_mu). */
static int rt_warming = 0;
static char *rt_prefault = NULL;
/* Whether the computation may allocate a buffer from the region (RT_BIG
 * bytes or more, rt_init's `big`): only then is its first huge page
 * faulted in ahead (0.1 ms of a worker's time, which a computation of a
 * few milliseconds on small buffers would wait for). */
static int rt_big_buffers = 1;
static atomic_int rt_active;

/* A thread between jobs, or the main thread waiting for the workers at a
 * job's end, spins RT_SPIN_NS before it sleeps: a program's parallel
 * regions follow each other closely (a k-means step: the assignment,
 * then the hist's grouping, its parts, the counts), and a sleeping
 * thread takes tens of microseconds to wake (a futex, the scheduler, a
 * virtual CPU woken by an interrupt), longer on a busy system: a region
 * of 100 microseconds then ran on one thread, its worker woken only
 * once the main thread had taken every chunk. */
#define RT_SPIN_NS 200000
/* After rt_warm (the last of the inputs being read): long enough for the
 * rest of it. */
#define RT_WARM_NS 5000000
static inline void rt_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}
static int64_t rt_now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}
/* Spins until `done(arg)` or `ns` pass: whether it is done. */
static bool rt_spin(bool (*done)(const void *), const void *arg, int64_t ns) {
  int64_t until = 0;
  for (int k = 0;; k++) {
    if (done(arg)) return true;
    if ((k & 255) == 0) {
      int64_t now = rt_now_ns();
      if (until == 0) until = now + ns;
      else if (now >= until) return false;
      /* A thread that has work to do (more threads than cores, a busy
       * machine) runs first. */
      sched_yield();
    }
    rt_relax();
  }
}
static bool rt_new_job(const void *seen) { return atomic_load(&rt_generation) != *(const uint64_t *)seen; }
static bool rt_all_left(const void *unused) {
  (void)unused;
  return atomic_load(&rt_active) == 0;
}

/* REMORA_PROFILE=1: each parallel region's wall time, its threads' CPU
 * time and how many took part, and the main thread's CPU time outside
 * them (see rt_profile_report). CPU times, unlike wall times, hold still
 * on a busy machine. */
static int rt_profiling = 0;
static atomic_int rt_job_ran;
static atomic_llong rt_job_cpu;
/* When the job began (ns, CLOCK_MONOTONIC), and the sum over the workers
 * that joined it of how long after that they took their first chunk. */
static int64_t rt_job_begun;
static atomic_llong rt_job_joined;
static int64_t rt_cpu_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

static void rt_chunks(void) {
  bool took = false;
  int64_t cpu = rt_profiling ? rt_cpu_ns() : 0;
  for (;;) {
    int64_t lo = (int64_t)atomic_fetch_add(&rt_next, rt_job_chunk);
    if (lo >= rt_job_n) break;
    int64_t hi = lo + rt_job_chunk < rt_job_n ? lo + rt_job_chunk : rt_job_n;
    if (!took && rt_profiling && rt_inside == 2) atomic_fetch_add(&rt_job_joined, rt_now_ns() - rt_job_begun);
    took = true;
    rt_job(rt_job_ctx, lo, hi);
  }
  if (took && rt_profiling) {
    atomic_fetch_add(&rt_job_ran, 1);
    atomic_fetch_add(&rt_job_cpu, rt_cpu_ns() - cpu);
  }
}

/* A worker's first pages touched as it starts, while the inputs are
 * read, not in its first job: its stack's (a tree's lanes take 64 KiB of
 * it) and those of its C library heap, made by its first malloc (a
 * chunk's temporary row). Two threads otherwise spent a tenth more CPU
 * than one on a 3 ms n-body step, all of it first touches. */
#define RT_WORKER_STACK ((size_t)256 << 10)
#define RT_WORKER_HEAP ((size_t)64 << 10)
static __attribute__((noinline)) void rt_worker_touch(void) {
  volatile char stack[RT_WORKER_STACK];
  for (size_t k = 0; k < RT_WORKER_STACK; k += 4096) stack[k] = 0;
  (void)stack[0];
  char *heap = malloc(RT_WORKER_HEAP);
  if (heap != NULL) {
    for (size_t k = 0; k < RT_WORKER_HEAP; k += 4096) ((volatile char *)heap)[k] = 0;
    free(heap);
  }
}

static void *rt_worker(void *unused) {
  (void)unused;
  /* 2: a worker (1 would do for rt_inside; the profile tells them apart). */
  rt_inside = 2;
  rt_worker_touch();
  uint64_t seen = 0;
  int64_t spin = RT_SPIN_NS;
  for (;;) {
    (void)rt_spin(rt_new_job, &seen, spin);
    spin = RT_SPIN_NS;
    pthread_mutex_lock(&rt_mu);
    while (atomic_load(&rt_generation) == seen) pthread_cond_wait(&rt_go, &rt_mu);
    seen = atomic_load(&rt_generation);
    if (!rt_open) {
      /* Woken too late (every chunk was taken and the job is done), or
       * by rt_warm: ready for the first job (one worker faulting in the
       * buffers' first huge page meanwhile). */
      if (rt_warming) spin = RT_WARM_NS;
      char *prefault = rt_prefault;
      rt_prefault = NULL;
      pthread_mutex_unlock(&rt_mu);
#if defined(MADV_POPULATE_WRITE)
      if (prefault != NULL) (void)madvise(prefault, RT_HUGE, MADV_POPULATE_WRITE);
#else
      (void)prefault;
#endif
      continue;
    }
    rt_active++;
    pthread_mutex_unlock(&rt_mu);
    rt_chunks();
    pthread_mutex_lock(&rt_mu);
    if (--rt_active == 0) pthread_cond_signal(&rt_done);
    pthread_mutex_unlock(&rt_mu);
  }
  return NULL;
}

/* The workers woken (under rt_mu, a generation without a job) to spin
 * for the first job, RT_WARM_NS: called as the last input is read, so
 * that the first parallel loop of the computation does not wait for a
 * worker to wake (tens or hundreds of microseconds on a virtual machine
 * whose other CPUs sleep while the inputs are read: a sum of squares of
 * 10^7 floats takes 3 ms). */
static void rt_warm(void) {
  if (rt_threads <= 1 || !rt_started) return;
  /* The region of the buffers under 2 MiB mapped now, and its first huge
   * page faulted in by a worker while this thread reads on (the first
   * touch of a huge page zeroes 2 MiB, 0.1 ms, and where the system must
   * compact memory to find one, took 5 ms: a k-means step's first buffer,
   * in the computation's time). */
  char *prefault = NULL;
#if defined(MAP_ANONYMOUS) && defined(MADV_HUGEPAGE) && defined(MADV_POPULATE_WRITE)
  pthread_mutex_lock(&rt_kept_mu);
  if (rt_region_next == NULL && rt_big_buffers) {
    char *start = rt_map_huge(RT_REGION);
    if (start != NULL) {
      rt_region_next = prefault = start;
      rt_region_end = start + RT_REGION;
    }
  }
  pthread_mutex_unlock(&rt_kept_mu);
#endif
  pthread_mutex_lock(&rt_mu);
  if (prefault != NULL) rt_prefault = prefault;
  rt_open = 0;
  rt_warming = 1;
  atomic_fetch_add(&rt_generation, 1);
  pthread_cond_broadcast(&rt_go);
  pthread_mutex_unlock(&rt_mu);
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

/* The profile (REMORA_PROFILE=1): the regions run from the main
 * thread (a parallel loop, a tree's parts), by site (the loop's function,
 * a tree's half), in the order first run: calls, items, wall time, the
 * CPU time its threads spent on its chunks, how many threads took part
 * (the most, and the mean over the calls run on the pool). A region too
 * small to split (or on one thread) runs inline; `split` says whether it
 * would be split on more threads. The main thread's CPU time outside
 * the regions that split is the serial part; against the CPU time in
 * them, it bounds what more threads can give (Amdahl): measured on one
 * thread, the bound for two. */
typedef void (*rt_site_key)(void);
#define RT_SITES 64
typedef struct {
  rt_site_key key;
  int64_t calls, pooled, items, threads, most;
  double wall, cpu, joined;
} rt_site;
static rt_site rt_sites[RT_SITES];
static int rt_nsites = 0;
/* The main thread's CPU time in regions that split (waiting included),
 * and every thread's on their chunks. */
static double rt_split_main = 0, rt_split_work = 0;
static double rt_seconds(const struct timespec *a, const struct timespec *b) {
  return (double)(b->tv_sec - a->tv_sec) + (double)(b->tv_nsec - a->tv_nsec) * 1e-9;
}
/* A region over n items, begun at t0 (wall) and cpu0 (the main thread's
 * CPU), `work` ns of CPU on its chunks by `threads` threads, pooled or
 * run inline. */
static void rt_profile_region(rt_site_key key, int64_t n, bool split, bool pooled, int threads, int64_t work,
                              int64_t joined, const struct timespec *t0, int64_t cpu0) {
  struct timespec t1;
  clock_gettime(CLOCK_MONOTONIC, &t1);
  int k = 0;
  while (k < rt_nsites && rt_sites[k].key != key) k++;
  if (k == RT_SITES) k = RT_SITES - 1; /* the rest counted in the last */
  if (k == rt_nsites) rt_sites[rt_nsites++].key = key;
  rt_site *s = &rt_sites[k];
  s->calls++;
  s->items += n;
  s->wall += rt_seconds(t0, &t1);
  s->cpu += (double)work * 1e-9;
  if (pooled) {
    s->pooled++;
    s->threads += threads;
    s->joined += (double)joined * 1e-9;
  }
  if (threads > s->most) s->most = threads;
  if (split) {
    rt_split_main += (double)(rt_cpu_ns() - cpu0) * 1e-9;
    rt_split_work += (double)work * 1e-9;
  }
}
/* The process's page faults so far (a huge page's first touch is one,
 * and may stall for milliseconds where the system compacts memory to
 * find 2 MiB). */
static long rt_faults(void) {
  struct rusage u;
  return getrusage(RUSAGE_SELF, &u) == 0 ? u.ru_minflt + u.ru_majflt : 0;
}
static long rt_started_faults;
static void rt_profile_report(double wall, double main_cpu) {
  for (int k = 0; k < rt_nsites; k++) {
    rt_site *s = &rt_sites[k];
    fprintf(stderr,
            "remora-profile: region %d: %lld calls, %lld items, wall %.3f ms, cpu %.3f ms, threads %lld most, "
            "%.2f mean (%lld calls on the pool), a worker's first chunk %.3f ms after the start\n",
            k + 1, (long long)s->calls, (long long)s->items, s->wall * 1e3, s->cpu * 1e3, (long long)s->most,
            s->pooled > 0 ? (double)s->threads / (double)s->pooled : 0.0, (long long)s->pooled,
            s->threads > s->pooled ? s->joined * 1e3 / (double)(s->threads - s->pooled) : 0.0);
  }
  double serial = main_cpu - rt_split_main;
  if (serial < 0) serial = 0;
  double all = serial + rt_split_work;
  fprintf(stderr,
          "remora-profile: %d threads; wall %.3f ms; cpu: serial %.3f ms (%.1f%%), in regions that split %.3f ms; "
          "Amdahl bound on 2 threads: %.2fx\n",
          rt_threads, wall * 1e3, serial * 1e3, all > 0 ? 100.0 * serial / all : 0.0, rt_split_work * 1e3,
          all > 0 ? all / (serial + rt_split_work / 2) : 1.0);
  /* Where the memory lives: page faults while timed, and how much of
   * the process's memory is in huge pages (the inputs', read before). */
  long faults = rt_faults() - rt_started_faults;
  long anon = 0, huge = 0;
  FILE *f = fopen("/proc/self/smaps_rollup", "r");
  if (f != NULL) {
    char line[256];
    while (fgets(line, sizeof line, f)) {
      if (strncmp(line, "Anonymous:", 10) == 0) anon = strtol(line + 10, NULL, 10);
      if (strncmp(line, "AnonHugePages:", 14) == 0) huge = strtol(line + 14, NULL, 10);
    }
    fclose(f);
  }
  fprintf(stderr, "remora-profile: %ld page faults while timed; %.1f of %.1f MiB anonymous memory in huge pages\n",
          faults, (double)huge / 1024.0, (double)anon / 1024.0);
}

/* A cost the compiler computes at run time (a double: it may overflow
 * 64 bits) as the argument of rt_parallel_for. */
static inline uint64_t rt_cost(double c) {
  if (!(c >= 1.0)) return 1;
  return c >= 1.8e19 ? UINT64_MAX : (uint64_t)c;
}

/* f(ctx, lo, hi) over 0 … n-1 in chunks, on every thread; `cost` is the
 * compiler's estimate of one iteration's operations: a loop of too little
 * work in all runs on this thread alone. */
static void rt_pool_for(int64_t n, uint64_t cost, rt_task f, void *ctx, rt_site_key key) {
  if (n <= 0) return;
  if (cost < 1) cost = 1;
  double work = (double)n * (double)cost;
  bool parallel = n >= 2 && work >= 65536.0;
  if (rt_inside) {
    f(ctx, 0, n);
    return;
  }
  struct timespec t0 = {0, 0};
  int64_t cpu0 = 0;
  if (rt_profiling) {
    clock_gettime(CLOCK_MONOTONIC, &t0);
    cpu0 = rt_cpu_ns();
  }
  if (rt_threads <= 1 || !parallel) {
    /* On one thread, what it runs is inside it (for the profile: not a
     * region of its own). */
    int inside = rt_inside;
    if (rt_threads <= 1) rt_inside = 1;
    f(ctx, 0, n);
    rt_inside = inside;
    if (rt_profiling) rt_profile_region(key, n, parallel, false, 1, rt_cpu_ns() - cpu0, 0, &t0, cpu0);
    return;
  }
  if (!rt_started) rt_start();
  /* Chunks of about 2^20 operations by the compiler's estimate, at
   * least 16 per thread. The estimate can be high by 100 times (a
   * k-means point: 4105 estimated, 50 ns): chunks of 16384 estimated
   * operations were then 3 points, an atomic step each on the shared
   * counter and sharing the cache lines of their results with the other
   * thread's, and two threads ran slower than one. */
  int64_t chunk = (int64_t)((1u << 20) / cost);
  int64_t most = n / ((int64_t)rt_threads * 16);
  if (chunk > most) chunk = most;
  if (chunk < 1) chunk = 1;
  pthread_mutex_lock(&rt_mu);
  rt_job = f;
  rt_job_ctx = ctx;
  rt_job_n = n;
  rt_job_chunk = chunk;
  atomic_store(&rt_next, 0);
  rt_open = 1;
  rt_warming = 0;
  if (rt_profiling) rt_job_begun = rt_now_ns();
  atomic_store(&rt_active, 0);
  atomic_fetch_add(&rt_generation, 1);
  pthread_cond_broadcast(&rt_go);
  pthread_mutex_unlock(&rt_mu);
  rt_inside = 1;
  rt_chunks();
  rt_inside = 0;
  /* Every chunk is taken: close the job to workers not yet in it (a
   * worker the system has not run yet, on a busy machine, is not waited
   * for: this thread did its share) and wait for those in it. */
  pthread_mutex_lock(&rt_mu);
  rt_open = 0;
  pthread_mutex_unlock(&rt_mu);
  if (!rt_spin(rt_all_left, NULL, RT_SPIN_NS)) {
    pthread_mutex_lock(&rt_mu);
    while (atomic_load(&rt_active) > 0) pthread_cond_wait(&rt_done, &rt_mu);
    pthread_mutex_unlock(&rt_mu);
  }
  if (rt_profiling)
    rt_profile_region(key, n, true, true, atomic_exchange(&rt_job_ran, 0), atomic_exchange(&rt_job_cpu, 0),
                      atomic_exchange(&rt_job_joined, 0), &t0, cpu0);
}
static void rt_parallel_for(int64_t n, uint64_t cost, rt_task f, void *ctx) {
  rt_pool_for(n, cost, f, ctx, (rt_site_key)f);
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
    rt_pool_for(2, 1u << 20, rt_pair_task, &j, (rt_site_key)half);
    return;
  }
  half(c, lo, mid, l);
  half(c, mid, hi, r);
}

/* A big buffer that a loop on this thread writes in order (a float scan:
 * one chain, that cannot be split) has its pages faulted in by another
 * thread meanwhile (Linux's MADV_POPULATE_WRITE: the pages made
 * writable as a first write would, their contents untouched, so it may
 * race with the loop's writes): the chain then runs at its own speed, not
 * stopping at every fresh page (a 40 MB scan: 6.7 ms with its faults, 5.0
 * without). Nothing is done on one thread, under RT_POPULATE_FROM bytes,
 * or where the system has no such advice; rt_populate_end waits for the
 * helper. */
#define RT_POPULATE_FROM ((size_t)4 << 20)
#if defined(__linux__) && defined(MAP_ANONYMOUS)
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif
static pthread_t rt_populating;
static int rt_populate_on = 0;
static struct {
  void *p;
  size_t bytes;
} rt_populate_job;
static void *rt_populate_task(void *unused) {
  (void)unused;
  (void)madvise(rt_populate_job.p, rt_populate_job.bytes, MADV_POPULATE_WRITE);
  return NULL;
}
#endif
static void rt_populate_begin(void *p, int64_t n, int64_t size) {
#if defined(__linux__) && defined(MAP_ANONYMOUS)
  if (rt_threads <= 1 || rt_populate_on || n <= 0 || size <= 0) return;
  if ((uint64_t)n > (uint64_t)SIZE_MAX / (uint64_t)size) return;
  size_t bytes = (size_t)n * (size_t)size;
  if (bytes < RT_POPULATE_FROM) return;
  uintptr_t lo = ((uintptr_t)p + 4095) & ~(uintptr_t)4095;
  uintptr_t hi = ((uintptr_t)p + bytes) & ~(uintptr_t)4095;
  if (hi <= lo) return;
  rt_populate_job.p = (void *)lo;
  rt_populate_job.bytes = hi - lo;
  rt_populate_on = pthread_create(&rt_populating, NULL, rt_populate_task, NULL) == 0;
#else
  (void)p;
  (void)n;
  (void)size;
#endif
}
static void rt_populate_end(void) {
#if defined(__linux__) && defined(MAP_ANONYMOUS)
  if (rt_populate_on) pthread_join(rt_populating, NULL);
  rt_populate_on = 0;
#endif
}

/* ---- values in and out: Futhark's binary format ---- */

static const char *rt_type_names[3] = {" i64", " f32", "bool"};
static const size_t rt_sizes[3] = {8, 4, 1};

#define RT_WARM_BYTES ((size_t)2 << 20)
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
  /* The workers woken before the last RT_WARM_BYTES (see rt_warm). */
  size_t bytes = (size_t)n * rt_sizes[type];
  size_t early = bytes > RT_WARM_BYTES ? bytes - RT_WARM_BYTES : 0;
  rt_read_exact(p, early);
  rt_warm();
  rt_read_exact((char *)p + early, bytes - early);
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

/* `big`: whether the computation may allocate RT_BIG bytes or more at
 * once (rt_big_buffers). */
static void rt_init(int argc, char **argv, int big) {
  (void)argc;
  (void)argv;
  rt_big_buffers = big;
  const char *t = getenv("REMORA_THREADS");
  long n = t ? strtol(t, NULL, 10) : sysconf(_SC_NPROCESSORS_ONLN);
  if (n < 1) n = 1;
  if (n > 256) n = 256;
  rt_threads = (int)n;
  const char *profile = getenv("REMORA_PROFILE");
  rt_profiling = profile != NULL && profile[0] == '1';
  /* The pool now, while the arguments are read, not in the first
   * parallel loop's time. */
  if (rt_threads > 1) rt_start();
}

/* REMORA_TIMING=1: the computation's time (inputs read to results
 * ready), in nanoseconds, on stderr as "remora-time-ns: N", and the
 * process's peak resident memory as "remora-peak-kib: N". */
static struct timespec rt_started_at;
static int64_t rt_started_cpu;
static void rt_clock_start(void) {
  clock_gettime(CLOCK_MONOTONIC, &rt_started_at);
  if (rt_profiling) {
    rt_started_cpu = rt_cpu_ns();
    rt_started_faults = rt_faults();
  }
}
static void rt_clock_stop(void) {
  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  if (rt_profiling) rt_profile_report(rt_seconds(&rt_started_at, &now), (double)(rt_cpu_ns() - rt_started_cpu) * 1e-9);
  const char *t = getenv("REMORA_TIMING");
  if (!t || t[0] != '1') return;
  long long ns = (long long)(now.tv_sec - rt_started_at.tv_sec) * 1000000000LL + (now.tv_nsec - rt_started_at.tv_nsec);
  fprintf(stderr, "remora-time-ns: %lld\n", ns);
  /* And the peak resident memory, for the benchmarks' memory columns. */
  FILE *status = fopen("/proc/self/status", "r");
  if (!status) return;
  char line[256];
  while (fgets(line, sizeof line, status))
    if (strncmp(line, "VmHWM:", 6) == 0) fprintf(stderr, "remora-peak-kib: %lld\n", strtoll(line + 6, NULL, 10));
  fclose(status);
}

static void rt_finish(void) {
  if (fflush(stdout) != 0) rt_fail("cannot write the results");
}

/* ---- ordering, searching, random: sort, grade, f.sort, f.grade,
 * searchsorted, searchsorted/right, random.uniform, random.normal,
 * random.int (as the interpreter's sort.rs, search.rs, random.rs) ---- */

/* Atoms as keys that order as unsigned integers do: an Int with its sign
 * bit flipped; a Float ascending with -0.0 equal to 0.0 and every NaN
 * equal to every other, after +Infinity; #f before #t. */
static inline uint64_t rt_int_key(int64_t x) { return (uint64_t)x ^ (UINT64_C(1) << 63); }
static inline uint64_t rt_float_key(float x) {
  if (isnan(x)) return UINT64_MAX;
  uint32_t bits = 0;
  if (x != 0.0f) memcpy(&bits, &x, sizeof bits);
  uint32_t ordered = (bits & UINT32_C(0x80000000)) ? ~bits : (bits | UINT32_C(0x80000000));
  return (uint64_t)ordered << 32;
}
static inline uint64_t rt_bool_key(bool b) { return b ? 1 : 0; }

/* The stable permutation that orders `keys` (n of them) into `order`: a
 * bottom-up merge sort that takes from the right run only when its key is
 * strictly less. */
static bool rt_grade_counting(const uint64_t *keys, int64_t *order, int64_t n);
static void rt_grade_keys(const uint64_t *keys, int64_t *order, int64_t n) {
  if (rt_grade_counting(keys, order, n)) return;
  for (int64_t i = 0; i < n; i++) order[i] = i;
  if (n < 2) return;
  int64_t *buf = rt_alloc(n, sizeof *buf);
  int64_t *src = order, *dst = buf;
  for (int64_t width = 1; width < n; width *= 2) {
    for (int64_t lo = 0; lo < n; lo += 2 * width) {
      int64_t mid = lo + width < n ? lo + width : n;
      int64_t hi = lo + 2 * width < n ? lo + 2 * width : n;
      int64_t i = lo, j = mid, k = lo;
      while (i < mid && j < hi) dst[k++] = keys[src[j]] < keys[src[i]] ? src[j++] : src[i++];
      while (i < mid) dst[k++] = src[i++];
      while (j < hi) dst[k++] = src[j++];
    }
    int64_t *t = src;
    src = dst;
    dst = t;
  }
  if (src != order) memcpy(order, src, (size_t)n * sizeof *order);
  rt_free(buf);
}

/* sort, grade, f.sort, f.grade of the n atoms at xs[0], xs[stride] …:
 * the sorted atoms, or the grade, into `out` (contiguous). */
/* A stable radix sort of n atoms by their keys, as the interpreter's
 * sort.rs sorts: one scatter into 256 buckets by the highest byte on which
 * the keys differ, then each bucket (small enough to stay in cache) by a
 * least-significant-digit radix sort on the bytes below it, 8 bits a pass,
 * skipping the bytes on which the bucket's keys agree. Each atom travels
 * with its key, so equal keys of different atoms (-0.0 and 0.0, NaNs) keep
 * their order and their bits. On every thread: the key range and the
 * scatter by parts of the input (one histogram a part, so the scatter
 * stays stable), the buckets one by one. */
#define RT_RADIX_PARTS 64
#define RT_RADIX(T, NAME, KEY)                                                  \
  typedef struct {                                                              \
    const T *xs;                                                                \
    int64_t stride, n, parts;                                                   \
    T *out, *tmp;                                                               \
    uint64_t and_[RT_RADIX_PARTS], or_[RT_RADIX_PARTS];                         \
    int64_t count[RT_RADIX_PARTS][256];                                         \
    int64_t start[257];                                                         \
    int shift;                                                                  \
  } rt_radix_##NAME##_job;                                                      \
  static void rt_radix_##NAME##_range(void *raw, int64_t lo, int64_t hi) {      \
    rt_radix_##NAME##_job *j = raw;                                             \
    for (int64_t p = lo; p < hi; p++) {                                         \
      uint64_t a = UINT64_MAX, o = 0;                                           \
      for (int64_t i = j->n * p / j->parts; i < j->n * (p + 1) / j->parts; i++) { \
        uint64_t k = KEY(j->xs[i * j->stride]);                                 \
        a &= k;                                                                 \
        o |= k;                                                                 \
      }                                                                         \
      j->and_[p] = a;                                                           \
      j->or_[p] = o;                                                            \
    }                                                                           \
  }                                                                             \
  static void rt_radix_##NAME##_count(void *raw, int64_t lo, int64_t hi) {      \
    rt_radix_##NAME##_job *j = raw;                                             \
    for (int64_t p = lo; p < hi; p++) {                                         \
      int64_t *c = j->count[p];                                                 \
      memset(c, 0, 256 * sizeof *c);                                            \
      for (int64_t i = j->n * p / j->parts; i < j->n * (p + 1) / j->parts; i++) \
        c[(KEY(j->xs[i * j->stride]) >> j->shift) & 255]++;                     \
    }                                                                           \
  }                                                                             \
  static void rt_radix_##NAME##_scatter(void *raw, int64_t lo, int64_t hi) {    \
    rt_radix_##NAME##_job *j = raw;                                             \
    for (int64_t p = lo; p < hi; p++) {                                         \
      int64_t *next = j->count[p];                                              \
      for (int64_t i = j->n * p / j->parts; i < j->n * (p + 1) / j->parts; i++) { \
        T x = j->xs[i * j->stride];                                             \
        j->out[next[(KEY(x) >> j->shift) & 255]++] = x;                         \
      }                                                                         \
    }                                                                           \
  }                                                                             \
  static void rt_radix_##NAME##_buckets(void *raw, int64_t lo, int64_t hi) {    \
    rt_radix_##NAME##_job *j = raw;                                             \
    int bytes = j->shift / 8;                                                   \
    for (int64_t d = lo; d < hi; d++) {                                         \
      int64_t n = j->start[d + 1] - j->start[d];                                \
      if (n < 2) continue;                                                      \
      T *a = j->out + j->start[d], *tmp = j->tmp + j->start[d];                 \
      int64_t hist[7][256];                                                     \
      memset(hist, 0, sizeof hist);                                             \
      for (int64_t i = 0; i < n; i++) {                                         \
        uint64_t k = KEY(a[i]);                                                 \
        for (int p = 0; p < bytes; p++) hist[p][(k >> (8 * p)) & 255]++;       \
      }                                                                         \
      T *src = a, *dst = tmp;                                                   \
      for (int p = 0; p < bytes; p++) {                                         \
        int64_t *h = hist[p];                                                   \
        if (h[(KEY(src[0]) >> (8 * p)) & 255] == n) continue;                   \
        int64_t sum = 0;                                                        \
        for (int e = 0; e < 256; e++) {                                         \
          int64_t c = h[e];                                                     \
          h[e] = sum;                                                           \
          sum += c;                                                             \
        }                                                                       \
        for (int64_t i = 0; i < n; i++) dst[h[(KEY(src[i]) >> (8 * p)) & 255]++] = src[i]; \
        T *t = src;                                                             \
        src = dst;                                                              \
        dst = t;                                                                \
      }                                                                         \
      if (src != a) memcpy(a, src, (size_t)n * sizeof *a);                      \
    }                                                                           \
  }                                                                             \
  static void rt_radix_##NAME(const T *xs, int64_t stride, int64_t n, T *out) { \
    rt_radix_##NAME##_job *j = rt_alloc(1, sizeof *j);                          \
    j->xs = xs;                                                                 \
    j->stride = stride;                                                         \
    j->n = n;                                                                   \
    j->out = out;                                                               \
    j->parts = rt_threads < RT_RADIX_PARTS ? rt_threads : RT_RADIX_PARTS;       \
    if (j->parts < 1 || n < ((int64_t)1 << 17)) j->parts = 1;                   \
    uint64_t cost = (uint64_t)(n / j->parts) + 1;                               \
    rt_parallel_for(j->parts, cost, rt_radix_##NAME##_range, j);                \
    uint64_t and_ = UINT64_MAX, or_ = 0;                                        \
    for (int64_t p = 0; p < j->parts; p++) {                                    \
      and_ &= j->and_[p];                                                       \
      or_ |= j->or_[p];                                                         \
    }                                                                           \
    uint64_t differ = and_ ^ or_;                                               \
    if (differ == 0) {                                                          \
      for (int64_t i = 0; i < n; i++) out[i] = xs[i * stride];                  \
      rt_free(j);                                                               \
      return;                                                                   \
    }                                                                           \
    int top = 0;                                                                \
    while (top < 7 && (differ >> (8 * (top + 1))) != 0) top++;                 \
    j->shift = 8 * top;                                                         \
    rt_parallel_for(j->parts, cost, rt_radix_##NAME##_count, j);                \
    int64_t at = 0;                                                             \
    for (int d = 0; d < 256; d++) {                                             \
      j->start[d] = at;                                                         \
      for (int64_t p = 0; p < j->parts; p++) {                                  \
        int64_t c = j->count[p][d];                                             \
        j->count[p][d] = at;                                                    \
        at += c;                                                                \
      }                                                                         \
    }                                                                           \
    j->start[256] = at;                                                         \
    rt_parallel_for(j->parts, cost, rt_radix_##NAME##_scatter, j);              \
    if (top > 0) {                                                              \
      j->tmp = rt_alloc(n, sizeof *j->tmp);                                     \
      rt_parallel_for(256, (uint64_t)(n / 256) * (uint64_t)(top + 1) + 1,        \
                      rt_radix_##NAME##_buckets, j);                            \
      rt_free(j->tmp);                                                          \
    }                                                                           \
    rt_free(j);                                                                 \
  }
RT_RADIX(float, float, rt_float_key)
RT_RADIX(int64_t, int, rt_int_key)

static bool rt_grade_small_int(const int64_t *xs, int64_t stride, int64_t n, int64_t *out);
static bool rt_grade_small_float(const float *xs, int64_t stride, int64_t n, int64_t *out);
/* The longest row rt_sort_short sorts on the stack. */
#define RT_SORT_SHORT 256
/* A short row ordered on the stack (RT_ORDERING's rt_grade_short and
 * rt_sort_short): each atom's key with what the row carries (CARRY, of
 * type VT: the atom's index i for a grade, the atom v for a sort), runs of
 * 16 by insertion, then merged pairwise, equal keys taken from the left:
 * stable, with no allocation and no pass of the threads. */
#define RT_SHORT_ORDER(T, KEY, FN, VT, CARRY)                                \
  static void FN(const T *xs, int64_t stride, int64_t n, VT *out) {          \
    uint64_t key[2][RT_SORT_SHORT];                                          \
    VT val[2][RT_SORT_SHORT];                                                \
    for (int64_t i = 0; i < n; i++) {                                        \
      T v = xs[i * stride];                                                  \
      uint64_t k = KEY(v);                                                   \
      VT c = CARRY;                                                          \
      int64_t j = i;                                                         \
      for (; j % 16 != 0 && key[0][j - 1] > k; j--) {                        \
        key[0][j] = key[0][j - 1];                                           \
        val[0][j] = val[0][j - 1];                                           \
      }                                                                      \
      key[0][j] = k;                                                         \
      val[0][j] = c;                                                         \
    }                                                                        \
    int from = 0;                                                            \
    for (int64_t width = 16; width < n; width *= 2, from ^= 1) {             \
      uint64_t *ks = key[from], *kd = key[from ^ 1];                         \
      VT *vs = val[from], *vd = val[from ^ 1];                               \
      for (int64_t lo = 0; lo < n; lo += 2 * width) {                        \
        int64_t mid = lo + width < n ? lo + width : n;                       \
        int64_t hi = lo + 2 * width < n ? lo + 2 * width : n;                \
        int64_t i = lo, j = mid, k = lo;                                     \
        while (i < mid && j < hi) {                                          \
          bool right = ks[j] < ks[i];                                        \
          kd[k] = right ? ks[j] : ks[i];                                     \
          vd[k++] = right ? vs[j++] : vs[i++];                               \
        }                                                                    \
        for (; i < mid; i++, k++) kd[k] = ks[i], vd[k] = vs[i];              \
        for (; j < hi; j++, k++) kd[k] = ks[j], vd[k] = vs[j];               \
      }                                                                      \
    }                                                                        \
    memcpy(out, val[from], (size_t)n * sizeof *out);                         \
  }

#define RT_ORDERING(T, NAME, KEY)                                            \
  /* The grade of a short row (a grade lifted over the rows of a matrix: \
   * the median by f.grade) as rt_sort_short sorts it, each index with its \
   * atom's key on the stack: stable, so the one permutation the merge    \
   * sort below gives, with no allocation (two a row before). */          \
  RT_SHORT_ORDER(T, KEY, rt_grade_short_##NAME, int64_t, i)                  \
  static void rt_grade_##NAME(const T *xs, int64_t stride, int64_t n, int64_t *out) { \
    if (n <= RT_SORT_SHORT) {                                                \
      rt_grade_short_##NAME(xs, stride, n, out);                             \
      return;                                                                \
    }                                                                        \
    if (rt_grade_small_##NAME(xs, stride, n, out)) return;                   \
    uint64_t *keys = rt_alloc(n, sizeof *keys);                              \
    for (int64_t i = 0; i < n; i++) keys[i] = KEY(xs[i * stride]);           \
    rt_grade_keys(keys, out, n);                                             \
    rt_free(keys);                                                              \
  }                                                                          \
  /* A short row (a sort lifted over the rows of a matrix) sorted on the  \
   * stack, stable, as the grade above. */                                 \
  RT_SHORT_ORDER(T, KEY, rt_sort_short_##NAME, T, v)                         \
  static void rt_sort_##NAME(const T *xs, int64_t stride, int64_t n, T *out) { \
    if (n >= 4096) {                                                         \
      rt_radix_##NAME(xs, stride, n, out);                                   \
      return;                                                                \
    }                                                                        \
    if (n <= RT_SORT_SHORT) {                                                \
      rt_sort_short_##NAME(xs, stride, n, out);                              \
      return;                                                                \
    }                                                                        \
    int64_t *order = rt_alloc(n, sizeof *order);                             \
    rt_grade_##NAME(xs, stride, n, order);                                   \
    for (int64_t i = 0; i < n; i++) out[i] = xs[order[i] * stride];          \
    rt_free(order);                                                             \
  }
RT_ORDERING(int64_t, int, rt_int_key)
RT_ORDERING(float, float, rt_float_key)

/* The k atoms at the top (greatest: positions n-k … n-1 of the stable
 * sort) or the bottom (positions 0 … k-1) of a row, in that order, as
 * `take-right k` or `take k` of its sort gives them, without sorting it:
 * one pass keeping the k atoms so far in order with their keys (k at most
 * RT_SELECT_MOST). Atoms of equal keys (0.0 and -0.0, NaNs) keep the
 * order they have in the row, as the stable sort does: a later atom is
 * above an earlier one of the same key. */
#define RT_SELECT_MOST 32
#define RT_SELECT(T, NAME, KEY)                                              \
  static void rt_select_##NAME(const T *xs, int64_t stride, int64_t n, int64_t k, bool top, T *out) { \
    uint64_t key[RT_SELECT_MOST];                                            \
    T val[RT_SELECT_MOST];                                                   \
    int64_t held = 0;                                                        \
    for (int64_t i = 0; i < n; i++) {                                        \
      T v = xs[i * stride];                                                  \
      uint64_t c = KEY(v);                                                   \
      int64_t j;                                                             \
      if (held < k) {                                                        \
        /* Still filling: after every held atom of a key not above c. */    \
        for (j = held++; j > 0 && key[j - 1] > c; j--) {                     \
          key[j] = key[j - 1];                                               \
          val[j] = val[j - 1];                                               \
        }                                                                    \
      } else if (top) {                                                      \
        /* Above the least held (an equal key too: it comes later): that  \
         * one goes, c after every held key not above it. */               \
        if (k == 0 || c < key[0]) continue;                                  \
        for (j = 0; j + 1 < k && key[j + 1] <= c; j++) {                     \
          key[j] = key[j + 1];                                               \
          val[j] = val[j + 1];                                               \
        }                                                                    \
      } else {                                                               \
        /* Below the greatest held (strictly: an equal key comes later):   \
         * that one goes, c after every held key not above it. */          \
        if (k == 0 || c >= key[k - 1]) continue;                             \
        for (j = k - 1; j > 0 && key[j - 1] > c; j--) {                      \
          key[j] = key[j - 1];                                               \
          val[j] = val[j - 1];                                               \
        }                                                                    \
      }                                                                      \
      key[j] = c;                                                            \
      val[j] = v;                                                            \
    }                                                                        \
    memcpy(out, val, (size_t)k * sizeof *out);                               \
  }
RT_SELECT(int64_t, int, rt_int_key)
RT_SELECT(float, float, rt_float_key)

/* Whether the n breakpoints at row[0], row[stride] … are out of
 * ascending order (searchsorted's check, made before its search: once
 * before a loop of searches in breakpoints the loop does not write, see
 * allocate/checks.rs). */
#define RT_UNSORTED(T, NAME, KEY)                                            \
  static bool rt_unsorted_##NAME(const T *row, int64_t stride, int64_t n) { \
    for (int64_t j = 1; j < n; j++)                                          \
      if (KEY(row[(j - 1) * stride]) > KEY(row[j * stride])) return true;   \
    return false;                                                            \
  }

/* searchsorted (right: searchsorted/right) of v among the n breakpoints
 * at row[0], row[stride] …: how many are less than v (right: not greater);
 * the breakpoints checked already (rt_unsorted_…). */
#define RT_SEARCH(T, NAME, KEY)                                              \
  static int64_t rt_search_##NAME(const T *row, int64_t stride, int64_t n, T v, bool right) { \
    uint64_t k = KEY(v);                                                     \
    int64_t lo = 0, hi = n;                                                  \
    while (lo < hi) {                                                        \
      int64_t mid = lo + (hi - lo) / 2;                                      \
      uint64_t m = KEY(row[mid * stride]);                                   \
      if (right ? m <= k : m < k) lo = mid + 1;                              \
      else hi = mid;                                                         \
    }                                                                        \
    return lo;                                                               \
  }
RT_SEARCH(int64_t, int, rt_int_key)
RT_SEARCH(float, float, rt_float_key)
RT_SEARCH(bool, bool, rt_bool_key)
/* Whether the atoms off + stride * j, j < n, of a buffer of len atoms
 * all lie inside it (the guard of a scan's verdict computed before a
 * loop, where the scan would not have run: allocate/checks.rs). */
static inline bool rt_span_within(int64_t len, int64_t off, int64_t stride, int64_t n) {
  if (n <= 0) return true;
  if (off < 0 || off >= len) return false;
  __int128 last = (__int128)off + (__int128)stride * (__int128)(n - 1);
  return last >= 0 && last < len;
}
RT_UNSORTED(int64_t, int, rt_int_key)
RT_UNSORTED(float, float, rt_float_key)
RT_UNSORTED(bool, bool, rt_bool_key)

/* Philox4x32-10 (Random123) and the mapping of random.rs: key = the
 * seed's words, low first; counter = (i low, i high, draw, tag) with tag
 * 0 uniform, 1 normal, 2 int. */
static void rt_philox(const uint32_t counter[4], const uint32_t key[2], uint32_t out[4]) {
  uint32_t c0 = counter[0], c1 = counter[1], c2 = counter[2], c3 = counter[3];
  uint32_t k0 = key[0], k1 = key[1];
  for (int round = 0; round < 10; round++) {
    if (round > 0) {
      k0 += UINT32_C(0x9E3779B9);
      k1 += UINT32_C(0xBB67AE85);
    }
    uint64_t p0 = (uint64_t)UINT32_C(0xD2511F53) * c0;
    uint64_t p1 = (uint64_t)UINT32_C(0xCD9E8D57) * c2;
    uint32_t hi0 = (uint32_t)(p0 >> 32), lo0 = (uint32_t)p0;
    uint32_t hi1 = (uint32_t)(p1 >> 32), lo1 = (uint32_t)p1;
    uint32_t n0 = hi1 ^ c1 ^ k0, n1 = lo1, n2 = hi0 ^ c3 ^ k1, n3 = lo0;
    c0 = n0;
    c1 = n1;
    c2 = n2;
    c3 = n3;
  }
  out[0] = c0;
  out[1] = c1;
  out[2] = c2;
  out[3] = c3;
}
static void rt_random_block(int64_t seed, int64_t i, uint32_t draw, uint32_t tag, uint32_t out[4]) {
  uint64_t s = (uint64_t)seed, c = (uint64_t)i;
  uint32_t counter[4] = {(uint32_t)c, (uint32_t)(c >> 32), draw, tag};
  uint32_t key[2] = {(uint32_t)s, (uint32_t)(s >> 32)};
  rt_philox(counter, key, out);
}
static inline float rt_random_uniform(int64_t seed, int64_t i) {
  uint32_t x[4];
  rt_random_block(seed, i, 0, 0, x);
  return (float)(x[0] >> 8) * (1.0f / 16777216.0f);
}
static inline float rt_random_normal(int64_t seed, int64_t i) {
  uint32_t x[4];
  rt_random_block(seed, i, 0, 1, x);
  double scale = 1.0 / 4294967296.0;
  double u1 = ((double)x[0] + 1.0) * scale;
  double u2 = (double)x[1] * scale;
  return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}
static inline int64_t rt_random_int(int64_t seed, int64_t i, int64_t lo, int64_t hi) {
  if (hi <= lo) rt_fail("random.int: the range [lo, hi) is empty");
  uint64_t range = (uint64_t)hi - (uint64_t)lo;
  uint64_t uneven = (0 - range) % range;
  uint64_t last = 0;
  for (uint64_t draw = 0; draw <= UINT32_MAX; draw++) {
    uint32_t x[4];
    rt_random_block(seed, i, (uint32_t)draw, 2, x);
    uint64_t candidates[2] = {(uint64_t)x[0] | ((uint64_t)x[1] << 32), (uint64_t)x[2] | ((uint64_t)x[3] << 32)};
    for (int c = 0; c < 2; c++) {
      unsigned __int128 product = (unsigned __int128)candidates[c] * range;
      last = (uint64_t)(product >> 64);
      if ((uint64_t)product >= uneven) return (int64_t)((uint64_t)lo + last);
    }
  }
  return (int64_t)((uint64_t)lo + last);
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
/* ---- boxes: unique, unique-counts (as the interpreter's search.rs) ----
 * The distinct atoms of x (n of them, `stride` apart) in ascending order
 * of their keys, the first in x standing for equal ones, and how many
 * times each occurs; *k is how many there are. */
static void rt_unique_runs(const uint64_t *keys, int64_t n, int64_t *first, int64_t *counts, int64_t *k) {
  int64_t *order = rt_alloc(n, sizeof *order);
  rt_grade_keys(keys, order, n);
  int64_t m = 0;
  for (int64_t j = 0; j < n; j++) {
    int64_t i = order[j];
    if (m > 0 && keys[i] == keys[first[m - 1]]) {
      counts[m - 1]++;
    } else {
      first[m] = i;
      counts[m] = 1;
      m++;
    }
  }
  rt_free(order);
  *k = m;
}
#define RT_UNIQUE(NAME, T, KEY)                                                              \
  static void NAME(const T *x, int64_t stride, int64_t n, T *values, int64_t *counts, int64_t *k) { \
    uint64_t *keys = rt_alloc(n, sizeof *keys);                                              \
    int64_t *first = rt_alloc(n, sizeof *first);                                             \
    for (int64_t i = 0; i < n; i++) keys[i] = KEY(x[i * stride]);                            \
    rt_unique_runs(keys, n, first, counts, k);                                               \
    for (int64_t j = 0; j < *k; j++) values[j] = x[first[j] * stride];                       \
    rt_free(keys);                                                                              \
    rt_free(first);                                                                             \
  }
RT_UNIQUE(rt_unique_i64, int64_t, rt_int_key)
RT_UNIQUE(rt_unique_f32, float, rt_float_key)
RT_UNIQUE(rt_unique_bool, bool, rt_bool_key)

/* ---- files: read-file-f32bin ---- */
#include <sys/stat.h>

/* The file name given as `len` code points (ASCII only: anything else, a
 * file that is not a regular one or is too short, and any file in a
 * sandbox (REMORA_SANDBOX), fail, and the interpreter, run again, gives
 * the result or its message). */
static void rt_file_name(const int64_t *path, int64_t stride, int64_t len, char *name) {
  if (getenv("REMORA_SANDBOX") != NULL) rt_fail("a file read in a sandbox");
  if (len <= 0 || len > 4096) rt_fail("a file name");
  for (int64_t i = 0; i < len; i++) {
    int64_t c = path[i * stride];
    if (c <= 0 || c > 127) rt_fail("a file name");
    name[i] = (char)c;
  }
  name[len] = 0;
}

/* Whether the file can hold `n` floats (before room is made for them). */
static void rt_check_f32bin(const int64_t *path, int64_t stride, int64_t len, int64_t n) {
  char name[4097];
  rt_file_name(path, stride, len, name);
  struct stat st;
  if (stat(name, &st) != 0 || !S_ISREG(st.st_mode)) rt_fail("read-file-f32bin: not a regular file");
  /* (A file of /proc says it holds 0 bytes, and holds more.) */
  if (n < 0 || (st.st_size > 0 && (uint64_t)n > (uint64_t)st.st_size / 4)) rt_fail("read-file-f32bin: too short");
}

static void rt_read_f32bin(const int64_t *path, int64_t stride, int64_t len, int64_t n, float *dest) {
  char name[4097];
  rt_file_name(path, stride, len, name);
  struct stat st;
  if (stat(name, &st) != 0 || !S_ISREG(st.st_mode)) rt_fail("read-file-f32bin: not a regular file");
  FILE *f = fopen(name, "rb");
  if (f == NULL) rt_fail("read-file-f32bin: cannot open");
  for (int64_t i = 0; i < n; i++) {
    unsigned char b[4];
    if (fread(b, 1, 4, f) != 4) {
      fclose(f);
      rt_fail("read-file-f32bin: too short");
    }
    uint32_t u = (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
    memcpy(&dest[i], &u, sizeof u);
  }
  fclose(f);
}

/* ---- vectors of eight and four floats, and their shuffles (GCC before
 * 12 has only __builtin_shuffle, with a mask vector) ---- */
typedef float rt_lv8 __attribute__((vector_size(32), aligned(4)));
typedef float rt_lv4 __attribute__((vector_size(16), aligned(4)));
#if defined(__clang__) || __GNUC__ >= 12
#define RT_SHUF8(a, b, i0, i1, i2, i3, i4, i5, i6, i7) __builtin_shufflevector(a, b, i0, i1, i2, i3, i4, i5, i6, i7)
#define RT_SHUF4(a, b, i0, i1, i2, i3) __builtin_shufflevector(a, b, i0, i1, i2, i3)
/* Four floats at lo, then four at hi: two loads into the halves of a
 * register (the fallback's copy through memory is a store the load cannot
 * take its value from: ~2.5x the time of a whole float sum by leaves). */
static inline rt_lv8 rt_lv8_halves(const float *lo, const float *hi) {
  rt_lv4 a, b;
  memcpy(&a, lo, sizeof a);
  memcpy(&b, hi, sizeof b);
  return __builtin_shufflevector(a, b, 0, 1, 2, 3, 4, 5, 6, 7);
}
#else
typedef int32_t rt_lv8i __attribute__((vector_size(32)));
typedef int32_t rt_lv4i __attribute__((vector_size(16)));
#define RT_SHUF8(a, b, i0, i1, i2, i3, i4, i5, i6, i7) __builtin_shuffle(a, b, (rt_lv8i){i0, i1, i2, i3, i4, i5, i6, i7})
#define RT_SHUF4(a, b, i0, i1, i2, i3) __builtin_shuffle(a, b, (rt_lv4i){i0, i1, i2, i3})
static inline rt_lv8 rt_lv8_halves(const float *lo, const float *hi) {
  float two[8];
  memcpy(two, lo, 4 * sizeof(float));
  memcpy(two + 4, hi, 4 * sizeof(float));
  rt_lv8 r;
  memcpy(&r, two, sizeof r);
  return r;
}
#endif
/* Item t … t+7 of eight leaves (from p[0] … p[7]) as eight vectors, item
 * t+j of every leaf in c[j]: rows [leaf k | leaf k+4], four items each,
 * transposed in the 128-bit halves. */
static inline void rt_lv8_tile(const float *const *p, int64_t t, rt_lv8 *c) {
  rt_lv8 r[8];
  for (int h = 0; h < 2; h++) {
    for (int k = 0; k < 4; k++) r[k] = rt_lv8_halves(p[k] + t + 4 * h, p[k + 4] + t + 4 * h);
    rt_lv8 u0 = RT_SHUF8(r[0], r[1], 0, 8, 1, 9, 4, 12, 5, 13), u1 = RT_SHUF8(r[0], r[1], 2, 10, 3, 11, 6, 14, 7, 15);
    rt_lv8 u2 = RT_SHUF8(r[2], r[3], 0, 8, 1, 9, 4, 12, 5, 13), u3 = RT_SHUF8(r[2], r[3], 2, 10, 3, 11, 6, 14, 7, 15);
    c[4 * h] = RT_SHUF8(u0, u2, 0, 1, 8, 9, 4, 5, 12, 13);
    c[4 * h + 1] = RT_SHUF8(u0, u2, 2, 3, 10, 11, 6, 7, 14, 15);
    c[4 * h + 2] = RT_SHUF8(u1, u3, 0, 1, 8, 9, 4, 5, 12, 13);
    c[4 * h + 3] = RT_SHUF8(u1, u3, 2, 3, 10, 11, 6, 7, 14, 15);
  }
}
static inline void rt_lv4_tile(const float *const *p, int64_t t, rt_lv4 *c) {
  rt_lv4 r[4];
  for (int k = 0; k < 4; k++) memcpy(&r[k], p[k] + t, sizeof r[k]);
  rt_lv4 u0 = RT_SHUF4(r[0], r[1], 0, 4, 1, 5), u1 = RT_SHUF4(r[0], r[1], 2, 6, 3, 7);
  rt_lv4 u2 = RT_SHUF4(r[2], r[3], 0, 4, 1, 5), u3 = RT_SHUF4(r[2], r[3], 2, 6, 3, 7);
  c[0] = RT_SHUF4(u0, u2, 0, 1, 4, 5);
  c[1] = RT_SHUF4(u0, u2, 2, 3, 6, 7);
  c[2] = RT_SHUF4(u1, u3, 0, 1, 4, 5);
  c[3] = RT_SHUF4(u1, u3, 2, 3, 6, 7);
}

/* ---- linear algebra: contractions (f.matmul, and a lifted dot: a map
 * over a float sum of products) ----
 * c(i, j) = the sum over p < k of a(i, p) · b(j, p), for i < m, j < n,
 * each operand at its own strides (a(i, p) = a[i·as_i + p·as_p], …; a
 * stride may be 0), every sum in a fixed order of the interpreter's:
 * the items split into leaves (`rt_ct_tree`), each summed left to right
 * from its first product, the leaves' sums combined as a postorder
 * program says (a tree, or one after another), the seed added last.
 * A register tile of RT_CT_MR rows × one vector of RT_CT_NR columns (16
 * accumulators; each multiply takes its item of a from memory,
 * broadcast, so the multiplies and the adds keep the two pairs of
 * vector pipes busy) runs over a strip of a and a panel of b, both
 * packed item-major once: b whole, by all threads, before the products;
 * a by bands of RT_CT_MC rows, or read in place where that is as good (a
 * transposed a: x^T · delta of a backward pass, its strip's rows one line
 * at each item; or a row-major a times one panel: packing 8.7 of 15 us
 * of a 256×128 · 128×10, a's 256×784 transposed packed in 58 of 290
 * us). A band's columns, in chunks of RT_CT_CW,
 * are one thread's work (the chunk's partial sums, one per open node of
 * the tree, stay in its core's cache); each panel's items RT_CT_KC at a
 * time, for every strip of the band (the panel's part stays in L1).
 * Multiplies and adds stay separate (no contraction): the bits are the
 * interpreter's. Int sums wrap (any order gives the same). */
#define RT_CT_MR 16
#define RT_CT_NR 16
#define RT_CT_MC 64
#define RT_CT_CW 256
#define RT_CT_KC 128
#define RT_CT_LEAF 256
typedef float rt_ct_vec __attribute__((vector_size(64), aligned(4)));
#if defined(__clang__) || __GNUC__ >= 12
#define RT_SHUF16(a, b, ...) __builtin_shufflevector(a, b, __VA_ARGS__)
#else
typedef int32_t rt_ct_veci __attribute__((vector_size(64)));
#define RT_SHUF16(a, b, ...) __builtin_shuffle(a, b, (rt_ct_veci){__VA_ARGS__})
#endif

/* 16 items of a strip of 16 rows of a row-major a (row r's at src + r ·
 * rs) packed item-major at dst (item x's rows at dst + 16 x): the 16 × 16
 * block transposed in registers (rows i and i + d exchanging their
 * halves of 2d lanes, d = 8, 4, 2, 1), not written a float at a time. */
static inline void rt_ct_pack16(const float *src, int64_t rs, float *dst) {
  rt_ct_vec v[16];
  for (int r = 0; r < 16; r++) memcpy(&v[r], src + r * rs, sizeof v[r]);
    for (int i = 0; i < 16; i++)
      if ((i & 8) == 0) {
        rt_ct_vec x = v[i], y = v[i + 8];
        v[i] = RT_SHUF16(x, y, 0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23);
        v[i + 8] = RT_SHUF16(x, y, 8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31);
      }
    for (int i = 0; i < 16; i++)
      if ((i & 4) == 0) {
        rt_ct_vec x = v[i], y = v[i + 4];
        v[i] = RT_SHUF16(x, y, 0, 1, 2, 3, 16, 17, 18, 19, 8, 9, 10, 11, 24, 25, 26, 27);
        v[i + 4] = RT_SHUF16(x, y, 4, 5, 6, 7, 20, 21, 22, 23, 12, 13, 14, 15, 28, 29, 30, 31);
      }
    for (int i = 0; i < 16; i++)
      if ((i & 2) == 0) {
        rt_ct_vec x = v[i], y = v[i + 2];
        v[i] = RT_SHUF16(x, y, 0, 1, 16, 17, 4, 5, 20, 21, 8, 9, 24, 25, 12, 13, 28, 29);
        v[i + 2] = RT_SHUF16(x, y, 2, 3, 18, 19, 6, 7, 22, 23, 10, 11, 26, 27, 14, 15, 30, 31);
      }
    for (int i = 0; i < 16; i++)
      if ((i & 1) == 0) {
        rt_ct_vec x = v[i], y = v[i + 1];
        v[i] = RT_SHUF16(x, y, 0, 16, 2, 18, 4, 20, 6, 22, 8, 24, 10, 26, 12, 28, 14, 30);
        v[i + 1] = RT_SHUF16(x, y, 1, 17, 3, 19, 5, 21, 7, 23, 9, 25, 11, 27, 13, 29, 15, 31);
      }
  for (int x = 0; x < 16; x++) memcpy(dst + 16 * x, &v[x], sizeof v[x]);
}

/* A contraction so small (a 3×3 product in a cell of a lifted matmul)
 * that packing, the leaves' bookkeeping and the thread pool cost more
 * than the products: plain loops on this thread, one leaf (k ≤ 256). */
static inline int rt_ct_small(int64_t m, int64_t n, int64_t k) {
  return k <= RT_CT_LEAF && m <= 64 && n <= 64 && m * n * k <= 4096;
}

/* The leaves of the interpreter's tree over n > 256 items (halves: the
 * first ⌊n/2⌋ and the rest) into bounds, and after each leaf how many of
 * the tree's nodes it completes (the pops of the postorder program). */
static void rt_ct_tree(int64_t lo, int64_t hi, int64_t *bounds, int64_t *pops, int64_t *leaves) {
  if (hi - lo <= RT_CT_LEAF) {
    bounds[*leaves] = lo;
    pops[*leaves] = 0;
    ++*leaves;
    bounds[*leaves] = hi;
    return;
  }
  int64_t mid = lo + (hi - lo) / 2;
  rt_ct_tree(lo, mid, bounds, pops, leaves);
  rt_ct_tree(mid, hi, bounds, pops, leaves);
  pops[*leaves - 1]++;
}

typedef struct {
  const float *a, *b;
  int64_t as_i, as_p, bs_j, bs_p;
  int64_t m, n, k, npad;
  float *c;
  int64_t cs_i, cs_j;
  const float *bpack;    /* per leaf, per panel: kc × NR */
  const int64_t *bounds; /* leaf t: items bounds[t] … bounds[t+1]-1 */
  const int64_t *pops;
  int64_t leaves, depth;
  int64_t groups, per;   /* a band's chunks: `groups` work items of `per` chunks */
  int from_seed;         /* one leaf, folded from the seed */
  int has_seed;
  float seed;
} rt_ct_job;

/* Where a tile's sums start: its first product, `start`, or the partial
 * sums at `in` (the items before these). */
enum { RT_CT_FIRST, RT_CT_START, RT_CT_MORE };

/* One tile: the sums of the products of items 0 … kc-1 of a strip of MR
 * rows (row r's item kk at ap[r·RS + kk·KS]) and a panel (kc × NR),
 * combined with `pops` tiles of the stack (each the left operand),
 * written to out (row stride `ld`). The strip packed (item-major: RS 1,
 * KS MR), read in place where a is transposed (a strip's rows side by
 * side: RS 1, KS its item stride `ks`) or row-major (RS its row stride
 * `rs`, KS 1); and a tile of a single row (a band of one row). */
#define RT_CT_TILE(NAME, MR, RS, KS)                                                                            \
  __attribute__((noinline)) static void NAME(const float *ap, int64_t rs, int64_t ks, const float *bp, int64_t kc, int mode, float start, \
                   const float *in, float *const *stack, int64_t pops, float *out, int64_t ld) {            \
    (void)rs, (void)ks;                                                                                   \
    rt_ct_vec acc[MR];                                                                                    \
    int64_t kk = 0;                                                                                       \
    if (mode == RT_CT_MORE) {                                                                             \
      _Pragma("GCC unroll 16") for (int r = 0; r < MR; r++) acc[r] = *(const rt_ct_vec *)(in + r * ld);  \
    } else if (mode == RT_CT_START) {                                                                     \
      /* (start - 0 is start, -0.0 too) */                                                                \
      _Pragma("GCC unroll 16") for (int r = 0; r < MR; r++) acc[r] = start - (rt_ct_vec){0};             \
    } else {                                                                                              \
      rt_ct_vec b = *(const rt_ct_vec *)bp;                                                               \
      _Pragma("GCC unroll 16") for (int r = 0; r < MR; r++) acc[r] = ap[r * (RS)] * b;                    \
      kk = 1;                                                                                             \
    }                                                                                                     \
    for (; kk < kc; kk++) {                                                                               \
      const float *a = ap + kk * (KS);                                                                    \
      rt_ct_vec b = *(const rt_ct_vec *)(bp + kk * RT_CT_NR);                                             \
      _Pragma("GCC unroll 16") for (int r = 0; r < MR; r++) {                                            \
        rt_ct_vec t = a[r * (RS)] * b;                                                                    \
        acc[r] = acc[r] + t;                                                                              \
      }                                                                                                   \
    }                                                                                                     \
    for (int64_t q = 0; q < pops; q++) {                                                                  \
      const float *s = stack[-1 - q];                                                                     \
      _Pragma("GCC unroll 16") for (int r = 0; r < MR; r++) acc[r] = *(const rt_ct_vec *)(s + r * ld) + acc[r]; \
    }                                                                                                     \
    _Pragma("GCC unroll 16") for (int r = 0; r < MR; r++) *(rt_ct_vec *)(out + r * ld) = acc[r];          \
  }
RT_CT_TILE(rt_ct_tile, RT_CT_MR, 1, RT_CT_MR)
RT_CT_TILE(rt_ct_tile_cols, RT_CT_MR, 1, ks)
RT_CT_TILE(rt_ct_tile_rows, RT_CT_MR, rs, 1)
RT_CT_TILE(rt_ct_tile1, 1, 1, 1)

/* Leaf k0 … k0+kc-1 of b, its panels of columns j_lo … j_hi-1, packed
 * item-major at leaf (panel j0 at leaf + j0 · kc). */
static void rt_ct_pack_leaf(const rt_ct_job *j, int64_t k0, int64_t kc, int64_t j_lo, int64_t j_hi, float *leaf) {
  for (int64_t j0 = j_lo; j0 < j_hi; j0 += RT_CT_NR) {
    float *panel = leaf + j0 * kc;
    int64_t nr = j->n - j0 < RT_CT_NR ? j->n - j0 : RT_CT_NR;
    for (int64_t kk = 0; kk < kc; kk++) {
      const float *src = j->b + (k0 + kk) * j->bs_p + j0 * j->bs_j;
      float *dst = panel + kk * RT_CT_NR;
      if (j->bs_j == 1)
        for (int64_t x = 0; x < nr; x++) dst[x] = src[x];
      else
        for (int64_t x = 0; x < nr; x++) dst[x] = src[x * j->bs_j];
      for (int64_t x = nr; x < RT_CT_NR; x++) dst[x] = 0.0f;
    }
  }
}
static void rt_ct_pack_b(void *raw, int64_t lo, int64_t hi) {
  const rt_ct_job *j = raw;
  for (int64_t t = lo; t < hi; t++) {
    int64_t k0 = j->bounds[t], kc = j->bounds[t + 1] - k0;
    rt_ct_pack_leaf(j, k0, kc, 0, j->npad, (float *)j->bpack + k0 * j->npad);
  }
}

/* Whether a band of mc rows reads a in place, unpacked: a band of whole
 * strips where a is transposed (a strip's rows side by side, each item
 * one line: the packed layout, at another item stride), or row-major
 * and the band's strips are read once (one panel of columns: packing
 * would only copy them). */
static bool rt_ct_in_place(const rt_ct_job *j, int64_t mc) {
  return mc % RT_CT_MR == 0 && (j->as_i == 1 || (j->as_p == 1 && j->npad == RT_CT_NR));
}

/* Work item w: the rows of band w / groups (all items of a packed once
 * per band, or read in place), the chunks of columns of group w % groups.
 * A band of one row (a vector times a matrix) takes the tile of one row. */
static void rt_ct_band(void *raw, int64_t lo, int64_t hi) {
  const rt_ct_job *j = raw;
  const int64_t ld = j->npad < RT_CT_CW ? j->npad : RT_CT_CW, chunks = (j->npad + RT_CT_CW - 1) / RT_CT_CW;
  float *apack = NULL;
  float *stack_mem = rt_alloc((j->depth + 1) * RT_CT_MC * ld, sizeof(float));
  float *stack[66];
  for (int64_t s = 0; s <= j->depth && s < 66; s++) stack[s] = stack_mem + s * RT_CT_MC * ld;
  int64_t packed = -1;
  for (int64_t w = lo; w < hi; w++) {
    int64_t band = w / j->groups, group = w % j->groups;
    int64_t i0 = band * RT_CT_MC, mc = j->m - i0 < RT_CT_MC ? j->m - i0 : RT_CT_MC;
    int mr = mc == 1 ? 1 : RT_CT_MR;
    int64_t strips = (mc + mr - 1) / mr, rows = strips * mr;
    bool in_place = mr == RT_CT_MR && rt_ct_in_place(j, mc);
    if (!in_place && band != packed) {
      if (apack == NULL) apack = rt_alloc(RT_CT_MC * j->k, sizeof(float));
      /* Leaf by leaf (at k0 · rows), strips of mr rows, item-major, a
       * strip's rows 16 items at a time (a line of each row, written as
       * 16 lines of the strip; the next lines fetched meanwhile). */
      for (int64_t t = 0; t < j->leaves; t++) {
        int64_t k0 = j->bounds[t], kc = j->bounds[t + 1] - k0;
        for (int64_t s = 0; s < strips; s++)
          for (int64_t kb = 0; kb < kc; kb += 16) {
            int64_t kn = kc - kb < 16 ? kc - kb : 16;
            if (mr == 16 && kn == 16 && (s + 1) * mr <= mc && j->as_p == 1) {
              rt_ct_pack16(j->a + (i0 + s * mr) * j->as_i + k0 + kb, j->as_i, apack + k0 * rows + s * kc * mr + kb * mr);
              continue;
            }
            for (int64_t i = s * mr; i < (s + 1) * mr; i++) {
              float *dst = apack + k0 * rows + s * kc * mr + kb * mr + i % mr;
              const float *src = j->a + (i0 + i) * j->as_i + (k0 + kb) * j->as_p;
              if (i >= mc) {
                for (int64_t x = 0; x < kn; x++) dst[x * mr] = 0.0f;
              } else if (j->as_p == 1) {
                __builtin_prefetch(src + 64);
                for (int64_t x = 0; x < kn; x++) dst[x * mr] = src[x];
              } else {
                for (int64_t x = 0; x < kn; x++) dst[x * mr] = src[x * j->as_p];
              }
            }
          }
      }
      packed = band;
    }
    int64_t ch1 = (group + 1) * j->per < chunks ? (group + 1) * j->per : chunks;
    for (int64_t ch = group * j->per; ch < ch1; ch++) {
      int64_t c0 = ch * RT_CT_CW, c1 = c0 + RT_CT_CW < j->npad ? c0 + RT_CT_CW : j->npad;
      int64_t sp = 0;
      for (int64_t t = 0; t < j->leaves; t++) {
        int64_t k0 = j->bounds[t], kc = j->bounds[t + 1] - k0;
        int64_t pops = j->pops[t];
        /* The leaf's sums go to the stack's slot sp - pops (after the
         * pops), its partial sums meanwhile to slot sp (free). */
        float *out = stack[sp - pops], *part = stack[sp];
        const float *leaf_b = j->bpack + k0 * j->npad;
        for (int64_t j0 = c0; j0 < c1; j0 += RT_CT_NR)
          for (int64_t kb = 0; kb < kc; kb += RT_CT_KC) {
            int64_t kn = kc - kb < RT_CT_KC ? kc - kb : RT_CT_KC;
            int last = kb + kn == kc;
            int mode = kb > 0 ? RT_CT_MORE : j->from_seed ? RT_CT_START : RT_CT_FIRST;
            for (int64_t s = 0; s < strips; s++) {
              int64_t at = s * mr * ld + (j0 - c0);
              float *tops[66];
              int64_t q_n = last ? pops : 0;
              for (int64_t q = 0; q < q_n; q++) tops[q] = stack[sp - pops + q] + at;
              const float *b = leaf_b + j0 * kc + kb * RT_CT_NR;
              float *to = (last ? out : part) + at;
              if (in_place) {
                const float *a = j->a + (i0 + s * mr) * j->as_i + (k0 + kb) * j->as_p;
                (j->as_i == 1 ? rt_ct_tile_cols : rt_ct_tile_rows)(a, j->as_i, j->as_p, b, kn, mode, j->seed,
                                                                   part + at, tops + q_n, q_n, to, ld);
              } else {
                const float *a = apack + k0 * rows + (s * kc + kb) * mr;
                (mr == 1 ? rt_ct_tile1 : rt_ct_tile)(a, 0, 0, b, kn, mode, j->seed, part + at, tops + q_n, q_n, to, ld);
              }
            }
          }
        sp = sp - pops + 1;
      }
      /* The total, the seed added first. */
      int64_t x1 = c1 < j->n ? c1 : j->n;
      for (int64_t i = 0; i < mc; i++)
        for (int64_t x = c0; x < x1; x++) {
          float v = stack[0][i * ld + x - c0];
          j->c[(i0 + i) * j->cs_i + x * j->cs_j] = j->has_seed && !j->from_seed ? j->seed + v : v;
        }
    }
  }
  rt_free(apack);
  rt_free(stack_mem);
}

/* Where a contraction's bands and chunks are fewer work items than
 * threads (few rows and columns, a long axis: the covariance of 16
 * variables over 500,000 observations is one band of one chunk), its
 * leaves are split among the threads: each (leaf, band and chunk) a
 * work item, the leaf's sums (from its first product, as rt_ct_band sums
 * a leaf) into its own m × n block of `sums`; then this thread combines
 * the leaves' sums as the postorder program says. The same additions in
 * the same order: the same bits on any number of threads. A window of
 * leaves at a time, at most RT_CT_SPLIT floats of sums. */
#define RT_CT_SPLIT (1 << 22)
typedef struct {
  const rt_ct_job *j;
  int64_t t0, items;
  float *sums;
} rt_ct_split_job;
static void rt_ct_split_task(void *raw, int64_t lo, int64_t hi) {
  const rt_ct_split_job *s = raw;
  const rt_ct_job *j = s->j;
  /* (b not packed ahead: each work item packs its leaf's panels of its
   * chunks of columns here, while they are in the cache) */
  float *local = j->bpack == NULL ? rt_alloc(RT_CT_LEAF * j->npad, sizeof(float)) : NULL;
  for (int64_t u = lo; u < hi; u++) {
    int64_t t = s->t0 + u / s->items, w = u % s->items;
    int64_t k0 = j->bounds[t], kc = j->bounds[t + 1] - k0;
    int64_t bounds[2] = {0, kc}, pops[1] = {0};
    rt_ct_job leaf = *j;
    leaf.a = j->a + k0 * j->as_p;
    leaf.b = j->b + k0 * j->bs_p;
    leaf.k = kc;
    if (local != NULL) {
      int64_t group = w % j->groups, c0 = group * j->per * RT_CT_CW, c1 = c0 + j->per * RT_CT_CW;
      rt_ct_pack_leaf(j, k0, kc, c0, c1 < j->npad ? c1 : j->npad, local);
      leaf.bpack = local;
    } else {
      leaf.bpack = j->bpack + k0 * j->npad;
    }
    leaf.bounds = bounds, leaf.pops = pops, leaf.leaves = 1, leaf.depth = 1;
    leaf.from_seed = 0, leaf.has_seed = 0;
    leaf.c = s->sums + u / s->items * j->m * j->n;
    leaf.cs_i = j->n, leaf.cs_j = 1;
    rt_ct_band(&leaf, w, w + 1);
  }
  rt_free(local);
}
static void rt_ct_split(const rt_ct_job *j, int64_t items, uint64_t cost) {
  int64_t mn = j->m * j->n, window = RT_CT_SPLIT / mn;
  if (window < 1) window = 1;
  if (window > j->leaves) window = j->leaves;
  float *sums = rt_alloc(window * mn, sizeof(float));
  float *held = rt_alloc(j->depth * mn, sizeof(float));
  int64_t sp = 0;
  for (int64_t t0 = 0; t0 < j->leaves; t0 += window) {
    int64_t count = j->leaves - t0 < window ? j->leaves - t0 : window;
    rt_ct_split_job s = {j, t0, items, sums};
    rt_parallel_for(count * items, cost, rt_ct_split_task, &s);
    for (int64_t u = 0; u < count; u++) {
      int64_t pops = j->pops[t0 + u];
      float *v = sums + u * mn;
      for (int64_t q = 0; q < pops; q++) {
        const float *below = held + (sp - 1 - q) * mn;
        for (int64_t x = 0; x < mn; x++) v[x] = below[x] + v[x];
      }
      memcpy(held + (sp - pops) * mn, v, (size_t)mn * sizeof(float));
      sp = sp - pops + 1;
    }
  }
  /* The total, the seed added first. */
  for (int64_t i = 0; i < j->m; i++)
    for (int64_t x = 0; x < j->n; x++) {
      float v = held[i * j->n + x];
      j->c[i * j->cs_i + x * j->cs_j] = j->has_seed ? j->seed + v : v;
    }
  rt_free(sums);
  rt_free(held);
}

/* A matrix times a vector (n = 1): no packing, the sums of RT_CT_ROWS
 * rows at a time, each its own chain, item by item (rows one after another
 * in memory: one vector; a weighted sum of windows too); the last
 * block's rows one by one. */
#define RT_CT_ROWS 16
static void rt_ct_rows(void *raw, int64_t lo, int64_t hi) {
  const rt_ct_job *j = raw;
  float(*stack)[RT_CT_ROWS] = rt_alloc(j->depth + 1, sizeof *stack);
  for (int64_t blk = lo; blk < hi; blk++) {
    int64_t i0 = blk * RT_CT_ROWS, mr = j->m - i0 < RT_CT_ROWS ? j->m - i0 : RT_CT_ROWS;
    int64_t step = mr == RT_CT_ROWS ? j->as_i : 0;
    const float *a0 = j->a + i0 * j->as_i;
    int64_t sp = 0;
    for (int64_t t = 0; t < j->leaves; t++) {
      int64_t k0 = j->bounds[t], k1 = j->bounds[t + 1], pops = j->pops[t], p = k0;
      float s[RT_CT_ROWS];
      if (mr < RT_CT_ROWS) {
        /* (the last block: row by row) */
        for (int r = mr; r < RT_CT_ROWS; r++) s[r] = 0.0f;
        for (int r = 0; r < mr; r++) {
          const float *ar = a0 + r * j->as_i;
          float v = j->from_seed ? j->seed : ar[k0 * j->as_p] * j->b[k0 * j->bs_p];
          for (int64_t q = j->from_seed ? k0 : k0 + 1; q < k1; q++) v = v + ar[q * j->as_p] * j->b[q * j->bs_p];
          s[r] = v;
        }
      } else {
        if (j->from_seed) {
          for (int r = 0; r < RT_CT_ROWS; r++) s[r] = j->seed;
        } else {
          float bv = j->b[p * j->bs_p];
          for (int r = 0; r < RT_CT_ROWS; r++) s[r] = a0[r * step + p * j->as_p] * bv;
          p++;
        }
        if (step != 1 && j->as_p == 1) {
          /* (rows apart, each row's items adjacent: eight items of eight
           * rows at a time, transposed into eight vectors of one item of
           * every row, so that one vector add advances eight rows) */
          const float *lo_rows[8], *hi_rows[8];
          for (int r = 0; r < 8; r++) lo_rows[r] = a0 + r * step, hi_rows[r] = a0 + (r + 8) * step;
          rt_lv8 s_lo, s_hi;
          memcpy(&s_lo, s, sizeof s_lo);
          memcpy(&s_hi, s + 8, sizeof s_hi);
          for (; p + 8 <= k1; p += 8) {
            rt_lv8 cl[8], ch[8];
            rt_lv8_tile(lo_rows, p, cl);
            rt_lv8_tile(hi_rows, p, ch);
            for (int q = 0; q < 8; q++) {
              float bv = j->b[(p + q) * j->bs_p];
              s_lo = s_lo + cl[q] * bv;
              s_hi = s_hi + ch[q] * bv;
            }
          }
          memcpy(s, &s_lo, sizeof s_lo);
          memcpy(s + 8, &s_hi, sizeof s_hi);
        }
        if (step == 1 && j->as_p == 1)
          for (; p < k1; p++) {
            float bv = j->b[p * j->bs_p];
            for (int r = 0; r < RT_CT_ROWS; r++) s[r] = s[r] + a0[r + p] * bv;
          }
        else
          for (; p < k1; p++) {
            float bv = j->b[p * j->bs_p];
            for (int r = 0; r < RT_CT_ROWS; r++) s[r] = s[r] + a0[r * step + p * j->as_p] * bv;
          }
      }
      for (int64_t q = 0; q < pops; q++)
        for (int r = 0; r < RT_CT_ROWS; r++) s[r] = stack[sp - 1 - q][r] + s[r];
      for (int r = 0; r < RT_CT_ROWS; r++) stack[sp - pops][r] = s[r];
      sp = sp - pops + 1;
    }
    for (int64_t r = 0; r < mr; r++) {
      float v = stack[0][r];
      j->c[(i0 + r) * j->cs_i] = j->has_seed && !j->from_seed ? j->seed + v : v;
    }
  }
  rt_free(stack);
}

/* order: 0 the tree of `reduce f.+` (left to right up to 256 items),
 * 1 blocks of 256 one after another (`f.matmul`). */
static void rt_contract_f32(const float *a, int64_t as_i, int64_t as_p, const float *b, int64_t bs_j, int64_t bs_p,
                            int64_t m, int64_t n, int64_t k, float *c, int64_t cs_i, int64_t cs_j, int64_t order,
                            int64_t has_seed, float seed) {
  if (m <= 0 || n <= 0) return;
  if (k <= 0) {
    for (int64_t i = 0; i < m; i++)
      for (int64_t x = 0; x < n; x++) c[i * cs_i + x * cs_j] = has_seed ? seed : 0.0f;
    return;
  }
  if (rt_ct_small(m, n, k)) {
    /* One leaf, each sum left to right as rt_ct_rows's leaf adds it. */
    for (int64_t i = 0; i < m; i++)
      for (int64_t x = 0; x < n; x++) {
        const float *ar = a + i * as_i, *bc = b + x * bs_j;
        float v = has_seed ? seed : ar[0] * bc[0];
        for (int64_t q = has_seed ? 0 : 1; q < k; q++) v = v + ar[q * as_p] * bc[q * bs_p];
        c[i * cs_i + x * cs_j] = v;
      }
    return;
  }
  int64_t leaves_max = k / (RT_CT_LEAF / 2) + 2;
  int64_t *bounds = rt_alloc(leaves_max + 1, sizeof *bounds);
  int64_t *pops = rt_alloc(leaves_max, sizeof *pops);
  int64_t leaves = 0;
  int from_seed = 0;
  if (k <= RT_CT_LEAF) {
    bounds[0] = 0, bounds[1] = k, pops[0] = 0, leaves = 1;
    from_seed = has_seed != 0;
  } else if (order == 0) {
    rt_ct_tree(0, k, bounds, pops, &leaves);
  } else {
    for (int64_t k0 = 0; k0 < k; k0 += RT_CT_LEAF) {
      bounds[leaves] = k0;
      pops[leaves] = leaves > 0;
      leaves++;
      bounds[leaves] = k0 + RT_CT_LEAF < k ? k0 + RT_CT_LEAF : k;
    }
  }
  int64_t depth = 0, sp = 0;
  for (int64_t t = 0; t < leaves; t++) {
    sp = sp - pops[t] + 1;
    if (sp > depth) depth = sp;
  }
  if (depth > 64) rt_fail("internal error: a contraction's tree too deep");
  if (n == 1) {
    rt_ct_job j = {a, b, as_i, as_p, bs_j, bs_p, m, n, k, 0, c, cs_i, cs_j, NULL, bounds, pops, leaves, depth,
                   0, 0, from_seed, has_seed != 0, seed};
    rt_parallel_for((m + RT_CT_ROWS - 1) / RT_CT_ROWS, (uint64_t)RT_CT_ROWS * (uint64_t)k + 1, rt_ct_rows, &j);
    rt_free(bounds);
    rt_free(pops);
    return;
  }
  int64_t npad = (n + RT_CT_NR - 1) / RT_CT_NR * RT_CT_NR;
  /* b already as the packed layout (one panel of RT_CT_NR columns, each
   * item's a row of them: x @ w for a w of 16 columns, xᵀ·x of 16
   * variables) is read in place. */
  bool b_packed = n == RT_CT_NR && bs_j == 1 && bs_p == RT_CT_NR;
  /* Work items: a band and all its chunks where there are bands enough
   * for every thread, else a band and one chunk. Fewer than the threads:
   * the leaves split among them (rt_ct_split), each packing its own
   * leaf's part of b (not all of b ahead) where a leaf's is small. */
  int64_t bands = (m + RT_CT_MC - 1) / RT_CT_MC, chunks = (npad + RT_CT_CW - 1) / RT_CT_CW;
  int64_t per = bands >= 4 * (int64_t)rt_threads ? chunks : 1, groups = (chunks + per - 1) / per;
  bool split = leaves > 1 && rt_threads > 1 && !rt_inside && bands * groups < rt_threads &&
               (uint64_t)m * (uint64_t)npad * (uint64_t)k >= (1u << 20);
  bool ahead = !b_packed && !(split && RT_CT_LEAF * npad <= (1 << 20));
  float *bpack = ahead ? rt_alloc(k * npad, sizeof *bpack) : NULL;
  rt_ct_job j = {a, b, as_i, as_p, bs_j, bs_p, m, n, k, npad, c, cs_i, cs_j, b_packed ? b : bpack, bounds, pops,
                 leaves, depth, groups, per, from_seed, has_seed != 0, seed};
  if (ahead) rt_parallel_for(leaves, (uint64_t)(bounds[1] - bounds[0]) * (uint64_t)npad + 1, rt_ct_pack_b, &j);
  int64_t rows = m < RT_CT_MC ? m : RT_CT_MC, cols = per * RT_CT_CW < npad ? per * RT_CT_CW : npad;
  if (split)
    rt_ct_split(&j, bands * groups, (uint64_t)rows * (uint64_t)cols * (uint64_t)RT_CT_LEAF + 1);
  else
    rt_parallel_for(bands * groups, (uint64_t)rows * (uint64_t)cols * (uint64_t)k + 1, rt_ct_band, &j);
  rt_free(bpack);
  rt_free(bounds);
  rt_free(pops);
}

/* ---- a matrix read once for two contractions (allocate/pairs.rs) ----
 * x@w, a step per row, then xᵀ·r: the tree's parts on the threads, each
 * part leaf by leaf: the leaf's rows' sums with w (rt_pair_rows), the
 * step (the program's loop), then the leaf's rows weighted by r added
 * (rt_pair_leaf), while the rows are in the cache. */

/* The sums of m rows of a with b, each of k ≤ 256 items (one leaf: left
 * to right, from the seed where there is one), into c[0 … m-1]: as
 * rt_contract_f32 gives them, on this thread. */
static void rt_pair_rows(const float *a, int64_t as_i, int64_t as_p, const float *b, int64_t bs_p, int64_t m,
                         int64_t k, float *c, int64_t has_seed, float seed) {
  if (m <= 0) return;
  if (k <= 0) {
    for (int64_t i = 0; i < m; i++) c[i] = has_seed ? seed : 0.0f;
    return;
  }
  int64_t bounds[2] = {0, k}, pops[1] = {0};
  rt_ct_job j = {a,    b,      as_i, as_p, 0, bs_p, m, 1, k, 0, c, 1, 0, NULL, bounds, pops, 1, 1,
                 0,    0,      has_seed != 0, has_seed != 0, seed};
  rt_ct_rows(&j, 0, (m + RT_CT_ROWS - 1) / RT_CT_ROWS);
}

/* One of the tree's leaves of a float sum of rows (`items` of them,
 * item i's atom l at a[i·item + l·lane], weighted by r[i]): the partial
 * sums into row sp of held (`lanes` atoms a row), left to right from the
 * first product (or from the seed), then the `merges` nodes it completes
 * added (the row before plus it, as the tree adds them). */
#define RT_PAIR_ACC(L)                                                                                               \
  do {                                                                                                               \
    float acc[L];                                                                                                    \
    for (int l = 0; l < (L); l++) acc[l] = s[l];                                                                     \
    for (int64_t i = start; i < items; i++) {                                                                        \
      const float *ai = a + i * item;                                                                                \
      float rv = r[i];                                                                                               \
      for (int l = 0; l < (L); l++) acc[l] = acc[l] + ai[l] * rv;                                                    \
    }                                                                                                                \
    for (int l = 0; l < (L); l++) s[l] = acc[l];                                                                     \
  } while (0)
static void rt_pair_leaf(const float *a, int64_t item, int64_t lane, const float *r, int64_t items, int64_t lanes,
                         float *held, int64_t sp, int64_t merges, int64_t from_seed, float seed) {
  float *s = held + sp * lanes;
  int64_t start = 0;
  if (from_seed || items <= 0) {
    for (int64_t l = 0; l < lanes; l++) s[l] = from_seed ? seed : 0.0f;
  } else {
    for (int64_t l = 0; l < lanes; l++) s[l] = a[l * lane] * r[0];
    start = 1;
  }
  if (lane == 1 && lanes == 32) RT_PAIR_ACC(32);
  else if (lane == 1 && lanes == 16) RT_PAIR_ACC(16);
  else if (lane == 1 && lanes == 64) RT_PAIR_ACC(64);
  else if (lane == 1 && lanes == 8) RT_PAIR_ACC(8);
  else
    for (int64_t i = start; i < items; i++) {
      const float *ai = a + i * item;
      float rv = r[i];
      for (int64_t l = 0; l < lanes; l++) s[l] = s[l] + ai[l * lane] * rv;
    }
  for (int64_t q = 0; q < merges; q++, sp--) {
    float *left = held + (sp - 1) * lanes, *right = held + sp * lanes;
    for (int64_t l = 0; l < lanes; l++) left[l] = left[l] + right[l];
  }
}

static void rt_tree_top_fadd(float *rows, int64_t parts, int64_t lanes);
/* The parts' sums (rows of psum) added as the tree adds them, then
 * written at out (a stride of cs), the seed added first where the sum
 * was a tree (more than 256 items: else the leaf began from it). */
static void rt_pair_total(float *psum, int64_t parts, int64_t lanes, float *out, int64_t cs, int64_t n,
                          int64_t has_seed, float seed) {
  rt_tree_top_fadd(psum, parts, lanes);
  for (int64_t l = 0; l < lanes; l++) out[l * cs] = has_seed && n > RT_CT_LEAF ? seed + psum[l] : psum[l];
}

/* The same contraction of Int matrices: each sum wraps, so any order
 * gives its bits; rows go to the threads, each row's sums carried along
 * the items together. `order` is unused. */
typedef struct {
  const int64_t *a, *b;
  int64_t as_i, as_p, bs_j, bs_p, n, k;
  int64_t *c;
  int64_t cs_i, cs_j, seed;
} rt_cti_job;
static void rt_cti_rows(void *raw, int64_t lo, int64_t hi) {
  const rt_cti_job *j = raw;
  uint64_t *acc = rt_alloc(j->n, sizeof *acc);
  for (int64_t i = lo; i < hi; i++) {
    for (int64_t x = 0; x < j->n; x++) acc[x] = (uint64_t)j->seed;
    for (int64_t p = 0; p < j->k; p++) {
      uint64_t av = (uint64_t)j->a[i * j->as_i + p * j->as_p];
      const int64_t *bp = j->b + p * j->bs_p;
      for (int64_t x = 0; x < j->n; x++) acc[x] += av * (uint64_t)bp[x * j->bs_j];
    }
    for (int64_t x = 0; x < j->n; x++) j->c[i * j->cs_i + x * j->cs_j] = (int64_t)acc[x];
  }
  rt_free(acc);
}
static void rt_contract_i64(const int64_t *a, int64_t as_i, int64_t as_p, const int64_t *b, int64_t bs_j,
                            int64_t bs_p, int64_t m, int64_t n, int64_t k, int64_t *c, int64_t cs_i, int64_t cs_j,
                            int64_t order, int64_t has_seed, int64_t seed) {
  (void)order;
  if (m <= 0 || n <= 0) return;
  if (rt_ct_small(m, n, k)) {
    for (int64_t i = 0; i < m; i++)
      for (int64_t x = 0; x < n; x++) {
        uint64_t acc = has_seed ? (uint64_t)seed : 0;
        for (int64_t q = 0; q < k; q++)
          acc += (uint64_t)a[i * as_i + q * as_p] * (uint64_t)b[x * bs_j + q * bs_p];
        c[i * cs_i + x * cs_j] = (int64_t)acc;
      }
    return;
  }
  rt_cti_job j = {a, b, as_i, as_p, bs_j, bs_p, n, k < 0 ? 0 : k, c, cs_i, cs_j, has_seed ? seed : 0};
  rt_parallel_for(m, (uint64_t)n * (uint64_t)(k < 0 ? 0 : k) + 1, rt_cti_rows, &j);
}

/* ---- reductions: a float sum's tree on several threads ----
 * The top `levels` levels of the fixed tree over lo … hi-1 (halves: the
 * first ⌊n/2⌋ items and the rest) split it into 2^levels nodes, summed
 * in parallel, a few per thread and taken as threads come free (a busy
 * core delays only its own), then combined as the tree combines them. */
typedef struct {
  rt_half half;
  void *c;
  const int64_t *bounds;
  char *out;
  size_t size;
} rt_parts_job;
static void rt_parts_task(void *raw, int64_t lo, int64_t hi) {
  rt_parts_job *j = raw;
  for (int64_t k = lo; k < hi; k++) j->half(j->c, j->bounds[k], j->bounds[k + 1], j->out + k * j->size);
}
/* How many of the tree's levels to split into parts (each part over 2,048
 * items, so that every node above them splits): 0 where the tree runs on
 * this thread alone. (Profiled on one thread, split as for two, the parts
 * run in turn: the same tree, so the same bits, and the profile counts
 * it as work that splits.) */
static int rt_tree_levels(int64_t n) {
  int64_t threads = rt_threads > 1 ? rt_threads : (rt_profiling ? 2 : 1);
  if (rt_inside || threads <= 1 || n < 65536) return 0;
  int levels = 0;
  while (((int64_t)1 << levels) < 16 * threads && levels < 8 && (n >> (levels + 1)) > 2048) levels++;
  return levels;
}
/* The bounds of the nodes at depth `levels`: node k is bounds[k] … bounds[k+1]-1. */
static void rt_tree_bounds(int64_t lo, int64_t hi, int levels, int64_t *bounds) {
  if (levels == 0) {
    bounds[0] = lo;
    bounds[1] = hi;
    return;
  }
  int64_t mid = lo + (hi - lo) / 2;
  rt_tree_bounds(lo, mid, levels - 1, bounds);
  rt_tree_bounds(mid, hi, levels - 1, bounds + ((int64_t)1 << (levels - 1)));
}
static void rt_tree_parts(rt_half half, void *c, const int64_t *bounds, int parts, void *out, size_t size) {
  rt_parts_job j = {half, c, bounds, out, size};
  rt_pool_for(parts, 1u << 20, rt_parts_task, &j, (rt_site_key)half);
}

/* ---- trace: trace, trace-file ---- */

/* A traced value on standard output, before the results: its site's tag
 * (an i64 scalar), then the value; the driver prints them once the
 * program has succeeded. */
static void rt_trace(int64_t tag, int type, int64_t rank, const int64_t *shape, const void *data) {
  rt_write(0, 0, NULL, &tag);
  rt_write(type, (int)rank, shape, data);
}

/* ---- math: Remora's own f32 exp, ln, pow, tanh ----
 * Evaluated in double and rounded once to float: the correctly rounded
 * result but for the rarest cases (exp and ln: the double function
 * rounded, at every float). The same double operations in the same order
 * as the interpreter's (remora-interp's fmath.rs; built without
 * contraction; fma rounds once, an instruction or the C library's exact
 * emulation) on the same tables and coefficients (rt_exp2, rt_log2_c,
 * rt_exp_q, rt_ln_r: remora-value's fmath_tables.rs, which the compiler
 * writes in at the marker below), so both engines give the same bits:
 * change one, change the other. No branches in the main path (special
 * values by selects after it; a table lookup, for pow, is a gather), so
 * loops over them vectorise. */
#define RT_INV_LN2 1.4426950408889634
#define RT_LN2_HI 0.6931471805598903 /* ln 2 to 42 bits: k * RT_LN2_HI is exact */
#define RT_LN2_LO 5.497923018708371e-14
#define RT_LN2 0.6931471805599453
#define RT_N 128 /* entries per table */
#define RT_SHIFT 6755399441055744.0 /* 1.5 * 2^52 */
#define RT_LN_OFF 0x3fe6900000000000ULL /* the low end of pow's log's reduced argument */
#define RT_LN_HALF (1ULL << 44) /* half a subinterval of pow's log's, in bits */
#define RT_SQRT_HALF 0x3fe6a09e667f3bcdULL /* sqrt(2)/2: ln's reduced argument is from here to sqrt(2) */
/* @fmath-tables@ */
static inline uint64_t rt_bits(double x) {
  uint64_t u;
  memcpy(&u, &x, sizeof u);
  return u;
}
static inline double rt_from_bits(uint64_t u) {
  double x;
  memcpy(&x, &u, sizeof x);
  return x;
}
static inline uint32_t rt_bits32(float x) {
  uint32_t u;
  memcpy(&u, &x, sizeof u);
  return u;
}
/* e^r - 1 for |r| <= ln2/2N: r + r^2/2! + ... + r^5/5!. */
static inline double rt_expm1_poly(double r) {
  double r2 = r * r;
  double a = 0.5 + r * 0.16666666666666666;
  double b = 0.041666666666666664 + r * 0.008333333333333333;
  return r + r2 * (a + r2 * b);
}
/* The k at the low bits of kt (k + RT_SHIFT): j = k mod N (returned), the
 * index of 2^(j/N), and 2^floor(k/N) in *scale. */
static inline uint64_t rt_exp2_index(double kt, double *scale) {
  uint64_t k_bits = rt_bits(kt) - rt_bits(RT_SHIFT);
  *scale = rt_from_bits(((k_bits + 1023 * RT_N) & ~(uint64_t)(RT_N - 1)) << 45);
  return k_bits % RT_N;
}
/* t = k/N + r/ln2 (t clamped to [-160, 130]): k + RT_SHIFT, and r in *r (0 for an integral t). */
static inline double rt_exp2_reduce(double t, double *r) {
  t = t > 130.0 ? 130.0 : t;
  t = t < -160.0 ? -160.0 : t;
  double kt = t * (double)RT_N + RT_SHIFT;
  double k = kt - RT_SHIFT;
  *r = (t - k * (1.0 / RT_N)) * RT_LN2;
  return kt;
}
static inline double rt_exp_finish(double t, double r, double scale) {
  return (t + t * rt_expm1_poly(r)) * scale;
}
/* The polynomial of the n coefficients c (constant first) at x, by Horner's rule with fmas. */
static inline double rt_horner(const double *c, int n, double x) {
  double p = c[n - 1];
  for (int i = n - 2; i >= 0; i--) p = fma(p, x, c[i]);
  return p;
}
/* e^x in double (x clamped to [-110, 90]): x = k ln2 + r, |r| <= ln2/2,
 * e^x = 2^k (1 + r + r^2 q(r)), q by rt_exp_q. No table. */
static inline double rt_exp_core(float x) {
  x = x > 90.0f ? 90.0f : x;
  x = x < -110.0f ? -110.0f : x;
  double t = (double)x;
  double kt = fma(t, RT_INV_LN2, RT_SHIFT);
  double k = kt - RT_SHIFT;
  double r = fma(-k, RT_LN2_LO, fma(-k, RT_LN2_HI, t));
  double scale = rt_from_bits((rt_bits(kt) - rt_bits(RT_SHIFT) + 1023) << 52);
  double p = fma(r * r, rt_horner(rt_exp_q, 9, r), r);
  return (1.0 + p) * scale;
}
/* 2^t, exact for an integral t. The table's index is taken from t
 * unclamped (the same index wherever t is in the clamp's range; outside
 * it the clamped value, 2^130 or 2^-160, is selected at the end): with
 * the index of the clamped t, GCC 12 threads the clamp's paths, the
 * table's load becomes a masked gather ("unsupported masked emulated
 * gather") and the loop around does not vectorise (a float power 3-4x
 * slower). The same bits. */
static inline double rt_exp2_core(double t) {
  double r, scale;
  double kt = rt_exp2_reduce(t, &r);
  (void)rt_exp2_index(kt, &scale);
  double scale_unused;
  uint64_t j = rt_exp2_index(t * (double)RT_N + RT_SHIFT, &scale_unused);
  double v = rt_exp_finish(rt_exp2[j], r, scale);
  return t > 130.0 ? 0x1p130 : t < -160.0 ? 0x1p-160 : v;
}
/* x = 2^e z, z in pow's log's subinterval *i of centre c, x a positive
 * normal double with 24 significant bits: e, and ln(z/c) in *q. */
static inline double rt_ln_parts(double x, uint64_t *i, double *q) {
  uint64_t bits = rt_bits(x);
  uint64_t from_off = bits - RT_LN_OFF;
  uint64_t e_biased = (from_off + (1ULL << 62)) >> 52;
  *i = (from_off >> 45) % RT_N;
  uint64_t z_bits = bits - (e_biased << 52) + (1024ULL << 52);
  double z = rt_from_bits(z_bits);
  double c = rt_from_bits((z_bits + RT_LN_HALF) & ~(2 * RT_LN_HALF - 1));
  double e = rt_from_bits(rt_bits(RT_SHIFT) + e_biased) - (RT_SHIFT + 1024.0);
  /* ln(z/c) = 2 atanh(s), |s| <= 2^-9; z - c and z + c are exact. */
  double s = (z - c) / (z + c);
  double w = s * s;
  double p = w * (0.3333333333333333 + w * (0.2 + w * 0.14285714285714285));
  double s2 = s + s;
  *q = s2 + s2 * p;
  return e;
}
/* ln(x) in double, x a positive normal double with 24 significant bits:
 * x = 2^e z, z in [sqrt2/2, sqrt2), ln z = 2 atanh(s) for s = (z - 1)/(z + 1),
 * by rt_ln_r. No table. */
static inline double rt_ln_core(double x) {
  uint64_t bits = rt_bits(x);
  uint64_t e_biased = (bits - RT_SQRT_HALF + (1ULL << 62)) >> 52;
  double z = rt_from_bits(bits - (e_biased << 52) + (1024ULL << 52));
  double e = rt_from_bits(rt_bits(RT_SHIFT) + e_biased) - (RT_SHIFT + 1024.0);
  double s = (z - 1.0) / (z + 1.0);
  double w = s * s;
  double s2 = s + s;
  double ln_z = fma(s2 * w, rt_horner(rt_ln_r, 6, w), s2);
  return fma(e, RT_LN2_HI, fma(e, RT_LN2_LO, ln_z));
}
/* t = k ln2 + r, |r| <= ln2/2 (t clamped to [-110, 90]): r, and 2^k in *scale (for tanh). */
static inline double rt_reduce(double t, double *scale) {
  t = t > 90.0 ? 90.0 : t;
  t = t < -110.0 ? -110.0 : t;
  double kt = t * RT_INV_LN2 + RT_SHIFT;
  double k = kt - RT_SHIFT;
  double r = (t - k * RT_LN2_HI) - k * RT_LN2_LO;
  uint64_t k_bits = rt_bits(kt) - rt_bits(RT_SHIFT);
  *scale = rt_from_bits((k_bits + 1023) << 52);
  return r;
}
/* e^r - 1 for |r| <= ln2/2: r + r^2/2! + ... + r^12/12! (for tanh). */
static inline double rt_expm1_poly12(double r) {
  double p = 2.08767569878681e-09;
  p = p * r + 2.505210838544172e-08;
  p = p * r + 2.755731922398589e-07;
  p = p * r + 2.7557319223985893e-06;
  p = p * r + 2.48015873015873e-05;
  p = p * r + 0.0001984126984126984;
  p = p * r + 0.001388888888888889;
  p = p * r + 0.008333333333333333;
  p = p * r + 0.041666666666666664;
  p = p * r + 0.16666666666666666;
  p = p * r + 0.5;
  p = p * r + 1.0;
  return p * r;
}
static inline float rt_expf(float x) {
  float y = (float)rt_exp_core(x);
  return isnan(x) ? x + x : y;
}
/* The exps of two differences of which one is ±0 or NaN (operands less
 * their maximum, allocate/exps.rs): the exp of the other, once … */
static inline float rt_exp_either(float a, float b) { return rt_expf(a == 0.0f || isnan(a) ? b : a); }
/* … and each exp from it: rt_expf(d) exactly, e^±0 being 1 and e^NaN the
 * NaN doubled. */
static inline float rt_exp_given(float d, float e) { return d == 0.0f ? 1.0f : isnan(d) ? d + d : e; }
static inline float rt_logf(float x) {
  float y = (float)rt_ln_core((double)x);
  y = x == INFINITY ? x : y;
  y = x == 0.0f ? -INFINITY : y;
  y = x < 0.0f ? NAN : y;
  return isnan(x) ? x + x : y;
}
/* x^y in two halves: log2 |x| (the costlier, which depends on x alone:
 * computed once for a base raised to many exponents), then the power from
 * it. rt_powf is the one after the other. */
static inline double rt_pow_log2(float x) {
  float ax = fabsf(x);
  uint64_t i;
  double q;
  double e = rt_ln_parts((double)ax, &i, &q);
  double l = e + (rt_log2_c[i] + q * RT_INV_LN2);
  l = ax == 0.0f ? -INFINITY : l;
  return ax == INFINITY ? INFINITY : l;
}
static inline float rt_pow_by_log2(float x, double l, float y) {
  float magnitude = (float)rt_exp2_core((double)y * l);
  float ay = fabsf(y);
  bool big = ay >= 8388608.0f;
  float rounded = ay + 8388608.0f;
  bool integral = big || rounded - 8388608.0f == ay;
  uint32_t low_bit = (big ? rt_bits32(ay) : rt_bits32(rounded)) & 1;
  bool odd = integral && ay < 16777216.0f && low_bit == 1;
  float r = odd && signbit(x) ? -magnitude : magnitude;
  r = x < 0.0f && x > -INFINITY && !integral ? NAN : r;
  r = isnan(x) || isnan(y) ? NAN : r;
  r = x == -1.0f && ay == INFINITY ? 1.0f : r;
  return x == 1.0f || y == 0.0f ? 1.0f : r;
}
static inline float rt_powf(float x, float y) { return rt_pow_by_log2(x, rt_pow_log2(x), y); }
/* rt_pow_by_log2 where y is a whole number (an Int made a Float, a literal
 * without a fraction: allocate/powers.rs): the selects only a fraction,
 * a NaN or an infinite y needs left out; the same value. */
static inline float rt_pow_by_log2_whole(float x, double l, float y) {
  float magnitude = (float)rt_exp2_core((double)y * l);
  float ay = fabsf(y);
  uint32_t low_bit = (ay >= 8388608.0f ? rt_bits32(ay) : rt_bits32(ay + 8388608.0f)) & 1;
  bool odd = ay < 16777216.0f && low_bit == 1;
  float r = odd && signbit(x) ? -magnitude : magnitude;
  r = isnan(x) ? NAN : r;
  return x == 1.0f || y == 0.0f ? 1.0f : r;
}
static inline float rt_powf_whole(float x, float y) { return rt_pow_by_log2_whole(x, rt_pow_log2(x), y); }
/* The halves with log2 |x| held in an Int (its bits), as a loop's buffer
 * of them holds it. */
static inline int64_t rt_pow_log2_bits(float x) { return (int64_t)rt_bits(rt_pow_log2(x)); }
static inline float rt_pow_by_log2_bits(float x, int64_t l, float y) {
  return rt_pow_by_log2(x, rt_from_bits((uint64_t)l), y);
}
static inline float rt_pow_by_log2_bits_whole(float x, int64_t l, float y) {
  return rt_pow_by_log2_whole(x, rt_from_bits((uint64_t)l), y);
}
static inline float rt_tanhf(float x) {
  double a = (double)fabsf(x);
  a = a > 20.0 ? 20.0 : a;
  double scale;
  double r = rt_reduce(a + a, &scale);
  double em1 = scale * rt_expm1_poly12(r) + (scale - 1.0);
  float t = (float)(em1 / (em1 + 2.0));
  t = signbit(x) ? -t : t;
  return isnan(x) ? x + x : t;
}

/* ---- styles: a grade of keys of a small range (flags, bins, digits) ----
 * The stable permutation of rt_grade_keys by counting: how many keys of
 * each value, their first places, then each index to its key's next place
 * in order (the one stable permutation, as the merge sort gives it), in
 * O(n + range). Taken where the keys span fewer values than there are
 * keys (and at most 2^20); otherwise false and nothing written. */
static bool rt_grade_counting(const uint64_t *keys, int64_t *order, int64_t n) {
  if (n < 64) return false;
  uint64_t lo = UINT64_MAX, hi = 0;
  for (int64_t i = 0; i < n; i++) {
    lo = keys[i] < lo ? keys[i] : lo;
    hi = keys[i] > hi ? keys[i] : hi;
  }
  uint64_t range = hi - lo;
  if (range >= (uint64_t)n || range >= (UINT64_C(1) << 20)) return false;
  int64_t *next = rt_alloc((int64_t)range + 1, sizeof *next);
  memset(next, 0, (size_t)(range + 1) * sizeof *next);
  for (int64_t i = 0; i < n; i++) next[keys[i] - lo]++;
  int64_t at = 0;
  for (uint64_t v = 0; v <= range; v++) {
    int64_t c = next[v];
    next[v] = at;
    at += c;
  }
  for (int64_t i = 0; i < n; i++) order[next[keys[i] - lo]++] = i;
  rt_free(next);
  return true;
}

/* ---- tree reductions in lanes (c.rs, lanes.rs) ----
 * The leaves of the tree over lo … hi-1 (nodes of at most 256 items; a
 * node over that is its first ⌊n/2⌋ items and the rest): leaf k is
 * b[k] … b[k+1]-1. Their number; b holds one more bound than that. */
static void rt_tree_leaves_in(int64_t lo, int64_t hi, int64_t *b, int *n) {
  if (hi - lo <= 256) {
    b[(*n)++] = lo;
    return;
  }
  int64_t mid = lo + (hi - lo) / 2;
  rt_tree_leaves_in(lo, mid, b, n);
  rt_tree_leaves_in(mid, hi, b, n);
}
static int rt_tree_leaves(int64_t lo, int64_t hi, int64_t *b) {
  int n = 0;
  rt_tree_leaves_in(lo, hi, b, &n);
  b[n] = hi;
  return n;
}

/* The plan of a float sum of `n` items (vectors) added item by item
 * (allocate/prims.rs, reduce_by_leaves), for `m = (n + 127) / 128 + 1`:
 * b[0] the number of leaves L (at most m), b[1] the most partial sums held
 * at once, b[2 …] the leaves' bounds (leaf t is items b[2+t] … b[3+t]-1),
 * and b[3+m+t] how many times, once leaf t's sum is pushed, the last two
 * sums held are added into one: the tree's nodes in post-order, the same
 * additions as rt_tree_leaves' tree. */
typedef struct {
  int64_t *bounds, *merges;
  int64_t n, height, most;
} rt_tree_plan;
static void rt_tree_plan_in(int64_t lo, int64_t hi, rt_tree_plan *p) {
  if (hi - lo <= 256) {
    p->bounds[p->n] = lo;
    p->merges[p->n] = 0;
    p->n++;
    if (++p->height > p->most) p->most = p->height;
    return;
  }
  int64_t mid = lo + (hi - lo) / 2;
  rt_tree_plan_in(lo, mid, p);
  rt_tree_plan_in(mid, hi, p);
  p->merges[p->n - 1]++;
  p->height--;
}
/* The nodes of a float sum's tree over n items at a depth where they
 * split among the threads (allocate/prims.rs, reduce_by_leaves): b[0]
 * their number P (1, 2, 4 … 16; each over 2,048 items, so every node
 * above them splits), node k items b[1+k] … b[2+k]-1. Any P gives the
 * tree's nodes: the same sums. */
static void rt_tree_bounds(int64_t lo, int64_t hi, int levels, int64_t *bounds);
static void rt_tree_top(int64_t n, int64_t *b) {
  int64_t threads = rt_threads > 1 ? rt_threads : 1;
  int levels = 0;
  while (((int64_t)1 << levels) < 4 * threads && levels < 4 && (n >> (levels + 1)) > 2048) levels++;
  b[0] = (int64_t)1 << levels;
  rt_tree_bounds(0, n, levels, b + 1);
}
/* Rows 0 … parts-1 of `lanes` sums, each a node's, added pairwise as
 * the tree adds its nodes (the left plus the right), into row 0. */
static void rt_tree_top_fadd(float *rows, int64_t parts, int64_t lanes) {
  for (int64_t w = 1; w < parts; w *= 2)
    for (int64_t k = 0; k + w < parts; k += 2 * w)
      for (int64_t l = 0; l < lanes; l++) rows[k * lanes + l] = rows[k * lanes + l] + rows[(k + w) * lanes + l];
}
static void rt_tree_leaf_bounds(int64_t n, int64_t *b) {
  int64_t m = (n + 127) / 128 + 1;
  rt_tree_plan p = {b + 2, b + 3 + m, 0, 0, 0};
  rt_tree_plan_in(0, n, &p);
  b[0] = p.n;
  b[1] = p.most;
  b[2 + p.n] = n;
}

/* ---- a tree node's float leaves side by side (c/lanes.rs) ---- */
/* A float sum's leaves k = 0 … n-1 of a node whose items are x[0 … ]
 * (leaf k: items b[k]-b[0] … b[k+1]-b[0]-1, at least eight), each summed
 * left to right into leaf[k]: eight adjacent leaves at a time (or four
 * where four or fewer are left; a group short of its width takes its
 * last leaf again) in the lanes of a vector, tiles of items of each leaf
 * read contiguously and transposed so that item t of every leaf is one
 * vector: the same additions in the same order on each leaf, so the same
 * bits, but vector adds instead of a chain of dependent scalar ones (and
 * a shuffle in three for each item instead of a load for each). */
static void rt_leaves_fadd(const float *x, const int64_t *b, int n, float *leaf) {
  for (int g = 0; g < n;) {
    int w = n - g > 4 ? 8 : 4;
    const float *p[8];
    int64_t len = INT64_MAX;
    for (int k = 0; k < w; k++) {
      int q = g + k < n ? g + k : n - 1;
      p[k] = x + (b[q] - b[0]);
      if (b[q + 1] - b[q] < len) len = b[q + 1] - b[q];
    }
    int64_t t = w;
    if (w == 8) {
      rt_lv8 c[8];
      rt_lv8_tile(p, 0, c);
      rt_lv8 a = c[0];
      for (int j = 1; j < 8; j++) a = a + c[j];
      for (; t + 8 <= len; t += 8) {
        rt_lv8_tile(p, t, c);
        for (int j = 0; j < 8; j++) a = a + c[j];
      }
      for (int k = 0; k < 8; k++) leaf[k < n - g ? g + k : n - 1] = a[k];
    } else {
      rt_lv4 c[4];
      rt_lv4_tile(p, 0, c);
      rt_lv4 a = c[0];
      for (int j = 1; j < 4; j++) a = a + c[j];
      for (; t + 4 <= len; t += 4) {
        rt_lv4_tile(p, t, c);
        for (int j = 0; j < 4; j++) a = a + c[j];
      }
      for (int k = 0; k < 4; k++) leaf[k < n - g ? g + k : n - 1] = a[k];
    }
    /* The rest of each leaf (its last few items) alone. */
    for (int k = 0; k < w && g + k < n; k++) {
      float a = leaf[g + k];
      for (int64_t i = b[g + k] + t; i < b[g + k + 1]; i++) a = a + x[i - b[0]];
      leaf[g + k] = a;
    }
    g += w;
  }
}

/* ---- scatter: its places in parts (allocate/iteration.rs) ----
 * How many parts a scatter of `items` items, each of `weight` atoms of
 * `bytes` bytes, into `bins` places splits its places into: each part a
 * range of places, one thread scanning every item for those of its range
 * (each place written in the items' order, as on one thread). One on one
 * thread, inside a parallel loop, or for too little work.
 *
 * Each part pays for every item (its place read, and a branch on its
 * part that the predictor misses about as often as the parts are many:
 * ~10 ns) and gains only its share of the items' copying: parts pay
 * where an item copies RT_HIST_PART_WEIGHT atoms or more, or where the
 * places span RT_SCATTER_PARTS_BYTES or more: a place is then seldom in
 * the core's caches, each item's store waits on memory, and the parts
 * share those waits (10M Ints through a permutation into 10M places: 32
 * ms of CPU on one thread, 37 ms on two together, half each). */
#define RT_HIST_PART_WEIGHT 128
#define RT_SCATTER_PARTS_BYTES (8.0 * 1024 * 1024)
static void rt_scatter_parts(int64_t *parts, int64_t bins, int64_t items, int64_t weight, int64_t bytes) {
  double w = (double)(weight < 1 ? 1 : weight);
  double work = (double)items * w;
  bool far = (double)bins * w * (double)bytes >= RT_SCATTER_PARTS_BYTES;
  int64_t p = rt_threads;
  if (rt_inside || p <= 1 || work < (double)(1 << 18) || (weight < RT_HIST_PART_WEIGHT && !far)) p = 1;
  if (p > bins) p = bins;
  *parts = p < 1 ? 1 : p;
}

/* ---- hist: its bins in parts, each part picking out its items ----
 * How many parts a hist outside loops of `items` items, each combining
 * `weight` atoms into its bin, splits its `bins` bins into: each part a
 * range of bins, one thread, scanning every item's bin and picking out
 * its own items (a block at a time, their numbers stored without a
 * branch) before it combines them into its bins: each bin combines its
 * items in their order, as on one thread, so the bits are one thread's.
 * One part a thread (parts of a few bins would combine items of the same
 * bin one after another, each waiting for the last one's sum to be
 * stored). Picking costs each part about 0.75 ns an item and combining
 * about 0.35 ns an atom (100000 items into 16 bins: cells of 4 floats,
 * 0.14 ms on one thread, 0.145 ms a part of two): p parts pay where
 * picking is well under what a part saves, 0.75 < 0.35 * weight * (1 -
 * 1/p) by half as much again (cells of 7 atoms on two threads, 5 on
 * four). One part on one thread, inside a parallel loop, or for too
 * little work. */
static void rt_hist_pick_parts(int64_t *parts, int64_t bins, int64_t items, int64_t weight) {
  double work = (double)items * (double)(weight < 1 ? 1 : weight);
  int64_t p = rt_threads < bins ? rt_threads : bins;
  bool pays = 5 * (double)weight * (double)(p - 1) >= 16 * (double)p;
  if (rt_inside || p <= 1 || work < (double)(1 << 18) || !pays) p = 1;
  *parts = p < 1 ? 1 : p;
}

/* ---- compaction: grades of few distinct keys ---- */

/* The grade of n atoms (at xs[0], xs[stride] …) whose keys span fewer
 * than RT_SMALL_RANGE values, on every thread: the key range by parts,
 * each part's count of each key, then each part writes its items' places
 * (a stable counting sort, so the same permutation as the merge sort).
 * False, having written nothing, where the keys span more or n is small. */
#define RT_SMALL_RANGE 1024
#define RT_SMALL_PARTS 64
#define RT_GRADE_SMALL(T, NAME, KEY)                                                      \
  typedef struct {                                                                        \
    const T *xs;                                                                          \
    int64_t stride, n, parts;                                                             \
    uint64_t lo[RT_SMALL_PARTS], hi[RT_SMALL_PARTS], low;                                 \
    int64_t *next, range;                                                                 \
    int64_t *out;                                                                         \
  } rt_small_##NAME##_job;                                                                \
  static void rt_small_##NAME##_range(void *raw, int64_t lo, int64_t hi) {                \
    rt_small_##NAME##_job *j = raw;                                                       \
    for (int64_t p = lo; p < hi; p++) {                                                   \
      uint64_t a = UINT64_MAX, b = 0;                                                     \
      for (int64_t i = j->n * p / j->parts; i < j->n * (p + 1) / j->parts; i++) {         \
        uint64_t k = KEY(j->xs[i * j->stride]);                                           \
        a = k < a ? k : a;                                                                \
        b = k > b ? k : b;                                                                \
      }                                                                                   \
      j->lo[p] = a;                                                                       \
      j->hi[p] = b;                                                                       \
    }                                                                                     \
  }                                                                                       \
  static void rt_small_##NAME##_count(void *raw, int64_t lo, int64_t hi) {                \
    rt_small_##NAME##_job *j = raw;                                                       \
    for (int64_t p = lo; p < hi; p++) {                                                   \
      int64_t *c = j->next + p * j->range;                                                \
      for (int64_t i = j->n * p / j->parts; i < j->n * (p + 1) / j->parts; i++)           \
        c[KEY(j->xs[i * j->stride]) - j->low]++;                                          \
    }                                                                                     \
  }                                                                                       \
  static void rt_small_##NAME##_write(void *raw, int64_t lo, int64_t hi) {                \
    rt_small_##NAME##_job *j = raw;                                                       \
    for (int64_t p = lo; p < hi; p++) {                                                   \
      int64_t *c = j->next + p * j->range;                                                \
      for (int64_t i = j->n * p / j->parts; i < j->n * (p + 1) / j->parts; i++)           \
        j->out[c[KEY(j->xs[i * j->stride]) - j->low]++] = i;                              \
    }                                                                                     \
  }                                                                                       \
  static bool rt_grade_small_##NAME(const T *xs, int64_t stride, int64_t n, int64_t *out) { \
    if (n < ((int64_t)1 << 16)) return false;                                             \
    rt_small_##NAME##_job *j = rt_alloc(1, sizeof *j);                                    \
    j->xs = xs;                                                                           \
    j->stride = stride;                                                                   \
    j->n = n;                                                                             \
    j->out = out;                                                                         \
    j->parts = RT_SMALL_PARTS;                                                            \
    uint64_t cost = (uint64_t)(n / j->parts) + 1;                                         \
    rt_parallel_for(j->parts, cost, rt_small_##NAME##_range, j);                          \
    uint64_t a = UINT64_MAX, b = 0;                                                       \
    for (int64_t p = 0; p < j->parts; p++) {                                              \
      a = j->lo[p] < a ? j->lo[p] : a;                                                    \
      b = j->hi[p] > b ? j->hi[p] : b;                                                    \
    }                                                                                     \
    if (b - a >= RT_SMALL_RANGE) {                                                        \
      rt_free(j);                                                                         \
      return false;                                                                       \
    }                                                                                     \
    j->low = a;                                                                           \
    j->range = (int64_t)(b - a) + 1;                                                      \
    j->next = rt_alloc(j->parts * j->range, sizeof *j->next);                             \
    memset(j->next, 0, (size_t)(j->parts * j->range) * sizeof *j->next);                  \
    rt_parallel_for(j->parts, cost, rt_small_##NAME##_count, j);                          \
    int64_t at = 0;                                                                       \
    for (int64_t v = 0; v < j->range; v++)                                                \
      for (int64_t p = 0; p < j->parts; p++) {                                            \
        int64_t c = j->next[p * j->range + v];                                            \
        j->next[p * j->range + v] = at;                                                   \
        at += c;                                                                          \
      }                                                                                   \
    rt_parallel_for(j->parts, cost, rt_small_##NAME##_write, j);                          \
    rt_free(j->next);                                                                     \
    rt_free(j);                                                                           \
    return true;                                                                          \
  }
RT_GRADE_SMALL(int64_t, int, rt_int_key)
RT_GRADE_SMALL(float, float, rt_float_key)
