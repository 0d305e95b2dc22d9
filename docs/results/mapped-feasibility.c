// What a MAP_PRIVATE mapping of a cached page file costs and offers on this
// kernel (issue 16, docs/design.md section 4.3.1). A throwaway measurement,
// kept beside its output so that it can be run again:
//
//   gcc -O2 -msse4.2 -o mapped-feasibility mapped-feasibility.c
//   ./mapped-feasibility /tmp/mf 16384 7 > mapped-feasibility.txt
//
// It writes two files of N 4 KiB pages at PATH.small (page by page, as a
// checkpoint writes) and PATH.big (one write), reads them once so that they
// are in the page cache, and measures each case REPS times (medians).
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22
#endif
#define PAGE_IS_WRITTEN (1 << 1)
#define PAGE_IS_FILE (1 << 2)
#define PAGE_IS_PRESENT (1 << 3)
#define PAGE_IS_HUGE (1 << 6)
#define PAGE_IS_SOFT_DIRTY (1 << 7)
struct pm_scan_arg {
  uint64_t size, flags, start, end, walk_end, vec, vec_len, max_pages,
      category_inverted, category_mask, category_anyof_mask, return_mask;
};
struct page_region { uint64_t start, end, categories; };
#define PAGEMAP_SCAN _IOWR('f', 16, struct pm_scan_arg)
#define PM_SCAN_WP_MATCHING 1
#define PM_SCAN_CHECK_WPASYNC 2
#define FEAT_WP_UNPOPULATED (1 << 13)
#define FEAT_WP_ASYNC (1 << 15)

static const size_t PS = 4096;
static int pmfd;
static size_t NP;
static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e9 + t.tv_nsec;
}
static long minflt(void) {
  struct rusage r;
  getrusage(RUSAGE_SELF, &r);
  return r.ru_minflt;
}
static uint64_t rng = 88172645463325252ull;
static uint64_t xr(void) {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return rng;
}
static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}
static double median(double *v, int n) {
  qsort(v, n, sizeof *v, cmp);
  return v[n / 2];
}

// Pages of [a, a+len) whose categories (xor inv) include all of mask, each
// counted once (a bitmap: a call may return a walk_end below regions it
// already reported, and continuing from there reports them again).
static struct page_region R[65536];
static long scan(char *a, size_t len, uint64_t flags, uint64_t inv, uint64_t mask, unsigned char *seen) {
  struct pm_scan_arg s = {sizeof s, flags, (uint64_t)a, (uint64_t)a + len, 0, (uint64_t)R, 65536, 0, inv, mask, 0, mask};
  long n = ioctl(pmfd, PAGEMAP_SCAN, &s);
  if (n < 0) return -errno;
  long pages = 0;
  for (long i = 0; i < n; i++)
    for (uint64_t x = R[i].start; x < R[i].end; x += PS) {
      size_t p = (x - (uint64_t)a) / PS;
      if (seen) seen[p] = 1;
      pages++;
    }
  return pages;
}
static int uffd_open(void) {
  int fd = syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK | UFFD_USER_MODE_ONLY);
  struct uffdio_api api = {.api = UFFD_API, .features = FEAT_WP_ASYNC | FEAT_WP_UNPOPULATED};
  if (fd < 0 || ioctl(fd, UFFDIO_API, &api)) { perror("userfaultfd"); exit(1); }
  return fd;
}
static int uffd_reg(int u, char *m, size_t len, uint64_t mode) {
  struct uffdio_register r = {.range = {(uint64_t)m, len}, .mode = mode};
  return ioctl(u, UFFDIO_REGISTER, &r) ? -errno : 0;
}
static int uffd_unreg(int u, char *m, size_t len) {
  struct uffdio_range r = {(uint64_t)m, len};
  return ioctl(u, UFFDIO_UNREGISTER, &r) ? -errno : 0;
}
static int uffd_wp(int u, char *m, size_t len) {
  struct uffdio_writeprotect w = {.range = {(uint64_t)m, len}, .mode = UFFDIO_WRITEPROTECT_MODE_WP};
  return ioctl(u, UFFDIO_WRITEPROTECT, &w) ? -errno : 0;
}
static char *map(int fd, int prot) {
  char *m = mmap(NULL, NP * PS, prot, MAP_PRIVATE, fd, 0);
  if (m == MAP_FAILED) { perror("mmap"); exit(1); }
  return m;
}
static volatile uint32_t sink;
static void read_pages(char *m, const uint32_t *order, size_t n) {
  for (size_t i = 0; i < n; i++) sink += (uint8_t)m[(size_t)order[i] * PS];
}
static void write_pages(char *m, const uint32_t *order, size_t n) {
  for (size_t i = 0; i < n; i++) m[(size_t)order[i] * PS + 64] ^= 1;
}
static uint32_t crc_page(const uint8_t *p) {  // one crc32 stream: slower than Amber's
  uint64_t c = ~0u;
  for (size_t i = 0; i < PS; i += 8) c = __builtin_ia32_crc32di(c, *(const uint64_t *)(p + i));
  return ~(uint32_t)c;
}

// The window-fault handler: a PROT_NONE window of 64 pages made readable
// and populated (and checksummed) at its first touch.
static char *WM;
static int with_crc;
static void on_segv(int sig, siginfo_t *si, void *ctx) {
  (void)sig; (void)ctx;
  char *a = si->si_addr;
  if (a < WM || a >= WM + NP * PS) _exit(99);
  char *lo = WM + (size_t)(a - WM) / (64 * PS) * 64 * PS;
  mprotect(lo, 64 * PS, PROT_READ | PROT_WRITE);
  if (madvise(lo, 64 * PS, MADV_POPULATE_READ)) _exit(98);
  if (with_crc)
    for (int i = 0; i < 64; i++) sink += crc_page((uint8_t *)lo + i * PS);
}

int main(int argc, char **argv) {
  const char *base = argc > 1 ? argv[1] : "/tmp/mf";
  NP = argc > 2 ? strtoul(argv[2], 0, 10) : 16384;
  int reps = argc > 3 ? atoi(argv[3]) : 7;
  size_t len = NP * PS;
  pmfd = open("/proc/self/pagemap", O_RDONLY);
  char small[4096], big[4096];
  snprintf(small, sizeof small, "%s.small", base);
  snprintf(big, sizeof big, "%s.big", base);
  int fds = open(small, O_RDWR | O_CREAT | O_TRUNC, 0644), fdb = open(big, O_RDWR | O_CREAT | O_TRUNC, 0644);
  char *buf = malloc(len);
  for (size_t i = 0; i < len; i++) buf[i] = (char)(i * 7 + 3);
  for (size_t p = 0; p < NP; p++) pwrite(fds, buf + p * PS, PS, p * PS);
  pwrite(fdb, buf, len, 0);
  fsync(fds); fsync(fdb);
  pread(fds, buf, len, 0); pread(fdb, buf, len, 0);
  uint32_t *seq = malloc(NP * 4), *rnd = malloc(NP * 4);
  for (size_t i = 0; i < NP; i++) seq[i] = rnd[i] = i;
  for (size_t i = NP - 1; i > 0; i--) { size_t j = xr() % (i + 1); uint32_t t = rnd[i]; rnd[i] = rnd[j]; rnd[j] = t; }
  unsigned char *seen = calloc(NP, 1);
  double t[64], f[64];
  printf("%zu pages of 4 KiB, medians of %d runs\n\n", NP, reps);

  printf("1. Reading one byte per page of a fresh MAP_PRIVATE (read-write) mapping\n");
  for (int file = 0; file < 2; file++)
    for (int adv = 0; adv < 2; adv++)
      for (int o = 0; o < 2; o++) {
        long huge = 0;
        for (int r = 0; r < reps; r++) {
          char *m = map(file ? fdb : fds, PROT_READ | PROT_WRITE);
          if (adv) madvise(m, len, MADV_RANDOM);
          long f0 = minflt();
          double t0 = now();
          read_pages(m, o ? rnd : seq, NP);
          t[r] = (now() - t0) / NP;
          f[r] = (double)NP / (minflt() - f0);
          huge = scan(m, len, 0, 0, PAGE_IS_HUGE, NULL);
          munmap(m, len);
        }
        printf("  file written %s, %s, %s: %.0f ns/page, %.1f pages/fault%s\n", file ? "in one write" : "page by page",
               adv ? "MADV_RANDOM" : "default", o ? "random" : "in order", median(t, reps), median(f, reps),
               huge ? " (PMD-mapped)" : "");
      }

  printf("\n2. First write to a page read through the mapping (copy on write), and PAGE_IS_FILE\n");
  {
    double scan_ns[64];
    long wrong = 0, missed = 0, reported = 0;
    for (int r = 0; r < reps; r++) {
      char *m = map(fds, PROT_READ | PROT_WRITE);
      read_pages(m, seq, NP);
      double t0 = now();
      write_pages(m, rnd, NP / 10);
      t[r] = (now() - t0) / (NP / 10);
      memset(seen, 0, NP);
      t0 = now();
      reported = scan(m, len, 0, PAGE_IS_FILE, PAGE_IS_PRESENT | PAGE_IS_FILE, seen);
      scan_ns[r] = (now() - t0) / NP;
      unsigned char *w = calloc(NP, 1);
      for (size_t i = 0; i < NP / 10; i++) w[rnd[i]] = 1;
      for (size_t p = 0; p < NP; p++) { wrong += seen[p] && !w[p]; missed += w[p] && !seen[p]; }
      free(w);
      munmap(m, len);
    }
    printf("  first write: %.0f ns/page; PAGEMAP_SCAN present && !FILE: %ld pages reported of %zu written, %ld wrong, %ld missed (all runs); %.1f ns per page scanned\n",
           median(t, reps), reported, NP / 10, wrong, missed, median(scan_ns, reps));
    long sd = scan(map(fds, PROT_READ), len, 0, 0, PAGE_IS_SOFT_DIRTY, NULL);
    int cr = open("/proc/self/clear_refs", O_WRONLY);
    int ok = cr >= 0 && write(cr, "4", 1) == 1;
    printf("  soft-dirty: PAGE_IS_SOFT_DIRTY pages after reads %ld; clear_refs 4: %s\n", sd, ok ? "accepted" : strerror(errno));
  }

  printf("\n3. Back to the file after a checkpoint: dropping the written (anonymous) copies\n");
  {
    double per_run[64], whole[64], remap[64];
    long runs = 0;
    for (int r = 0; r < reps; r++) {
      char *m = map(fds, PROT_READ | PROT_WRITE);
      read_pages(m, seq, NP);
      write_pages(m, rnd, NP / 10);
      struct pm_scan_arg s = {sizeof s, 0, (uint64_t)m, (uint64_t)m + len, 0, (uint64_t)R, 65536, 0, PAGE_IS_FILE, PAGE_IS_PRESENT | PAGE_IS_FILE, 0, PAGE_IS_PRESENT};
      double t0 = now();
      runs = ioctl(pmfd, PAGEMAP_SCAN, &s);
      for (long i = 0; i < runs; i++) madvise((void *)R[i].start, R[i].end - R[i].start, MADV_DONTNEED);
      per_run[r] = (now() - t0) / (NP / 10);
      if ((uint8_t)m[(size_t)rnd[0] * PS + 64] != (uint8_t)(((size_t)rnd[0] * PS + 64) * 7 + 3)) printf("  WRONG: a dropped copy does not read the file\n");
      read_pages(m, seq, NP);
      t0 = now();
      madvise(m, len, MADV_DONTNEED);
      whole[r] = (now() - t0) / 1e3;
      read_pages(m, seq, NP);
      t0 = now();
      if (mmap(m, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_FIXED, fds, 0) != m) perror("remap");
      remap[r] = (now() - t0) / 1e3;
      munmap(m, len);
    }
    printf("  scan + MADV_DONTNEED per written run (%ld runs for %zu scattered pages): %.0f ns per page dropped\n", runs, NP / 10, median(per_run, reps));
    printf("  MADV_DONTNEED of the whole mapping (all present): %.0f us; mmap MAP_FIXED over it: %.0f us\n", median(whole, reps), median(remap, reps));
    char *m = map(fds, PROT_READ | PROT_WRITE);
    read_pages(m, seq, 16);
    m[6 * PS + 1] ^= 1;
    char v = m[5 * PS] + 1, w = m[6 * PS] + 1, x = m[7 * PS + 3] + 1;
    char o5 = m[5 * PS], o6 = m[6 * PS], o7 = m[7 * PS + 3];
    pwrite(fds, &v, 1, 5 * PS); pwrite(fds, &w, 1, 6 * PS); pwrite(fds, &x, 1, 7 * PS + 3);
    printf("  pwrite to the file is seen through: a page read through the mapping %s; a written (copied) page %s\n",
           m[5 * PS] == v ? "yes" : "no", m[6 * PS] == w ? "yes" : "no");
    pwrite(fds, &o5, 1, 5 * PS); pwrite(fds, &o6, 1, 6 * PS); pwrite(fds, &o7, 1, 7 * PS + 3);
    munmap(m, len);
  }

  printf("\n4. userfaultfd write-protect (WP_ASYNC | WP_UNPOPULATED) on the private file mapping\n");
  {
    int u = uffd_open();
    char *m = map(fds, PROT_READ | PROT_WRITE);
    int wp = uffd_reg(u, m, len, UFFDIO_REGISTER_MODE_WP);
    int both = uffd_reg(u, m, len, UFFDIO_REGISTER_MODE_WP | UFFDIO_REGISTER_MODE_MISSING);
    printf("  UFFDIO_REGISTER mode WP: %s; mode MISSING|WP: %s\n", wp ? strerror(-wp) : "ok", both ? strerror(-both) : "ok");
    munmap(m, len);
    close(u);
    for (int o = 0; o < 2; o++) {
      for (int r = 0; r < reps; r++) {
        u = uffd_open();
        m = map(fds, PROT_READ | PROT_WRITE);
        uffd_reg(u, m, len, UFFDIO_REGISTER_MODE_WP);
        uffd_wp(u, m, len);
        long f0 = minflt();
        double t0 = now();
        read_pages(m, o ? rnd : seq, NP);
        t[r] = (now() - t0) / NP;
        f[r] = (double)NP / (minflt() - f0);
        munmap(m, len);
        close(u);
      }
      printf("  read, %s: %.0f ns/page, %.1f pages/fault (fault-around is off in a registered range)\n", o ? "random" : "in order", median(t, reps), median(f, reps));
    }
    double wr[64], sc[64], tog_wp[64], tog_un[64];
    long reported = 0, wrong = 0, missed = 0, after_drop = 0, after_wp = 0, after_write = 0;
    for (int r = 0; r < reps; r++) {
      u = uffd_open();
      m = map(fds, PROT_READ | PROT_WRITE);
      uffd_reg(u, m, len, UFFDIO_REGISTER_MODE_WP);
      uffd_wp(u, m, len);
      read_pages(m, seq, NP);
      double t0 = now();
      write_pages(m, rnd, NP / 10);
      wr[r] = (now() - t0) / (NP / 10);
      memset(seen, 0, NP);
      t0 = now();
      reported = scan(m, len, PM_SCAN_WP_MATCHING | PM_SCAN_CHECK_WPASYNC, 0, PAGE_IS_WRITTEN, seen);
      sc[r] = (now() - t0) / NP;
      unsigned char *w = calloc(NP, 1);
      for (size_t i = 0; i < NP / 10; i++) w[rnd[i]] = 1;
      for (size_t p = 0; p < NP; p++) { wrong += seen[p] && !w[p]; missed += w[p] && !seen[p]; }
      free(w);
      // dropped copies come back unprotected until protected again
      write_pages(m, rnd, 10);
      scan(m, len, 0, 0, PAGE_IS_WRITTEN, NULL);
      for (int i = 0; i < 10; i++) madvise(m + (size_t)rnd[i] * PS, PS, MADV_DONTNEED);
      read_pages(m, rnd, 10);
      after_drop = scan(m, len, 0, 0, PAGE_IS_WRITTEN, NULL);
      uffd_wp(u, m, len);
      after_wp = scan(m, len, 0, 0, PAGE_IS_WRITTEN, NULL);
      write_pages(m, rnd + 20, 3);
      after_write = scan(m, len, 0, 0, PAGE_IS_WRITTEN, NULL);
      t0 = now();
      uffd_wp(u, m, len);
      tog_wp[r] = (now() - t0) / 1e3;
      t0 = now();
      uffd_unreg(u, m, len);
      tog_un[r] = (now() - t0) / 1e3;
      munmap(m, len);
      close(u);
    }
    printf("  first write to a read page: %.0f ns; PAGE_IS_WRITTEN with re-protect: %ld reported of %zu, %ld wrong, %ld missed; %.1f ns per page scanned\n",
           median(wr, reps), reported, NP / 10, wrong, missed, median(sc, reps));
    printf("  10 written pages dropped (MADV_DONTNEED) and read again: %ld reported written; after UFFDIO_WRITEPROTECT of the range: %ld; 3 new writes: %ld\n",
           after_drop, after_wp, after_write);
    printf("  with every page present: UFFDIO_WRITEPROTECT of the whole range %.0f us, UFFDIO_UNREGISTER %.0f us\n", median(tog_wp, reps), median(tog_un, reps));
  }

  printf("\n5. A window of 64 pages made readable at its first touch (PROT_NONE, SIGSEGV, mprotect, MADV_POPULATE_READ)\n");
  {
    for (int r = 0; r < reps; r++) {
      char *m = map(fds, PROT_READ | PROT_WRITE);
      double t0 = now();
      for (size_t w = 0; w < NP / 64; w++) madvise(m + w * 64 * PS, 64 * PS, MADV_POPULATE_READ);
      t[r] = (now() - t0) / NP;
      munmap(m, len);
    }
    printf("  MADV_POPULATE_READ alone: %.0f ns/page\n", median(t, reps));
    struct sigaction sa = {0};
    sa.sa_sigaction = on_segv;
    sa.sa_flags = SA_SIGINFO | SA_NODEFER;
    sigaction(SIGSEGV, &sa, NULL);
    for (with_crc = 0; with_crc < 2; with_crc++)
      for (int o = 0; o < 2; o++) {
        size_t n = o ? NP / 64 : NP;
        for (int r = 0; r < reps; r++) {
          WM = map(fds, PROT_NONE);
          double t0 = now();
          read_pages(WM, o ? rnd : seq, n);
          double el = now() - t0;
          unsigned char *v = calloc(NP / 64 + 1, 1);
          long windows = 0;
          for (size_t i = 0; i < n; i++) { size_t w = (o ? rnd[i] : i) / 64; if (!v[w]) { v[w] = 1; windows++; } }
          free(v);
          t[r] = el / windows / 1e3;
          munmap(WM, len);
        }
        printf("  %s%s: %.1f us per window\n", o ? "random pages (1 in 64)" : "every page in order",
               with_crc ? ", checksumming its 64 pages (one crc32 stream)" : "", median(t, reps));
      }
  }

  printf("\n6. MAP_FIXED_NOREPLACE at a chosen address\n");
  {
    void *home = (void *)0x6a0000000000ull;
    size_t rl = 64ull << 30;
    void *p = mmap(home, rl, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED_NOREPLACE, -1, 0);
    void *q = mmap(home, rl, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED_NOREPLACE, -1, 0);
    printf("  64 GiB at %p: %s; again: %s\n", home, p == home ? "placed" : strerror(errno), q == MAP_FAILED ? strerror(errno) : "placed (!)");
  }

  printf("\n7. PAGEMAP_SCAN's walk_end\n");
  {
    char *m = map(fds, PROT_READ | PROT_WRITE);
    read_pages(m, seq, NP);
    write_pages(m, rnd, NP / 16);
    struct pm_scan_arg s = {sizeof s, 0, (uint64_t)m, (uint64_t)m + len, 0, (uint64_t)R, 65536, 0, PAGE_IS_FILE, PAGE_IS_PRESENT | PAGE_IS_FILE, 0, PAGE_IS_PRESENT};
    long n = ioctl(pmfd, PAGEMAP_SCAN, &s);
    printf("  %ld regions (the vector holds 65536); walk_end at %.1f%% of the range, last region ends at %.1f%%\n", n,
           100.0 * (s.walk_end - (uint64_t)m) / len, n > 0 ? 100.0 * (R[n - 1].end - (uint64_t)m) / len : 0.0);
    munmap(m, len);
  }
  unlink(small);
  unlink(big);
  return 0;
}
