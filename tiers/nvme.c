/* The NVMe store: open/create (superblock, preallocation, io_uring setup with registered
 * buffers and file), recovery (mark_live, recover_done), the header scan, counters.
 * The I/O path is nvme_io.c.
 *
 * Crash design note. Allocation state is never written: a record is durable once its
 * write completed and strata_nvme_sync() returned, and it is *live* only when the
 * caller's metadata (the prefix store's RocksDB record) names it. The caller commits
 * metadata after the sync, so after a crash every record its metadata names is intact
 * on disk (checked again by the checksums on read), and every other extent is garbage
 * that the reopened store hands out again. That removes a second source of truth (an
 * on-disk allocator) that could disagree with the metadata. */
#define _GNU_SOURCE
#include "nvme_int.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#define DEFAULT_QD 64u
#define DEFAULT_SLOT ((size_t)(1u << 20) + STRATA_NVME_BLOCK)
#define SCAN_CHUNK ((size_t)1 << 20)

static uint64_t sb_checksum(const nvme_superblock *sb)
{
	return XXH3_64bits(sb, offsetof(nvme_superblock, sb_xxh3));
}

/* Superblock I/O uses plain pread/pwrite: it happens once, before the ring exists. */
static int sb_read(int fd, nvme_superblock *out)
{
	void *b;
	if (posix_memalign(&b, STRATA_NVME_BLOCK, STRATA_NVME_BLOCK))
		return -ENOMEM;
	ssize_t r = pread(fd, b, STRATA_NVME_BLOCK, 0);
	int err = r < 0 ? -errno : r < (ssize_t)STRATA_NVME_BLOCK ? STRATA_E_FORMAT : 0;
	if (!err) {
		memcpy(out, b, sizeof *out);
		if (out->magic != NVME_SB_MAGIC || out->version != NVME_VERSION ||
		    out->block != STRATA_NVME_BLOCK || sb_checksum(out) != out->sb_xxh3)
			err = STRATA_E_FORMAT;
	}
	free(b);
	return err;
}

static int sb_write(int fd, uint64_t capacity)
{
	void *b;
	if (posix_memalign(&b, STRATA_NVME_BLOCK, STRATA_NVME_BLOCK))
		return -ENOMEM;
	memset(b, 0, STRATA_NVME_BLOCK);
	nvme_superblock sb = { .magic = NVME_SB_MAGIC, .version = NVME_VERSION,
			       .block = STRATA_NVME_BLOCK, .capacity = capacity,
			       .created_ns = strata_now_ns() };
	sb.sb_xxh3 = sb_checksum(&sb);
	memcpy(b, &sb, sizeof sb);
	ssize_t r = pwrite(fd, b, STRATA_NVME_BLOCK, 0);
	int err = r < 0 ? -errno : r < (ssize_t)STRATA_NVME_BLOCK ? STRATA_E_SHORTIO : 0;
	if (!err && fdatasync(fd))
		err = -errno;
	free(b);
	return err;
}

static int open_file(strata_nvme_store *s, const strata_nvme_config *cfg)
{
	int flags = O_RDWR | O_CLOEXEC;
	if (cfg->flags & STRATA_NVME_CREATE)
		flags |= O_CREAT;
	if (!(cfg->flags & STRATA_NVME_BUFFERED)) {
		s->fd = open(cfg->path, flags | O_DIRECT, 0600);
		if (s->fd >= 0) {
			s->direct = true;
			/* Caller buffers at this alignment take the zero-copy path. Logical
			 * blocks may be 512 B, but a 4 KiB-formatted NVMe namespace needs 4 KiB,
			 * and page-aligned buffers are what callers have anyway. */
			s->dio_align = STRATA_NVME_BLOCK;
			return 0;
		}
		if (errno != EINVAL)
			return -errno;
		STRATA_LOG(STRATA_LOG_WARN, STRATA_SUB_TIERS,
			   "nvme: %s refuses O_DIRECT (tmpfs?); using buffered I/O", cfg->path);
	}
	s->fd = open(cfg->path, flags, 0600);
	return s->fd < 0 ? -errno : 0;
}

/* Size the store: create (preallocate) or check a reused one. */
static int size_store(strata_nvme_store *s, const strata_nvme_config *cfg, bool *reused)
{
	struct stat sta;
	if (fstat(s->fd, &sta))
		return -errno;
	s->blockdev = S_ISBLK(sta.st_mode);
	uint64_t dev_bytes = (uint64_t)sta.st_size;
	if (s->blockdev && ioctl(s->fd, BLKGETSIZE64, &dev_bytes))
		return -errno;
	*reused = false;
	if (cfg->flags & STRATA_NVME_REUSE) {
		nvme_superblock sb;
		int err = sb_read(s->fd, &sb);
		if (!err) {
			if ((cfg->capacity_bytes && cfg->capacity_bytes / STRATA_NVME_BLOCK *
							      STRATA_NVME_BLOCK != sb.capacity) ||
			    sb.capacity > dev_bytes) {
				STRATA_LOG(STRATA_LOG_ERROR, STRATA_SUB_TIERS,
					   "nvme: %s: store of %llu B, asked %llu B, file %llu B",
					   cfg->path, (unsigned long long)sb.capacity,
					   (unsigned long long)cfg->capacity_bytes,
					   (unsigned long long)dev_bytes);
				return STRATA_E_FORMAT;
			}
			s->capacity = sb.capacity;
			*reused = true;
			return 0;
		}
		if (!(cfg->flags & STRATA_NVME_CREATE) || (err != STRATA_E_FORMAT))
			return err;
	}
	uint64_t cap = cfg->capacity_bytes;
	if (s->blockdev) {
		if (!cap || cap > dev_bytes)
			cap = dev_bytes;
	} else if (!cap) {
		return -EINVAL;
	}
	cap = cap / STRATA_NVME_BLOCK * STRATA_NVME_BLOCK;
	if (cap < 2 * STRATA_NVME_BLOCK)
		return -EINVAL;
	if (!s->blockdev) {
		if (ftruncate(s->fd, 0))
			return -errno;
		/* Preallocate so that writes never hit ENOSPC from the filesystem and the
		 * file's blocks are contiguous where the filesystem can manage it. */
		int r = posix_fallocate(s->fd, 0, (off_t)cap);
		if (r == EOPNOTSUPP || r == EINVAL) {
			if (ftruncate(s->fd, (off_t)cap))
				return -errno;
		} else if (r) {
			return -r;
		}
	}
	s->capacity = cap;
	return sb_write(s->fd, cap);
}

static int setup_ring(strata_nvme_store *s, const strata_nvme_config *cfg)
{
	/* COOP_TASKRUN (5.19+): completions are posted when this thread next enters the
	 * kernel, which it does anyway to submit or wait, instead of by interrupting it;
	 * TASKRUN_FLAG tells liburing when a peek must enter to see them. SINGLE_ISSUER
	 * and DEFER_TASKRUN would save more but tie the ring to one thread, and any thread
	 * may call the store. Older kernels refuse the flags: plain ring then. */
	struct io_uring_params p;
	memset(&p, 0, sizeof p);
	p.flags = IORING_SETUP_COOP_TASKRUN | IORING_SETUP_TASKRUN_FLAG;
	int err = io_uring_queue_init_params(s->qd, &s->ring, &p);
	s->coop_taskrun = !err;
	if (err == -EINVAL) {
		memset(&p, 0, sizeof p);
		err = io_uring_queue_init_params(s->qd, &s->ring, &p);
	}
	if (err) {
		STRATA_LOG(STRATA_LOG_ERROR, STRATA_SUB_TIERS, "nvme: io_uring_queue_init(%u): %s",
			   s->qd, strata_strerror(err));
		return err == -ENOSYS || err == -EPERM ? STRATA_E_UNSUPPORTED : err;
	}
	s->ring_ok = true;
	size_t bytes = (size_t)s->qd * s->slot_bytes;
	if (posix_memalign((void **)&s->staging, STRATA_NVME_BLOCK, bytes))
		return -ENOMEM;
	memset(s->staging, 0, bytes); /* fault the pages in before registration */
	if (cfg->flags & STRATA_NVME_NO_REGISTER)
		return 0;
	struct iovec iov = { s->staging, bytes };
	err = io_uring_register_buffers(&s->ring, &iov, 1);
	if (err)
		STRATA_LOG(STRATA_LOG_INFO, STRATA_SUB_TIERS,
			   "nvme: staging not registered (%s; RLIMIT_MEMLOCK?): plain reads/writes",
			   strata_strerror(err));
	s->reg_bufs = !err;
	err = io_uring_register_files(&s->ring, &s->fd, 1);
	if (err)
		STRATA_LOG(STRATA_LOG_INFO, STRATA_SUB_TIERS, "nvme: file not registered: %s",
			   strata_strerror(err));
	s->reg_file = !err;
	return 0;
}

int strata_nvme_open(const strata_nvme_config *cfg, strata_nvme_store **out)
{
	if (!out)
		return -EINVAL;
	*out = NULL;
	if (!cfg || cfg->size < sizeof *cfg || !cfg->path ||
	    !(cfg->flags & (STRATA_NVME_CREATE | STRATA_NVME_REUSE)) || cfg->queue_depth > 4096 ||
	    (cfg->slot_bytes && cfg->slot_bytes % STRATA_NVME_BLOCK))
		return -EINVAL;
	strata_nvme_store *s = calloc(1, sizeof *s);
	if (!s)
		return -ENOMEM;
	s->fd = -1;
	pthread_mutex_init(&s->mu, NULL);
	s->qd = cfg->queue_depth ? cfg->queue_depth : DEFAULT_QD;
	s->dio_align = 1;
	s->hash = nvme_hash_best();
	s->slot_bytes = cfg->slot_bytes ? cfg->slot_bytes : DEFAULT_SLOT;
	bool reused = false;
	int err = open_file(s, cfg);
	if (!err)
		err = size_store(s, cfg, &reused);
	if (!err)
		err = setup_ring(s, cfg);
	if (err)
		goto fail;
	s->slots = calloc(s->qd, sizeof *s->slots);
	s->free_slots = malloc(s->qd * sizeof *s->free_slots);
	if (!s->slots || !s->free_slots) {
		err = -ENOMEM;
		goto fail;
	}
	for (unsigned i = 0; i < s->qd; i++)
		s->free_slots[s->nfree_slots++] = (int)(s->qd - 1 - i);
	err = extents_init(&s->ext, 1, s->capacity / STRATA_NVME_BLOCK - 1);
	if (err)
		goto fail;
	s->recovering = reused;
	s->st.size = sizeof s->st;
	s->st.tier = STRATA_TIER_NVME;
	s->st.capacity_bytes = s->capacity - STRATA_NVME_BLOCK;
	s->budget = cfg->budget_bytes ? cfg->budget_bytes : s->st.capacity_bytes;
	STRATA_LOG(STRATA_LOG_INFO, STRATA_SUB_TIERS,
		   "nvme: %s %s, %llu B, qd %u, %s%s%s", reused ? "reopened" : "created",
		   cfg->path, (unsigned long long)s->capacity, s->qd,
		   s->direct ? "O_DIRECT" : "buffered", s->reg_bufs ? ", registered buffers" : "",
		   s->reg_file ? ", registered file" : "");
	*out = s;
	return 0;
fail:
	strata_nvme_destroy(s);
	return err;
}

void strata_nvme_destroy(strata_nvme_store *s)
{
	if (!s)
		return;
	if (s->ring_ok) {
		pthread_mutex_lock(&s->mu);
		nvme_drain(s);
		pthread_mutex_unlock(&s->mu);
		io_uring_queue_exit(&s->ring);
	}
	if (s->slots)
		for (unsigned i = 0; i < s->qd; i++)
			free(s->slots[i].tmp);
	free(s->slots);
	free(s->free_slots);
	free(s->done);
	free(s->staging);
	extents_fini(&s->ext);
	if (s->fd >= 0)
		close(s->fd);
	pthread_mutex_destroy(&s->mu);
	free(s);
}

int strata_nvme_mark_live(strata_nvme_store *s, const strata_page_handle *h)
{
	if (!s || !h || h->tier != STRATA_TIER_NVME || h->location % STRATA_NVME_BLOCK ||
	    !h->length || h->location < STRATA_NVME_BLOCK || h->location > s->capacity)
		return -EINVAL;
	uint64_t rb = strata_nvme_record_bytes(h->length);
	if (rb > s->capacity - h->location)
		return -EINVAL;
	pthread_mutex_lock(&s->mu);
	int err = !s->recovering ? -EBUSY
				 : extents_take(&s->ext, h->location / STRATA_NVME_BLOCK,
						rb / STRATA_NVME_BLOCK);
	if (!err) {
		s->st.used_bytes += rb;
		s->st.pages++;
		if (s->st.used_bytes > s->st.peak_bytes)
			s->st.peak_bytes = s->st.used_bytes;
	}
	pthread_mutex_unlock(&s->mu);
	return err;
}

int strata_nvme_recover_done(strata_nvme_store *s)
{
	if (!s)
		return -EINVAL;
	pthread_mutex_lock(&s->mu);
	s->recovering = false;
	pthread_mutex_unlock(&s->mu);
	return 0;
}

int strata_nvme_scan(strata_nvme_store *s, strata_nvme_scan_cb cb, void *arg)
{
	if (!s || !cb)
		return -EINVAL;
	uint8_t *chunk;
	if (posix_memalign((void **)&chunk, STRATA_NVME_BLOCK, SCAN_CHUNK))
		return -ENOMEM;
	int ret = 0;
	for (uint64_t off = STRATA_NVME_BLOCK; off < s->capacity && !ret;) {
		uint64_t n = s->capacity - off < SCAN_CHUNK ? s->capacity - off : SCAN_CHUNK;
		pthread_mutex_lock(&s->mu);
		int r = nvme_run_raw(s, SLOT_RAW, chunk, off, n);
		pthread_mutex_unlock(&s->mu);
		if (r < 0) {
			ret = r;
			break;
		}
		/* The lock is not held here: cb may call back into the store. */
		/* A trailer sits at the end of a record's last block: check every block's
		 * last 64 bytes, and a valid one says where its record starts. Records
		 * don't overlap, so last-block order is start order. */
		for (uint64_t b = 0; b < n && !ret; b += STRATA_NVME_BLOCK) {
			nvme_rec_hdr hd;
			memcpy(&hd, chunk + b + STRATA_NVME_BLOCK - sizeof hd, sizeof hd);
			if (hd.magic != NVME_REC_MAGIC || hd.version != NVME_VERSION ||
			    hd.hdr_bytes != STRATA_NVME_HEADER_BYTES ||
			    nvme_hdr_checksum(&hd) != hd.hdr_xxh3 || !hd.length ||
			    hd.length > MAX_RECORD_PAYLOAD)
				continue;
			uint64_t end = off + b + STRATA_NVME_BLOCK,
				 rb = strata_nvme_record_bytes(hd.length);
			if (rb > end - STRATA_NVME_BLOCK) /* would start in the superblock */
				continue;
			strata_page_handle h = { .tier = STRATA_TIER_NVME, .location = end - rb,
						 .length = hd.length, .checksum = hd.payload_xxh3 };
			strata_page_key key = { hd.key_lo, hd.key_hi };
			ret = cb(arg, &key, &h);
		}
		off += n;
	}
	free(chunk);
	return ret;
}

int strata_nvme_get_info(const strata_nvme_store *s, strata_nvme_info *info)
{
	if (!s || !info || info->size < sizeof *info)
		return -EINVAL;
	strata_nvme_store *m = (strata_nvme_store *)s;
	pthread_mutex_lock(&m->mu);
	*info = (strata_nvme_info){ .size = sizeof *info,
				    .capacity_bytes = s->capacity - STRATA_NVME_BLOCK,
				    .queue_depth = s->qd, .direct = s->direct,
				    .block_device = s->blockdev, .registered_buffers = s->reg_bufs,
				    .registered_file = s->reg_file, .recovering = s->recovering,
				    .slot_bytes = s->slot_bytes, .free_extents = s->ext.n,
				    .largest_free = extents_largest(&s->ext) * STRATA_NVME_BLOCK };
	pthread_mutex_unlock(&m->mu);
	return 0;
}

int strata_nvme_stats(const strata_nvme_store *s, strata_tier_stats *st)
{
	if (!s || !st || st->size < sizeof *st)
		return -EINVAL;
	strata_nvme_store *m = (strata_nvme_store *)s;
	pthread_mutex_lock(&m->mu);
	*st = s->st;
	st->budget_bytes = s->budget;
	pthread_mutex_unlock(&m->mu);
	return 0;
}

int strata_nvme_set_budget(strata_nvme_store *s, uint64_t bytes)
{
	if (!s)
		return -EINVAL;
	pthread_mutex_lock(&s->mu);
	s->budget = bytes ? bytes : s->st.capacity_bytes;
	pthread_mutex_unlock(&s->mu);
	return 0;
}

int strata_nvme_inject(strata_nvme_store *s, strata_fault_site site, int64_t nth, int err)
{
	if (!s || site < STRATA_FAULT_SUBMIT || site > STRATA_FAULT_ALLOC)
		return -EINVAL;
	if (nth >= 0 && !(err < 0 || (err == STRATA_FAULT_SHORT && site == STRATA_FAULT_COMPLETE)))
		return -EINVAL;
	pthread_mutex_lock(&s->mu);
	fault_arm(&s->fault, (int)site, nth, err);
	pthread_mutex_unlock(&s->mu);
	return 0;
}
