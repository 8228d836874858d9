/* `strata bench tiers`: the NVMe store's write and random-read bandwidth and IOPS per
 * block size, beside the device limit measured in the same invocation on the same file,
 * block size, queue depth and byte range (BENCH.md rule 1):
 *   raw   an io_uring loop in this process doing what fio's io_uring engine does:
 *         O_DIRECT, registered (fixed) buffers and file, no header, no hash, no copy,
 *         queue refilled as completions come, the ring set up with fio's flags
 *         (COOP_TASKRUN, SINGLE_ISSUER, DEFER_TASKRUN where the kernel has them), and
 *         the refill handed to the kernel every 4 ops / 256 KiB as the store does (fio
 *         enters per op; one enter per refill of 64 left the device idle while the
 *         kernel built the batch: ~25% fewer 4 KiB IOPS than fio on a virtual disk).
 *         Always run; it is the limit where fio is not installed.
 *   fio   fio --ioengine=io_uring --direct=1 --fixedbufs --registerfiles, when installed.
 *
 * Fair comparison: the store writes a 64-byte trailer in the record's last block, so a
 * record of payload bs - 64 is exactly one bs-sized I/O, the same I/O raw and fio issue.
 * Bandwidths are reported both as payload bytes and as device bytes; the ratios use
 * device bytes and IOPS. The store's figures include everything it does per record:
 * XXH3-64 of the payload, staging of the last block, trailer checks on read.
 *
 * Phases per block size: one untimed raw write pass over the byte range first (the
 * store preallocates with fallocate, and ext4's first write to an unwritten extent
 * pays a conversion that neither side should be charged for); then per rep: store
 * sequential-allocation write of the volume, store random reads of the same volume
 * (uniform over the records, seeded), raw sequential write and raw random read of the
 * same range, ordered raw W, store W, store R, raw R so that each store phase sits
 * beside its raw twin; ratio_raw_* is the median over reps of those paired ratios
 * (robust to a shared disk's drift), the MB/s columns are medians. cpu_us_op is this
 * thread's CPU time (user + sys) per op. fio runs last over the same range. */
#define _GNU_SOURCE
#include "bench/bench.h"

#include <errno.h>
#include <fcntl.h>
#include <liburing.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include "tiers/tiers.h"

static const char usage[] =
	"usage: strata bench tiers [--file PATH] [--size N] [--volume N] [--qd N] [--bs LIST]\n"
	"                          [--no-fio] [common options]\n"
	"  --file PATH   file or block device for the store (default: a temporary file in\n"
	"                $TMPDIR or /tmp, removed afterwards). A block device is overwritten.\n"
	"  --size N      store capacity (default 4G, --quick 64M)\n"
	"  --volume N    bytes moved per phase (default min(size, 1G), --quick 16M)\n"
	"  --qd N        queue depth, store and fio (default 64)\n"
	"  --bs LIST     block sizes, e.g. 4K,64K,1M (default 4K,16K,64K,256K,1M;\n"
	"                --quick 4K,64K,1M)\n"
	"  --no-fio      skip the fio baseline (the in-process raw io_uring baseline always\n"
	"                runs)\n"
	"  --check       verify every byte read back (a pattern per record; the fill and\n"
	"                compare are timed too: use it for correctness, not figures)\n";

#define HDR STRATA_NVME_HEADER_BYTES

/* The payload of record idx: 8-byte words derived from (seed, idx); with check off only
 * the first word varies (checksums differ per record at no cost). */
static void fill(uint8_t *b, size_t n, uint64_t seed, uint64_t idx, int full)
{
	uint64_t x = seed ^ (idx * 0x9e3779b97f4a7c15ull);
	size_t words = full ? n / 8 : 1;
	for (size_t i = 0; i < words && i * 8 + 8 <= n; i++) {
		uint64_t v = x + i * 0xbf58476d1ce4e5b9ull;
		memcpy(b + i * 8, &v, 8);
	}
}

static int verify(const uint8_t *b, size_t n, uint64_t seed, uint64_t idx)
{
	uint64_t x = seed ^ (idx * 0x9e3779b97f4a7c15ull);
	for (size_t i = 0; i * 8 + 8 <= n; i++) {
		uint64_t v = x + i * 0xbf58476d1ce4e5b9ull, g;
		memcpy(&g, b + i * 8, 8);
		if (g != v)
			return -1;
	}
	return 0;
}

static uint64_t splitmix(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* CPU seconds this thread has used: with a shared, noisy disk, CPU per op says whether
 * the store could keep up with a faster device even when wall time can't. */
static double thread_cpu(void)
{
	struct rusage ru;
	if (getrusage(RUSAGE_THREAD, &ru))
		return 0;
	return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
	       (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1e-6;
}

typedef struct phase_result {
	double secs;
	uint64_t ops;
	int errors;     /* failed ops (first error kept) */
	int first_err;
	int mismatches; /* --check */
	double cpu;     /* CPU seconds of this thread in the timed loop */
} phase_result;

/* Keep qd ops in flight until n ops are done. write: record i gets payload len and its
 * handle lands in hs[i]; read: op j reads hs[pick]. */
static phase_result run_phase(strata_nvme_store *s, int write, uint64_t n, unsigned qd,
			      size_t len, uint8_t **bufs, strata_page_handle *hs, uint64_t nrec,
			      uint64_t seed, int check)
{
	phase_result r = { 0 };
	strata_nvme_op *ops = calloc(qd, sizeof *ops), **ptr = calloc(qd, sizeof *ptr);
	strata_nvme_op **done = calloc(qd, sizeof *done);
	uint64_t *rec = calloc(qd, sizeof *rec);
	uint64_t rng = seed * 31 + 7, next = 0, finished = 0;
	int *free_idx = calloc(qd, sizeof *free_idx), nfree = (int)qd;
	for (unsigned i = 0; i < qd; i++)
		free_idx[i] = (int)i;
	double c0 = thread_cpu();
	uint64_t t0 = strata_now_ns();
	while (finished < n) {
		/* refill */
		int k = 0;
		while (nfree && next < n) {
			int j = free_idx[--nfree];
			strata_nvme_op *o = &ops[j];
			uint64_t idx = write ? next : splitmix(&rng) % nrec;
			rec[j] = idx;
			if (write) {
				fill(bufs[j], len, seed, idx, check);
				*o = (strata_nvme_op){ .kind = STRATA_NVME_OP_WRITE,
						       .key = { idx, seed }, .buf = bufs[j],
						       .len = len, .user = (uint64_t)j };
			} else {
				*o = (strata_nvme_op){ .kind = STRATA_NVME_OP_READ, .buf = bufs[j],
						       .len = len, .handle = hs[idx],
						       .user = (uint64_t)j };
			}
			ptr[k++] = o;
			next++;
		}
		int taken = k ? strata_nvme_submit(s, ptr, k) : 0;
		if (taken < 0) {
			r.errors++;
			r.first_err = taken;
			break;
		}
		for (int i = taken; i < k; i++) { /* not taken: give the slots back */
			free_idx[nfree++] = (int)ptr[i]->user;
			next--;
		}
		int got = strata_nvme_reap(s, 1, done, (int)qd);
		if (got < 0) {
			r.errors++;
			r.first_err = got;
			break;
		}
		for (int i = 0; i < got; i++) {
			strata_nvme_op *o = done[i];
			int j = (int)o->user;
			if (o->result) {
				if (!r.errors++)
					r.first_err = o->result;
			} else if (write) {
				hs[rec[j]] = o->handle;
			} else if (check && verify(o->buf, len, seed, rec[j])) {
				r.mismatches++;
			}
			free_idx[nfree++] = j;
			finished++;
		}
	}
	r.secs = (double)(strata_now_ns() - t0) * 1e-9;
	r.cpu = thread_cpu() - c0;
	r.ops = finished;
	free(ops);
	free(ptr);
	free(done);
	free(rec);
	free(free_idx);
	return r;
}

#define RAW_SUBMIT_OPS 4u
#define RAW_SUBMIT_BYTES ((size_t)256 << 10)

/* The raw io_uring baseline: n bs-sized I/Os over [4096, 4096 + nrec * bs) of path,
 * sequential for writes, uniform random record-aligned for reads (fio's randread with
 * norandommap), qd in flight. Setup (open, ring, registration) is not timed. */
static phase_result run_raw(const char *path, int write, uint64_t n, unsigned qd, size_t bs,
			    uint64_t nrec, uint64_t seed, int *direct_out)
{
	phase_result r = { 0 };
	struct io_uring ring;
	bool ring_ok = false, fixed = false, reg_file = false;
	uint8_t *bufs = NULL;
	int *free_idx = NULL, nfree = 0;
	int fd = open(path, O_RDWR | O_CLOEXEC | O_DIRECT);
	*direct_out = fd >= 0;
	if (fd < 0 && errno == EINVAL) /* tmpfs: buffered, as the store falls back too */
		fd = open(path, O_RDWR | O_CLOEXEC);
	if (fd < 0) {
		r.errors = 1;
		r.first_err = -errno;
		return r;
	}
	/* fio 3.3x asks for COOP_TASKRUN, SINGLE_ISSUER and DEFER_TASKRUN (completions run
	 * only when the thread asks for events), dropping them where the kernel refuses */
	static const unsigned setups[] = {
		IORING_SETUP_COOP_TASKRUN | IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN,
		IORING_SETUP_COOP_TASKRUN | IORING_SETUP_SINGLE_ISSUER, 0
	};
	struct io_uring_params p;
	int err = -EINVAL;
	for (size_t si = 0; si < sizeof setups / sizeof setups[0] && err == -EINVAL; si++) {
		memset(&p, 0, sizeof p);
		p.flags = setups[si];
		err = io_uring_queue_init_params(qd, &ring, &p);
	}
	if (err)
		goto fail;
	ring_ok = true;
	/* the same memory as the store's callers get in this bench: 2 MiB-aligned, huge
	 * pages where THP allows (fewer DMA segments per large I/O) */
	err = -ENOMEM;
	size_t bytes = ((size_t)qd * bs + (2u << 20) - 1) & ~(size_t)((2u << 20) - 1);
	if (posix_memalign((void **)&bufs, 2u << 20, bytes) ||
	    !(free_idx = calloc(qd, sizeof *free_idx)))
		goto fail;
	madvise(bufs, bytes, MADV_HUGEPAGE);
	memset(bufs, 0x3c, bytes);
	struct iovec iov = { bufs, bytes };
	fixed = io_uring_register_buffers(&ring, &iov, 1) == 0;
	reg_file = io_uring_register_files(&ring, &fd, 1) == 0;
	for (unsigned i = 0; i < qd; i++)
		free_idx[nfree++] = (int)i;
	uint64_t rng = seed * 131 + 17, next = 0;
	double c0 = thread_cpu();
	uint64_t t0 = strata_now_ns();
	while (r.ops < n) {
		unsigned unsent = 0;
		while (nfree && next < n) {
			struct io_uring_sqe *sqe = io_uring_get_sqe(&ring);
			if (!sqe)
				break;
			int j = free_idx[--nfree];
			uint64_t rec = write ? next : splitmix(&rng) % nrec;
			uint64_t off = STRATA_NVME_BLOCK + rec * bs;
			uint8_t *b = bufs + (size_t)j * bs;
			int f = reg_file ? 0 : fd;
			if (write && fixed)
				io_uring_prep_write_fixed(sqe, f, b, (unsigned)bs, off, 0);
			else if (write)
				io_uring_prep_write(sqe, f, b, (unsigned)bs, off);
			else if (fixed)
				io_uring_prep_read_fixed(sqe, f, b, (unsigned)bs, off, 0);
			else
				io_uring_prep_read(sqe, f, b, (unsigned)bs, off);
			if (reg_file)
				sqe->flags |= IOSQE_FIXED_FILE;
			io_uring_sqe_set_data64(sqe, (uint64_t)j);
			next++;
			/* enter every RAW_SUBMIT_OPS ops or RAW_SUBMIT_BYTES, as the store
			 * does (and fio, which enters for every op): the device starts on
			 * the first ops while the kernel builds the rest */
			if (++unsent >= RAW_SUBMIT_OPS || unsent * bs >= RAW_SUBMIT_BYTES) {
				io_uring_submit(&ring);
				unsent = 0;
			}
		}
		int w = io_uring_submit_and_wait(&ring, 1);
		if (w < 0 && w != -EINTR && w != -EAGAIN && w != -EBUSY) {
			err = w;
			goto fail;
		}
		struct io_uring_cqe *cqe;
		unsigned head, got = 0;
		io_uring_for_each_cqe(&ring, head, cqe)
		{
			if (cqe->res != (int)bs && !r.errors++)
				r.first_err = cqe->res < 0 ? cqe->res : STRATA_E_SHORTIO;
			free_idx[nfree++] = (int)io_uring_cqe_get_data64(cqe);
			r.ops++;
			got++;
		}
		io_uring_cq_advance(&ring, got);
	}
	r.secs = (double)(strata_now_ns() - t0) * 1e-9;
	r.cpu = thread_cpu() - c0;
	err = 0;
fail:
	if (err && !r.errors++)
		r.first_err = err;
	if (ring_ok)
		io_uring_queue_exit(&ring);
	free(bufs);
	free(free_idx);
	close(fd);
	return r;
}

/* fio's figure for one phase, from its JSON output (found crudely by key names). */
typedef struct fio_result {
	int ok;
	double bw;   /* bytes/s */
	double iops;
} fio_result;

static double json_num(const char *from, const char *key)
{
	const char *p = strstr(from, key);
	if (!p)
		return -1;
	p = strchr(p + strlen(key), ':');
	return p ? strtod(p + 1, NULL) : -1;
}

static int have_fio(void)
{
	return system("fio --version >/dev/null 2>&1") == 0;
}

static fio_result run_fio(const char *path, int write, size_t bs, unsigned qd, uint64_t span,
			  uint64_t volume)
{
	fio_result f = { 0 };
	char cmd[1024];
	snprintf(cmd, sizeof cmd,
		 "fio --name=strata --filename='%s' --ioengine=io_uring --direct=1 --rw=%s "
		 "--bs=%zu --iodepth=%u --numjobs=1 --offset=4096 --size=%llu --io_size=%llu "
		 "--fixedbufs=1 --registerfiles=1 --norandommap=1 --randrepeat=0 "
		 "--output-format=json 2>/dev/null",
		 path, write ? "write" : "randread", bs, qd, (unsigned long long)span,
		 (unsigned long long)volume);
	FILE *p = popen(cmd, "r");
	if (!p)
		return f;
	size_t cap = 1 << 16, n = 0;
	char *out = malloc(cap);
	for (size_t r; out && (r = fread(out + n, 1, cap - n - 1, p)) > 0;) {
		n += r;
		if (n + 1 == cap) {
			char *o2 = realloc(out, cap *= 2);
			if (!o2)
				break;
			out = o2;
		}
	}
	int st = pclose(p);
	if (!out)
		return f;
	out[n] = 0;
	const char *sec = strstr(out, write ? "\"write\" : {" : "\"read\" : {");
	if (st == 0 && sec) {
		f.bw = json_num(sec, "\"bw_bytes\"");
		f.iops = json_num(sec, "\"iops\"");
		f.ok = f.bw > 0 && f.iops > 0;
	}
	free(out);
	return f;
}

static int parse_bs_list(const char *s, size_t *out, int max)
{
	int n = 0;
	char buf[256];
	snprintf(buf, sizeof buf, "%s", s);
	for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		uint64_t v;
		if (n == max || strata_parse_count(t, &v) || v < STRATA_NVME_BLOCK ||
		    v % STRATA_NVME_BLOCK || v > (64u << 20))
			return -1;
		out[n++] = (size_t)v;
	}
	return n;
}

int strata_bench_tiers(int argc, char **argv)
{
	bench_opts o;
	if (bench_parse_common(&argc, argv, &o, usage))
		return 2;
	const char *file = NULL, *bs_arg = NULL;
	uint64_t size = 0, volume = 0, qd64 = 64;
	int no_fio = 0;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (!strcmp(a, "--file") && v) {
			file = v;
			i++;
		} else if (!strcmp(a, "--size") && v && !strata_parse_count(v, &size)) {
			i++;
		} else if (!strcmp(a, "--volume") && v && !strata_parse_count(v, &volume)) {
			i++;
		} else if (!strcmp(a, "--qd") && v && !strata_parse_count(v, &qd64) && qd64 &&
			   qd64 <= 4096) {
			i++;
		} else if (!strcmp(a, "--bs") && v) {
			bs_arg = v;
			i++;
		} else if (!strcmp(a, "--no-fio")) {
			no_fio = 1;
		} else {
			fprintf(stderr, "strata bench tiers: bad argument '%s'\n%s", a, usage);
			return 2;
		}
	}
	size_t bss[16];
	int nbs = parse_bs_list(bs_arg ? bs_arg : o.quick ? "4K,64K,1M" : "4K,16K,64K,256K,1M",
				bss, 16);
	if (nbs < 1) {
		fprintf(stderr, "--bs: 4 KiB multiples from 4K to 64M, comma-separated\n");
		return 2;
	}
	if (!size)
		size = o.quick ? 64ull << 20 : 4ull << 30;
	if (!volume)
		volume = o.quick ? 16ull << 20 : (size < (1ull << 30) ? size : 1ull << 30);
	unsigned qd = (unsigned)qd64;
	/* --reps: default (20) means 3 here, at most 8: each rep moves 4 volumes */
	int reps = o.quick ? 1 : o.reps == 20 ? 3 : o.reps < 8 ? o.reps : 8;

	char tmp[512] = "";
	if (!file) {
		const char *t = getenv("TMPDIR");
		snprintf(tmp, sizeof tmp, "%s/strata-bench-tiers-XXXXXX", t && *t ? t : "/tmp");
		int fd = mkstemp(tmp);
		if (fd < 0) {
			fprintf(stderr, "cannot create %s: %s\n", tmp, strerror(errno));
			return 2;
		}
		close(fd);
		file = tmp;
	}
	strata_dev_config dc = STRATA_DEV_CONFIG_INIT;
	dc.backend = STRATA_BACKEND_CPU; /* the store does not touch the device */
	strata_dev *dev = NULL;
	if (strata_dev_open(&dc, &dev)) {
		fprintf(stderr, "cannot open the CPU device context\n");
		return 2;
	}
	bench_out *out = bench_out_open(&o, "tiers", dev);
	int fio = !no_fio && have_fio();
	bench_out_note(out, "file %s, capacity %llu B, volume %llu B per phase, qd %u, reps %d, "
		       "fio %s%s", file, (unsigned long long)size, (unsigned long long)volume,
		       qd, reps, fio ? "yes" : no_fio ? "skipped" : "not installed (apt-get install fio)",
		       o.check ? ", check on" : "");
	bench_out_note(out, "payload = bs - 64 B (trailer in the last block): one bs-sized I/O per "
		       "record, as raw and fio; ratio_raw_* = store / raw io_uring (O_DIRECT, "
		       "fixed buffers and file, same file, range, bs, qd), ratio_* = store / fio; "
		       "device bytes and IOPS");
	int status = 0;
	for (int b = 0; b < nbs && !status; b++) {
		size_t bs = bss[b], len = bs - HDR;
		strata_nvme_config c = STRATA_NVME_CONFIG_INIT;
		c.path = file;
		c.capacity_bytes = size;
		c.queue_depth = qd;
		c.flags = STRATA_NVME_CREATE;
		c.slot_bytes = bs;
		strata_nvme_store *s = NULL;
		int err = strata_nvme_open(&c, &s);
		if (err) {
			fprintf(stderr, "open %s: %s\n", file, strata_strerror(err));
			status = 2;
			break;
		}
		strata_nvme_info info = STRATA_NVME_INFO_INIT;
		strata_nvme_get_info(s, &info);
		uint64_t nrec = volume / bs;
		if (nrec > info.capacity_bytes / bs)
			nrec = info.capacity_bytes / bs;
		if (!nrec) {
			fprintf(stderr, "bs %zu: the store is too small\n", bs);
			strata_nvme_destroy(s);
			status = 2;
			break;
		}
		strata_page_handle *hs = calloc(nrec, sizeof *hs);
		/* The caller's buffers: one 2 MiB-aligned region, huge pages where THP allows,
		 * like the host pool's pages that the store's real callers hand it. */
		uint8_t **bufs = calloc(qd, sizeof *bufs), *region = NULL;
		size_t region_bytes = ((size_t)qd * bs + (2u << 20) - 1) & ~(size_t)((2u << 20) - 1);
		if (posix_memalign((void **)&region, 2u << 20, region_bytes)) {
			fprintf(stderr, "no memory for %u x %zu B buffers\n", qd, bs);
			strata_nvme_destroy(s);
			free(bufs);
			free(hs);
			status = 2;
			break;
		}
		madvise(region, region_bytes, MADV_HUGEPAGE);
		memset(region, 0x5a, region_bytes);
		for (unsigned i = 0; i < qd; i++)
			bufs[i] = region + (size_t)i * bs;
		/* per rep: times, paired ratios (store / raw), CPU seconds of this thread */
		double wt[8], rt[8], rwt[8], rrt[8], wq[8], rq[8];
		double cpu[4] = { 0 }; /* store write, store read, raw write, raw read */
		phase_result w = { 0 }, r = { 0 }, rw, rr = { 0 };
		int raw_direct = 0;
		rw = run_raw(file, 1, nrec, qd, bs, nrec, o.seed, &raw_direct); /* prime */
		for (int rep = 0; rep < reps && !status; rep++) {
			if (rep) { /* free the previous rep's records */
				for (uint64_t i = 0; i < nrec; i++)
					strata_nvme_free(s, &hs[i]);
			}
			/* raw write, store write, store read, raw read: each store phase sits
			 * beside its raw twin, so a shared disk's drift hits both alike (raw
			 * writes first: they overwrite whatever the store wrote) */
			if (!rw.errors)
				rw = run_raw(file, 1, nrec, qd, bs, nrec, o.seed, &raw_direct);
			w = run_phase(s, 1, nrec, qd, len, bufs, hs, nrec, o.seed, o.check);
			r = run_phase(s, 0, nrec, qd, len, bufs, hs, nrec, o.seed, o.check);
			if (!rw.errors)
				rr = run_raw(file, 0, nrec, qd, bs, nrec, o.seed + rep, &raw_direct);
			cpu[0] += w.cpu;
			cpu[1] += r.cpu;
			cpu[2] += rw.cpu;
			cpu[3] += rr.cpu;
			wt[rep] = w.secs;
			rt[rep] = r.secs;
			if (rr.errors && !rw.errors)
				rw = rr;
			if (!rw.errors) {
				rwt[rep] = rw.secs;
				rrt[rep] = rr.secs;
				wq[rep] = rw.secs / w.secs;
				rq[rep] = rr.secs / r.secs;
			}
			if (w.errors || r.errors) {
				fprintf(stderr, "bs %zu: %d write / %d read errors, first: %s\n", bs,
					w.errors, r.errors,
					strata_strerror(w.errors ? w.first_err : r.first_err));
				status = 1;
			}
			if (r.mismatches) {
				fprintf(stderr, "bs %zu: %d records read back wrong\n", bs, r.mismatches);
				status = 1;
			}
		}
		strata_tier_stats st = STRATA_TIER_STATS_INIT;
		strata_nvme_stats(s, &st);
		strata_nvme_destroy(s);
		free(region);
		free(bufs);
		free(hs);
		if (status)
			break;
		if (rw.errors)
			bench_out_note(out, "raw io_uring baseline failed for bs %zu: %s", bs,
				       strata_strerror(rw.first_err));
		bench_stats ws = bench_stats_of(wt, reps), rs = bench_stats_of(rt, reps);
		bench_stats rws = rw.errors ? ws : bench_stats_of(rwt, reps);
		bench_stats rrs = rw.errors ? rs : bench_stats_of(rrt, reps);
		bench_stats wqs = rw.errors ? ws : bench_stats_of(wq, reps);
		bench_stats rqs = rw.errors ? rs : bench_stats_of(rq, reps);
		uint64_t span = nrec * bs;
		for (int ph = 0; ph < 2; ph++) {
			fio_result f = { 0 };
			if (fio) {
				f = run_fio(file, ph == 0, bs, qd, span, span);
				if (!f.ok)
					bench_out_note(out, "fio failed for bs %zu (%s)", bs,
						       info.direct ? "see fio's own output" : "no O_DIRECT here");
			}
			double secs = ph == 0 ? ws.median : rs.median;
			double iops = (double)nrec / secs, dev_bw = iops * (double)bs;
			int raw_ok = !rw.errors;
			double raw_iops = (double)nrec / (ph == 0 ? rws.median : rrs.median);
			double raw_bw = raw_iops * (double)bs;
			/* same bs on both sides: the bandwidth and IOPS ratios are one number */
			double ratio_raw = ph == 0 ? wqs.median : rqs.median;
			double ops = (double)nrec * reps;
			bench_out_row(out, "op", ph == 0 ? "write" : "randread",
				      "bs", bench_fmt("%.0f", (double)bs), "qd", bench_fmt("%.0f", qd),
				      "records", bench_fmt("%.0f", (double)nrec),
				      "payload_MBps", bench_fmt("%.1f", iops * (double)len / 1e6),
				      "dev_MBps", bench_fmt("%.1f", dev_bw / 1e6),
				      "kIOPS", bench_fmt("%.2f", iops / 1e3),
				      "min_s", bench_fmt("%.4f", ph == 0 ? ws.min : rs.min),
				      "max_s", bench_fmt("%.4f", ph == 0 ? ws.max : rs.max),
				      "raw_MBps", raw_ok ? bench_fmt("%.1f", raw_bw / 1e6) : "-",
				      "raw_kIOPS", raw_ok ? bench_fmt("%.2f", raw_iops / 1e3) : "-",
				      "ratio_raw_bw", raw_ok ? bench_fmt("%.3f", ratio_raw) : "-",
				      "ratio_raw_iops", raw_ok ? bench_fmt("%.3f", ratio_raw) : "-",
				      "cpu_us_op", bench_fmt("%.1f", cpu[ph] / ops * 1e6),
				      "raw_cpu_us_op",
				      raw_ok ? bench_fmt("%.1f", cpu[2 + ph] / ops * 1e6) : "-",
				      "fio_MBps", f.ok ? bench_fmt("%.1f", f.bw / 1e6) : "-",
				      "fio_kIOPS", f.ok ? bench_fmt("%.2f", f.iops / 1e3) : "-",
				      "ratio_bw", f.ok ? bench_fmt("%.3f", dev_bw / f.bw) : "-",
				      "ratio_iops", f.ok ? bench_fmt("%.3f", iops / f.iops) : "-",
				      "direct", info.direct ? "1" : "0",
				      "raw_direct", raw_direct ? "1" : "0",
				      "checked", o.check ? "1" : "0", NULL);
		}
		if (st.checksum_failures)
			status = 1;
	}
	bench_out_close(out);
	strata_dev_close(dev);
	if (tmp[0])
		unlink(tmp);
	return status;
}
