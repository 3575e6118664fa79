// clock.c is compose's clock preload (LD_PRELOAD): it moves the wall
// clock of the process it is loaded into, by an offset and at a rate that
// the process's controller (compose, in Go) writes into a shared page.
//
// It reads the real clock from the kernel's vDSO, which it finds by its
// ELF symbol table (no dlsym, no malloc), or with the raw syscall if there
// is no vDSO: Debian's libfaketime 0.9.10 dies at start in a
// jemalloc-built redis-server, because jemalloc reads the clock while
// libfaketime's dlsym allocates. This library allocates nothing and calls
// nothing that could call back into it.
//
// Moved: CLOCK_REALTIME, CLOCK_REALTIME_COARSE, CLOCK_REALTIME_ALARM and
// CLOCK_TAI through clock_gettime, and gettimeofday, time and
// timespec_get — what a step of the system clock (settimeofday, an NTP
// step) moves. Not moved: CLOCK_MONOTONIC and the other clocks that
// measure elapsed time, which no step of the wall clock moves; and the
// kernel's own timers (sleeps, poll and epoll timeouts, timed futex waits
// on either clock), which no preload reaches. So a rate below or above 1
// makes the wall clock run slow or fast as read, while the process's
// waits keep real time.
//
// The page (struct page below, 4096 bytes) is a memfd whose descriptor
// the process inherits, named by $LOCKBENCH_CLOCK_FD; it is mapped by a
// constructor before main. Its controller writes it under a sequence
// lock: seq is odd while it writes.
#define _GNU_SOURCE
#include <elf.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

struct page {
	uint64_t seq;
	int64_t anchor_real; // ns of the real CLOCK_REALTIME
	int64_t anchor_fake; // ns of the moved clock at anchor_real
	uint64_t rate;       // IEEE 754 double; 0 means 1
};

static const struct page *shared;

typedef int (*clock_gettime_fn)(clockid_t, struct timespec *);
static clock_gettime_fn vdso_clock_gettime;

// vdso_sym finds name in the vDSO's dynamic symbol table.
static void *vdso_sym(const char *name) {
	uintptr_t base = getauxval(AT_SYSINFO_EHDR);
	if (!base)
		return 0;
	const Elf64_Ehdr *eh = (const Elf64_Ehdr *)base;
	const Elf64_Phdr *ph = (const Elf64_Phdr *)(base + eh->e_phoff);
	uintptr_t load = 0;
	const Elf64_Dyn *dyn = 0;
	int loaded = 0;
	for (int i = 0; i < eh->e_phnum; i++) {
		if (ph[i].p_type == PT_LOAD && !loaded) {
			loaded = 1;
			load = base + ph[i].p_offset - ph[i].p_vaddr;
		} else if (ph[i].p_type == PT_DYNAMIC) {
			dyn = (const Elf64_Dyn *)(base + ph[i].p_offset);
		}
	}
	if (!loaded || !dyn)
		return 0;
	const Elf64_Sym *sym = 0;
	const char *str = 0;
	const Elf32_Word *hash = 0;
	for (; dyn->d_tag != DT_NULL; dyn++) {
		switch (dyn->d_tag) {
		case DT_SYMTAB:
			sym = (const Elf64_Sym *)(load + dyn->d_un.d_ptr);
			break;
		case DT_STRTAB:
			str = (const char *)(load + dyn->d_un.d_ptr);
			break;
		case DT_HASH:
			hash = (const Elf32_Word *)(load + dyn->d_un.d_ptr);
			break;
		}
	}
	if (!sym || !str || !hash)
		return 0;
	Elf32_Word nsyms = hash[1]; // nchain: one entry per symbol
	for (Elf32_Word i = 0; i < nsyms; i++) {
		if (ELF64_ST_TYPE(sym[i].st_info) != STT_FUNC || sym[i].st_shndx == SHN_UNDEF)
			continue;
		if (strcmp(str + sym[i].st_name, name) == 0)
			return (void *)(load + sym[i].st_value);
	}
	return 0;
}

__attribute__((constructor)) static void init(void) {
	vdso_clock_gettime = (clock_gettime_fn)vdso_sym("__vdso_clock_gettime");
	if (!vdso_clock_gettime)
		vdso_clock_gettime = (clock_gettime_fn)vdso_sym("__kernel_clock_gettime");
	const char *s = getenv("LOCKBENCH_CLOCK_FD");
	if (!s || !*s)
		return;
	int fd = 0;
	for (; *s; s++) {
		if (*s < '0' || *s > '9')
			return;
		fd = fd * 10 + (*s - '0');
	}
	void *p = mmap(0, 4096, PROT_READ, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED) {
		static const char msg[] = "lockbench clock preload: cannot map $LOCKBENCH_CLOCK_FD: the wall clock is not moved\n";
		(void)!write(2, msg, sizeof msg - 1);
		return;
	}
	shared = p;
}

static int real_clock_gettime(clockid_t clk, struct timespec *ts) {
	if (vdso_clock_gettime)
		return vdso_clock_gettime(clk, ts);
	return (int)syscall(SYS_clock_gettime, clk, ts);
}

static int is_wall(clockid_t clk) {
	return clk == CLOCK_REALTIME || clk == CLOCK_REALTIME_COARSE || clk == CLOCK_REALTIME_ALARM || clk == CLOCK_TAI;
}

// move turns a real wall-clock reading into the moved clock's.
static void move(struct timespec *ts) {
	const struct page *p = shared;
	if (!p)
		return;
	uint64_t seq;
	int64_t ar, af;
	uint64_t bits;
	do {
		seq = __atomic_load_n(&p->seq, __ATOMIC_ACQUIRE);
		ar = __atomic_load_n(&p->anchor_real, __ATOMIC_RELAXED);
		af = __atomic_load_n(&p->anchor_fake, __ATOMIC_RELAXED);
		bits = __atomic_load_n(&p->rate, __ATOMIC_RELAXED);
		__atomic_thread_fence(__ATOMIC_ACQUIRE);
	} while ((seq & 1) || seq != __atomic_load_n(&p->seq, __ATOMIC_RELAXED));
	double rate;
	memcpy(&rate, &bits, sizeof rate);
	int64_t real = (int64_t)ts->tv_sec * 1000000000 + ts->tv_nsec;
	int64_t fake;
	if (rate == 0 || rate == 1)
		fake = real + (af - ar);
	else
		fake = af + (int64_t)((double)(real - ar) * rate);
	int64_t sec = fake / 1000000000, nsec = fake % 1000000000;
	if (nsec < 0) {
		nsec += 1000000000;
		sec--;
	}
	ts->tv_sec = sec;
	ts->tv_nsec = nsec;
}

int clock_gettime(clockid_t clk, struct timespec *ts) {
	int r = real_clock_gettime(clk, ts);
	if (r == 0 && is_wall(clk))
		move(ts);
	return r;
}

int gettimeofday(struct timeval *restrict tv, void *restrict tz) {
	if (tz) {
		struct timezone *z = tz;
		z->tz_minuteswest = 0;
		z->tz_dsttime = 0;
	}
	if (!tv)
		return 0;
	struct timespec ts;
	real_clock_gettime(CLOCK_REALTIME, &ts);
	move(&ts);
	tv->tv_sec = ts.tv_sec;
	tv->tv_usec = ts.tv_nsec / 1000;
	return 0;
}

time_t time(time_t *t) {
	struct timespec ts;
	real_clock_gettime(CLOCK_REALTIME, &ts);
	move(&ts);
	if (t)
		*t = ts.tv_sec;
	return ts.tv_sec;
}

int timespec_get(struct timespec *ts, int base) {
	if (base != TIME_UTC)
		return 0;
	clock_gettime(CLOCK_REALTIME, ts);
	return base;
}
