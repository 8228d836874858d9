/* The NVMe store's I/O path: one io_uring, a staging slot per in-flight operation,
 * and the fault seams (submission, completion, extent allocation).
 *
 * A record is [payload][zero pad][64-byte trailer], 4 KiB-rounded. The payload starts
 * block-aligned, so when the caller's buffer is aligned for the file's I/O mode
 * (4 KiB under O_DIRECT) the whole blocks the payload fills move by DMA straight
 * between the device and the caller's memory, and only the last block or two (the
 * payload's tail, the pad and the trailer) go through the slot's staging buffer: one
 * READV/WRITEV of two segments per record. That zero-copy path is what lets the store
 * run at the device's speed for large records; the bytes copied per record are at most
 * 8 KiB whatever its size. An unaligned caller buffer, or a verify (no buffer), moves
 * the whole record through staging (the slot, registered with io_uring so
 * READ_FIXED/WRITE_FIXED skip per-I/O page pinning, or a temporary aligned buffer for
 * records past slot_bytes).
 *
 * Checksums: a write hashes the payload (XXH3-64 on AVX2/AVX-512 where the CPU has it,
 * 50-70 GB/s per core, see nvme_hash.c) in the submitting
 * thread, because the trailer must carry it; a read checks the trailer, then hashes the
 * payload once it is complete. A read that fails any check zeroes the caller's buffer:
 * on the zero-copy path the device's bytes land there before they are checked, so the
 * buffer's contents are unspecified until the op finishes, and zero if it failed.
 *
 * Completion is where results are decided: a negative res is the operation's -errno, a
 * short res is STRATA_E_SHORTIO, a failed write gives its extent back. Nothing a failed
 * operation does can touch another record: its extent was its own from submission on.
 *
 * Finished user ops wait in a FIFO until strata_nvme_reap() hands them back; the
 * synchronous calls run an op of their own through the same path and wait for it
 * alone, leaving other finished ops queued. */
#define _GNU_SOURCE
#include "nvme_int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

uint64_t nvme_hdr_checksum(const nvme_rec_hdr *h)
{
	return XXH3_64bits(h, offsetof(nvme_rec_hdr, hdr_xxh3));
}

uint64_t strata_nvme_record_bytes(uint64_t len)
{
	return (len + STRATA_NVME_HEADER_BYTES + STRATA_NVME_BLOCK - 1) / STRATA_NVME_BLOCK *
	       STRATA_NVME_BLOCK;
}

/* Record bytes [0, head) of a payload of len bytes that can move straight from or to
 * buf: the whole blocks the payload fills (never the trailer's block), provided buf
 * has the alignment direct I/O needs. */
static uint64_t direct_head(const strata_nvme_store *s, const void *buf, uint64_t len)
{
	if (!buf || s->zc_off || (uintptr_t)buf % s->dio_align)
		return 0;
	return len / STRATA_NVME_BLOCK * STRATA_NVME_BLOCK;
}

static int push_done(strata_nvme_store *s, strata_nvme_op *op)
{
	if (s->done_n == s->done_cap) {
		size_t cap = s->done_cap ? s->done_cap * 2 : 64;
		strata_nvme_op **v = malloc(cap * sizeof *v);
		if (!v)
			return -ENOMEM;
		for (size_t i = 0; i < s->done_n; i++)
			v[i] = s->done[(s->done_head + i) % s->done_cap];
		free(s->done);
		s->done = v;
		s->done_cap = cap;
		s->done_head = 0;
	}
	s->done[(s->done_head + s->done_n++) % s->done_cap] = op;
	return 0;
}

/* An op finished without reaching the device, or after. */
static void finish(strata_nvme_store *s, strata_nvme_op *op, int *done, int result)
{
	op->result = result;
	if (done) {
		*done = 1;
	} else if (push_done(s, op)) {
		/* Can't queue it: the caller would never see it come back. Keep the error
		 * visible and loud; this needs malloc to fail for 64+ pointers. */
		STRATA_LOG(STRATA_LOG_ERROR, STRATA_SUB_TIERS, "nvme: lost a completion (no memory)");
	}
}

#define ALL ((uint64_t)-1)

static void slot_release(strata_nvme_store *s, int i)
{
	nvme_slot *sl = &s->slots[i];
	free(sl->tmp);
	memset(sl, 0, sizeof *sl);
	s->free_slots[s->nfree_slots++] = i;
}

/* Queue slot i's transfer on the ring. The SUBMIT seam sits here: an injected fault
 * fails the op before its SQE exists. */
static int queue_slot(strata_nvme_store *s, int i)
{
	nvme_slot *sl = &s->slots[i];
	int err = fault_hit(&s->fault, STRATA_FAULT_SUBMIT);
	if (err) {
		s->st.faults_fired++;
		return err;
	}
	struct io_uring_sqe *sqe = io_uring_get_sqe(&s->ring);
	if (!sqe)
		return -EBUSY; /* can't happen: one SQE per slot, qd slots, qd SQ entries */
	int fd = s->reg_file ? 0 : s->fd;
	bool fixed = s->reg_bufs && sl->buf >= s->staging &&
		     sl->buf < s->staging + (size_t)s->qd * s->slot_bytes;
	switch (sl->kind) {
	case SLOT_READ:
	case SLOT_RAW:
		if (sl->head)
			io_uring_prep_readv(sqe, fd, sl->iov, 2, sl->offset);
		else if (fixed)
			io_uring_prep_read_fixed(sqe, fd, sl->buf, (unsigned)sl->bytes, sl->offset, 0);
		else
			io_uring_prep_read(sqe, fd, sl->buf, (unsigned)sl->bytes, sl->offset);
		break;
	case SLOT_WRITE:
		if (sl->head)
			io_uring_prep_writev(sqe, fd, sl->iov, 2, sl->offset);
		else if (fixed)
			io_uring_prep_write_fixed(sqe, fd, sl->buf, (unsigned)sl->bytes, sl->offset, 0);
		else
			io_uring_prep_write(sqe, fd, sl->buf, (unsigned)sl->bytes, sl->offset);
		break;
	default:
		io_uring_prep_fsync(sqe, fd, IORING_FSYNC_DATASYNC);
		break;
	}
	if (s->reg_file)
		sqe->flags |= IOSQE_FIXED_FILE;
	io_uring_sqe_set_data64(sqe, (uint64_t)i);
	s->in_kernel++;
	return 0;
}

static int take_slot(strata_nvme_store *s, uint64_t bytes, int kind)
{
	if (!s->nfree_slots)
		return -EAGAIN;
	int i = s->free_slots[--s->nfree_slots];
	nvme_slot *sl = &s->slots[i];
	memset(sl, 0, sizeof *sl);
	sl->kind = kind;
	sl->busy = true;
	if (kind == SLOT_SYNC || kind == SLOT_RAW)
		return i;
	if (bytes <= s->slot_bytes) {
		sl->buf = s->staging + (size_t)i * s->slot_bytes;
	} else if (posix_memalign((void **)&sl->tmp, STRATA_NVME_BLOCK, bytes)) {
		sl->tmp = NULL;
		slot_release(s, i);
		return -ENOMEM;
	} else {
		sl->buf = sl->tmp;
	}
	return i;
}

static bool read_handle_ok(const strata_nvme_store *s, const strata_page_handle *h)
{
	if (h->tier != STRATA_TIER_NVME || h->location % STRATA_NVME_BLOCK ||
	    h->location < STRATA_NVME_BLOCK || !h->length || h->length > MAX_RECORD_PAYLOAD)
		return false;
	uint64_t rb = strata_nvme_record_bytes(h->length);
	return h->location <= s->capacity && rb <= s->capacity - h->location;
}

/* Start one READ or WRITE op. Returns 1 when it went to the ring, 0 when it finished at
 * once (result set, queued or flagged), -EAGAIN when no slot is free (nothing done). */
static int start_op(strata_nvme_store *s, strata_nvme_op *op, int *done)
{
	int err = 0, i = -1;
	if (op->kind == STRATA_NVME_OP_WRITE) {
		if (!op->buf || !op->len || op->len > MAX_RECORD_PAYLOAD) {
			err = -EINVAL;
			goto fail;
		}
		if (s->recovering) {
			err = -EBUSY;
			goto fail;
		}
		uint64_t rb = strata_nvme_record_bytes(op->len);
		if (!s->nfree_slots)
			return -EAGAIN;
		if (s->st.used_bytes + rb > s->st.capacity_bytes) {
			s->st.full_failures++;
			err = -ENOSPC;
			goto fail;
		}
		if (s->st.used_bytes + rb > s->budget) {
			s->st.budget_failures++;
			err = STRATA_E_BUDGET;
			goto fail;
		}
		if ((err = fault_hit(&s->fault, STRATA_FAULT_ALLOC))) {
			s->st.faults_fired++;
			goto fail;
		}
		uint64_t start;
		if ((err = extents_alloc(&s->ext, rb / STRATA_NVME_BLOCK, &start))) {
			if (err == -ENOSPC)
				s->st.full_failures++;
			goto fail;
		}
		s->st.used_bytes += rb;
		op->handle = (strata_page_handle){ .tier = STRATA_TIER_NVME,
						   .location = start * STRATA_NVME_BLOCK,
						   .length = op->len };
		uint64_t head = direct_head(s, op->buf, op->len), tail = rb - head;
		i = take_slot(s, tail, SLOT_WRITE);
		if (i < 0) {
			err = i;
			goto fail_extent;
		}
		nvme_slot *sl = &s->slots[i];
		sl->op = op;
		sl->done = done;
		sl->offset = start * STRATA_NVME_BLOCK;
		sl->bytes = rb;
		sl->head = head;
		sl->iov[0] = (struct iovec){ op->buf, head };
		sl->iov[1] = (struct iovec){ sl->buf, tail };
		uint64_t sum = s->hash(op->buf, op->len);
		nvme_rec_hdr hd = { .magic = NVME_REC_MAGIC, .version = NVME_VERSION,
				    .hdr_bytes = STRATA_NVME_HEADER_BYTES, .key_lo = op->key.lo,
				    .key_hi = op->key.hi, .length = op->len, .payload_xxh3 = sum };
		hd.hdr_xxh3 = nvme_hdr_checksum(&hd);
		uint64_t part = op->len - head; /* payload bytes staged */
		memcpy(sl->buf, (const uint8_t *)op->buf + head, part);
		memset(sl->buf + part, 0, tail - sizeof hd - part);
		memcpy(sl->buf + tail - sizeof hd, &hd, sizeof hd);
		op->handle.checksum = sum;
		if ((err = queue_slot(s, i)))
			goto fail_extent;
		return 1;
	}
	if (op->kind != STRATA_NVME_OP_READ || !read_handle_ok(s, &op->handle) ||
	    (op->buf && op->len < op->handle.length)) {
		err = -EINVAL;
		goto fail_read;
	}
	uint64_t rb = strata_nvme_record_bytes(op->handle.length);
	uint64_t head = direct_head(s, op->buf, op->handle.length);
	i = take_slot(s, rb - head, SLOT_READ);
	if (i == -EAGAIN)
		return -EAGAIN;
	if (i < 0) {
		err = i;
		goto fail_read;
	}
	nvme_slot *sl = &s->slots[i];
	sl->op = op;
	sl->done = done;
	sl->offset = op->handle.location;
	sl->bytes = rb;
	sl->head = head;
	sl->iov[0] = (struct iovec){ op->buf, head };
	sl->iov[1] = (struct iovec){ sl->buf, rb - head };
	if ((err = queue_slot(s, i)))
		goto fail_read;
	return 1;

fail_extent:
	extents_free(&s->ext, op->handle.location / STRATA_NVME_BLOCK,
		     strata_nvme_record_bytes(op->len) / STRATA_NVME_BLOCK);
	s->st.used_bytes -= strata_nvme_record_bytes(op->len);
fail:
	if (op->kind == STRATA_NVME_OP_WRITE)
		op->handle = (strata_page_handle){ 0 };
fail_read:
	if (op->kind == STRATA_NVME_OP_READ && op->buf && err != -EINVAL)
		memset(op->buf, 0, op->handle.length < op->len ? op->handle.length : op->len);
	if (i >= 0)
		slot_release(s, i);
	finish(s, op, done, err);
	return 0;
}

/* Check a record that was read: the trailer first, then the payload's checksum. On the
 * staged path (head 0) the bytes are copied out only once they passed; on the zero-copy
 * path the payload's head is in the caller's buffer already, so the staged tail joins
 * it and the whole payload is hashed there (the caller zeroes it on failure). */
static int check_read(const strata_nvme_store *s, nvme_slot *sl)
{
	strata_nvme_op *op = sl->op;
	uint64_t staged = sl->bytes - sl->head;
	nvme_rec_hdr hd;
	memcpy(&hd, sl->buf + staged - sizeof hd, sizeof hd);
	if (hd.magic != NVME_REC_MAGIC || hd.version != NVME_VERSION ||
	    hd.hdr_bytes != STRATA_NVME_HEADER_BYTES || nvme_hdr_checksum(&hd) != hd.hdr_xxh3)
		return STRATA_E_CORRUPT;
	/* the length check also pins the staged tail's size to what was planned */
	if (hd.length != op->handle.length || hd.payload_xxh3 != op->handle.checksum)
		return STRATA_E_CHECKSUM;
	if (sl->head) {
		memcpy((uint8_t *)op->buf + sl->head, sl->buf, hd.length - sl->head);
		if (s->hash(op->buf, hd.length) != hd.payload_xxh3)
			return STRATA_E_CHECKSUM;
	} else {
		if (s->hash(sl->buf, hd.length) != hd.payload_xxh3)
			return STRATA_E_CHECKSUM;
		if (op->buf)
			memcpy(op->buf, sl->buf, hd.length);
	}
	op->key = (strata_page_key){ hd.key_lo, hd.key_hi };
	return 0;
}

/* A zero-copy op came back -EFAULT: the kernel could not pin the caller's memory (a
 * driver mapping that is not ordinary pages). Turn the zero-copy path off for good and
 * queue the op again with the whole record in staging. Returns 0 when queued. */
static int restage(strata_nvme_store *s, int i)
{
	nvme_slot *sl = &s->slots[i];
	if (!s->zc_off)
		STRATA_LOG(STRATA_LOG_WARN, STRATA_SUB_TIERS,
			   "nvme: a caller buffer can't take direct I/O (EFAULT): staging every "
			   "record from now on");
	s->zc_off = true;
	uint64_t tail = sl->bytes - sl->head;
	uint8_t *nb = s->staging + (size_t)i * s->slot_bytes, *tmp = NULL;
	if (sl->bytes > s->slot_bytes) {
		if (posix_memalign((void **)&tmp, STRATA_NVME_BLOCK, sl->bytes))
			return -ENOMEM;
		nb = tmp;
	}
	if (sl->kind == SLOT_WRITE) {
		/* the staged tail may already sit at nb (the slot's own staging) */
		memmove(nb + sl->head, sl->buf, tail);
		memcpy(nb, sl->op->buf, sl->head);
	}
	free(sl->tmp);
	sl->tmp = tmp;
	sl->buf = nb;
	sl->head = 0;
	return queue_slot(s, i);
}

static void complete(strata_nvme_store *s, int i, int res)
{
	nvme_slot *sl = &s->slots[i];
	s->in_kernel--;
	int inj = fault_hit(&s->fault, STRATA_FAULT_COMPLETE);
	if (inj) {
		s->st.faults_fired++;
		if (inj == STRATA_FAULT_SHORT)
			res = res > 0 ? res / 2 : 0; /* a short transfer: half of what moved */
		else
			res = inj;
	}
	if (res == -EFAULT && sl->head && !restage(s, i))
		return; /* queued again through staging */
	int err = 0;
	if (inj == STRATA_FAULT_SHORT && sl->kind == SLOT_SYNC) {
		err = STRATA_E_SHORTIO; /* no transfer to shorten: report it anyway */
		s->st.short_io++;
	} else if (res < 0) {
		err = res;
		s->st.io_errors++;
	} else if (sl->kind != SLOT_SYNC && (uint64_t)res < sl->bytes) {
		err = STRATA_E_SHORTIO;
		s->st.short_io++;
	}
	if (sl->kind == SLOT_SYNC || sl->kind == SLOT_RAW) {
		*sl->raw_res = err ? err : res;
		*sl->done = 1;
		slot_release(s, i);
		return;
	}
	strata_nvme_op *op = sl->op;
	int *done = sl->done;
	if (sl->kind == SLOT_WRITE) {
		if (err) {
			extents_free(&s->ext, sl->offset / STRATA_NVME_BLOCK,
				     sl->bytes / STRATA_NVME_BLOCK);
			s->st.used_bytes -= sl->bytes;
			op->handle = (strata_page_handle){ 0 };
		} else {
			s->st.writes++;
			s->st.allocs++;
			s->st.pages++;
			s->st.bytes_in += op->len;
			if (s->st.used_bytes > s->st.peak_bytes)
				s->st.peak_bytes = s->st.used_bytes;
		}
	} else {
		if (!err) {
			err = check_read(s, sl);
			if (err) {
				s->st.checksum_failures++;
				STRATA_LOG(STRATA_LOG_WARN, STRATA_SUB_TIERS,
					   "nvme: record at %llu failed verification: %s",
					   (unsigned long long)sl->offset, strata_strerror(err));
			}
		}
		if (err) {
			if (op->buf)
				memset(op->buf, 0, op->handle.length);
		} else {
			s->st.reads++;
			s->st.bytes_out += op->handle.length;
		}
	}
	slot_release(s, i);
	finish(s, op, done, err);
}

/* Process posted completions, oldest first: all of them (budget ALL), or stop once
 * min_done finished ops are queued and either the ops processed moved budget bytes or,
 * with the device running low, REAP_EVERY_OPS were processed. Why stop early: a read's
 * completion is verified here (copy of the staged tail, XXH3 of the payload: ~1 us per
 * 4 KiB record, ~50-100 us per MiB), and the caller refills the queue only once reap
 * returns. Thirty 1 MiB reads, or 64 small ones that a virtual disk completed all at
 * once, verified before returning leave the device idle for that long; handing back a
 * few at a time lets the caller resubmit while the rest wait in the CQ, and the next
 * call takes them with no syscall. While the device still holds half the queue it has
 * work: then only the byte budget applies. What is left stays in the CQ (the CQ has
 * twice the SQ's entries and at most qd ops are in flight: it can't overflow). */
#define REAP_EVERY_OPS 4u

static void harvest(strata_nvme_store *s, size_t min_done, uint64_t budget)
{
	struct io_uring_cqe *cqe;
	unsigned head, n = 0, ready = io_uring_cq_ready(&s->ring);
	uint64_t bytes = 0;
	io_uring_for_each_cqe(&s->ring, head, cqe)
	{
		int i = (int)io_uring_cqe_get_data64(cqe);
		bytes += s->slots[i].bytes;
		complete(s, i, cqe->res);
		n++;
		if (s->done_n < min_done)
			continue;
		/* ops still with the device: in flight minus completions not yet taken */
		int in_dev = s->in_kernel - (int)(ready > n ? ready - n : 0);
		if (bytes >= budget ||
		    (budget != ALL && n >= REAP_EVERY_OPS && in_dev < (int)s->qd / 2))
			break;
	}
	io_uring_cq_advance(&s->ring, n);
}

#define REAP_BUDGET_BYTES ((uint64_t)512 << 10)

/* Submit what is queued, wait for at least one completion, process those there (see
 * harvest). When completions are already posted (the submit syscall that queued the
 * batch ran the completion work on its way out) and nothing waits to be submitted, no
 * syscall: a batch costs one io_uring_enter, not two. */
static int wait_some_budget(strata_nvme_store *s, size_t min_done, uint64_t budget)
{
	if (!io_uring_cq_ready(&s->ring) || io_uring_sq_ready(&s->ring)) {
		int r = io_uring_submit_and_wait(&s->ring, 1);
		if (r < 0 && r != -EINTR && r != -EAGAIN && r != -EBUSY && r != -ETIME) {
			STRATA_LOG(STRATA_LOG_ERROR, STRATA_SUB_TIERS, "nvme: io_uring wait: %s",
				   strata_strerror(r));
			return r;
		}
	}
	harvest(s, min_done, budget);
	return 0;
}

static int wait_some(strata_nvme_store *s)
{
	return wait_some_budget(s, 0, ALL);
}

static void submit_queued(strata_nvme_store *s)
{
	/* Errors here are transient (-EAGAIN, -EBUSY, -EINTR): the SQEs stay in the ring
	 * and the next wait submits them. */
	int r = io_uring_submit(&s->ring);
	if (r < 0)
		STRATA_LOG(STRATA_LOG_DEBUG, STRATA_SUB_TIERS, "nvme: submit deferred: %s",
			   strata_strerror(r));
}

/* Lock held: run one op to completion. */
static int run_op(strata_nvme_store *s, strata_nvme_op *op)
{
	int done = 0, r;
	while ((r = start_op(s, op, &done)) == -EAGAIN)
		if ((r = wait_some(s)))
			return r;
	if (r == 1)
		submit_queued(s);
	while (!done)
		if ((r = wait_some(s)))
			return r;
	return op->result;
}

int nvme_run_raw(strata_nvme_store *s, int kind, uint8_t *buf, uint64_t offset,
		 uint64_t bytes)
{
	int done = 0, res = 0, r;
	while ((r = take_slot(s, 0, kind)) == -EAGAIN)
		if ((r = wait_some(s)))
			return r;
	int i = r;
	nvme_slot *sl = &s->slots[i];
	sl->done = &done;
	sl->raw_res = &res;
	sl->buf = buf;
	sl->offset = offset;
	sl->bytes = bytes;
	if ((r = queue_slot(s, i))) {
		slot_release(s, i);
		return r;
	}
	submit_queued(s);
	while (!done)
		if ((r = wait_some(s)))
			return r;
	return res;
}

void nvme_drain(strata_nvme_store *s)
{
	while (s->in_kernel > 0)
		if (wait_some(s))
			break;
}

int strata_nvme_write(strata_nvme_store *s, const strata_page_key *key, const void *buf,
		      size_t len, strata_page_handle *h)
{
	if (!s || !h)
		return -EINVAL;
	strata_nvme_op op = { .kind = STRATA_NVME_OP_WRITE, .buf = (void *)buf, .len = len };
	if (key)
		op.key = *key;
	pthread_mutex_lock(&s->mu);
	int err = run_op(s, &op);
	pthread_mutex_unlock(&s->mu);
	*h = op.handle;
	return err;
}

int strata_nvme_read(strata_nvme_store *s, const strata_page_handle *h, void *buf,
		     size_t buf_len)
{
	if (!s || !h || !buf)
		return -EINVAL;
	strata_nvme_op op = { .kind = STRATA_NVME_OP_READ, .buf = buf, .len = buf_len,
			      .handle = *h };
	pthread_mutex_lock(&s->mu);
	int err = run_op(s, &op);
	pthread_mutex_unlock(&s->mu);
	return err;
}

int strata_nvme_verify(strata_nvme_store *s, const strata_page_handle *h, strata_page_key *key)
{
	if (!s || !h)
		return -EINVAL;
	strata_nvme_op op = { .kind = STRATA_NVME_OP_READ, .handle = *h };
	pthread_mutex_lock(&s->mu);
	int err = run_op(s, &op);
	pthread_mutex_unlock(&s->mu);
	if (!err && key)
		*key = op.key;
	return err;
}

int strata_nvme_sync(strata_nvme_store *s)
{
	if (!s)
		return -EINVAL;
	pthread_mutex_lock(&s->mu);
	int r = nvme_run_raw(s, SLOT_SYNC, NULL, 0, 0);
	pthread_mutex_unlock(&s->mu);
	return r < 0 ? r : 0;
}

int strata_nvme_free(strata_nvme_store *s, const strata_page_handle *h)
{
	if (!s || !h || !read_handle_ok(s, h))
		return -EINVAL;
	uint64_t rb = strata_nvme_record_bytes(h->length);
	pthread_mutex_lock(&s->mu);
	int err = s->recovering ? -EBUSY
				: extents_free(&s->ext, h->location / STRATA_NVME_BLOCK,
					       rb / STRATA_NVME_BLOCK);
	if (!err) {
		s->st.used_bytes -= rb;
		s->st.pages--;
		s->st.frees++;
	}
	pthread_mutex_unlock(&s->mu);
	return err;
}

/* Submission pacing: enter the kernel every SUBMIT_EVERY_OPS ops or SUBMIT_EVERY_BYTES
 * record bytes queued, not once per batch. The kernel's per-SQE submission work (about
 * 1-1.5 us for an O_DIRECT read on ext4: iomap, bio, request) runs in the submitting
 * thread, and one io_uring_enter for a whole batch plugs every request until the last
 * one is built: a refill of 64 small ops left the device idle ~80 us per round on the
 * dev VM, a quarter of a 4 KiB random-read round (fio, iodepth_batch_submit=1, enters
 * once per op and was faster than our one-enter loops for that reason). Four ops per
 * enter kept the device fed for a quarter of the syscalls (measured: 4 beat 1, 8, 16
 * and a doubling rule at 4 KiB); records of 64 KiB and more go one enter each, which
 * also bounds the write hashing done before the device sees a record (~5 us per
 * 256 KiB with AVX2). */
#define SUBMIT_EVERY_OPS 4u
#define SUBMIT_EVERY_BYTES ((uint64_t)256 << 10)

int strata_nvme_submit(strata_nvme_store *s, strata_nvme_op *const *ops, int n)
{
	if (!s || !ops || n < 0)
		return -EINVAL;
	pthread_mutex_lock(&s->mu);
	int taken = 0;
	unsigned unsent = 0; /* ops queued on the ring since the last enter */
	uint64_t unsent_bytes = 0;
	for (; taken < n; taken++) {
		strata_nvme_op *op = ops[taken];
		if (!op) {
			if (!taken)
				taken = -EINVAL;
			break;
		}
		int r = start_op(s, op, NULL);
		if (r == -EAGAIN)
			break;
		if (!r)
			continue; /* finished at once (error): nothing queued */
		unsent++;
		unsent_bytes += strata_nvme_record_bytes(op->kind == STRATA_NVME_OP_WRITE ?
								 op->len : op->handle.length);
		if (unsent >= SUBMIT_EVERY_OPS || unsent_bytes >= SUBMIT_EVERY_BYTES) {
			submit_queued(s);
			unsent = 0;
			unsent_bytes = 0;
		}
	}
	if (unsent)
		submit_queued(s);
	pthread_mutex_unlock(&s->mu);
	return taken;
}

int strata_nvme_reap(strata_nvme_store *s, int min, strata_nvme_op **done, int max)
{
	if (!s || min < 0 || max < 0 || (max && !done))
		return -EINVAL;
	int err = 0, n = 0;
	pthread_mutex_lock(&s->mu);
	if (min > max)
		min = max;
	while ((int)s->done_n < min && s->in_kernel > 0)
		if ((err = wait_some_budget(s, (size_t)min, REAP_BUDGET_BYTES)))
			goto out;
	if (!min && s->in_kernel > 0) {
		/* Collect what has completed, without waiting. */
		submit_queued(s);
		harvest(s, 0, REAP_BUDGET_BYTES);
	}
	for (; n < max && s->done_n; n++) {
		done[n] = s->done[s->done_head];
		s->done_head = (s->done_head + 1) % s->done_cap;
		s->done_n--;
	}
out:
	pthread_mutex_unlock(&s->mu);
	return err ? err : n;
}

int strata_nvme_inflight(const strata_nvme_store *s)
{
	if (!s)
		return 0;
	strata_nvme_store *m = (strata_nvme_store *)s;
	pthread_mutex_lock(&m->mu);
	int n = m->in_kernel + (int)m->done_n;
	pthread_mutex_unlock(&m->mu);
	return n;
}
