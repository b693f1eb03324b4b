// SPDX-License-Identifier: GPL-2.0
/*
 * kfrmr: Linux as the fast-registering side of the extended-verbs interop
 * (issue 19). Linux userspace has no fast-register verb (ib_alloc_mr, the
 * REG_MR work request and ib_update_fast_reg_key are kernel-only), so this
 * module, loaded in the rdma_rxe peer (tests/linux-peer/build.sh builds it
 * against Debian's headers for the peer's kernel), is the target of the
 * appliance's `frmr_cm -R initiator` (rdma/host/verbs/src/bin/frmr_cm.rs).
 *
 * It connects to the tool with the kernel's rdma_cm (RC, port space TCP)
 * twice; the tool listens. Each round ends with a WRITE the module's rxe
 * must refuse (a remote access error, IBA 9.9.3 class C: both QPs go to
 * the error state), so each round has its own connection, over one PD and
 * one fast-register MR:
 *
 *   round 1  the MR maps two pages in the order [second, first] (a page
 *            list, not one run of memory), filled with pattern 1; a REG_MR
 *            work request registers it with a new key byte (K1, remote read
 *            and write); the module SENDs "FRMR <iova> <rkey> <length>
 *            <old rkey>" (hex, NUL-terminated); the tool READs pattern 1,
 *            WRITEs pattern 2 and reads it back, then SENDs 4096 bytes of
 *            pattern 3 WITH INVALIDATE of K1: the module's receive must
 *            complete with IB_WC_WITH_INVALIDATE, ex.invalidate_rkey K1 and
 *            the data, and the pages must hold pattern 2 in the MR's page
 *            order; the tool's next WRITE through K1 must fail with remote
 *            access error and leave the pages alone; the tool disconnects.
 *   round 2  ib_update_fast_reg_key moves the key byte on (K2), the pages
 *            get pattern 4, REG_MR registers the MR again; the module SENDs
 *            "FRMR <iova> <K2> <length> <K1>"; the tool READs pattern 4,
 *            WRITEs pattern 5 through K2 and reads it back, and a WRITE of
 *            pattern 6 through the old K1 must fail; after the disconnect
 *            the pages must hold pattern 5.
 *
 * Pattern n's byte i is (u8)(i * 7 + n * 31 + 1), as ext_verbs'.
 *
 * Parameters: server (IPv4 address of the tool, default 10.0.0.1), port
 * (default 18516). The work runs in a kernel thread started at load time;
 * each checked step is a line "round N: <what>: ok" in dmesg and in the
 * read-only parameter /sys/module/kfrmr/parameters/result, which ends with
 * "PASS frmr as target" or "FAIL frmr as target: <why>". Unloading stops a
 * run that has not ended and frees everything.
 */
#include <linux/delay.h>
#include <linux/inet.h>
#include <linux/kthread.h>
#include <linux/module.h>
#include <linux/scatterlist.h>
#include <linux/slab.h>
#include <linux/wait.h>
#include <rdma/ib_verbs.h>
#include <rdma/rdma_cm.h>

#define FRMR_PAGES 2
#define FRMR_LEN (FRMR_PAGES * PAGE_SIZE)
/* What the tool SENDs WITH INVALIDATE: four packets at MTU 1024. */
#define INV_SEND_LEN 4096u
#define MSG_LEN 64u
/* The message area: one receive of INV_SEND_LEN bytes, then our SEND. */
#define RECV_OFF 0u
#define SEND_OFF INV_SEND_LEN
#define AREA_LEN (INV_SEND_LEN + MSG_LEN)
/* How long any one step may take (a TCG guest on a busy host is slow). */
#define STEP_TIMEOUT (60 * HZ)

enum { WR_REG = 1, WR_SEND, WR_RECV };

static char *server = "10.0.0.1";
module_param(server, charp, 0444);
MODULE_PARM_DESC(server, "IPv4 address of the frmr_cm initiator (rdma_cm listener)");
static ushort port = 18516;
module_param(port, ushort, 0444);
MODULE_PARM_DESC(port, "its rdma_cm port");
static char result[PAGE_SIZE];
module_param_string(result, result, sizeof(result), 0444);
MODULE_PARM_DESC(result, "the run's checked steps, then PASS or FAIL (read-only)");

struct kfrmr {
	/* rdma_cm events seen on the current connection (bit per event). */
	unsigned long events;
	int status;
	wait_queue_head_t wq;
	struct rdma_cm_id *id;
	struct ib_device *dev;
	struct ib_pd *pd;
	struct ib_cq *cq;
	struct ib_mr *mr;
	struct page *pages[FRMR_PAGES];
	struct scatterlist sg[FRMR_PAGES];
	bool sg_mapped;
	void *area;
	u64 area_dma;
	int round;
};

static struct task_struct *runner;

/* Appends one line to the result parameter and to dmesg. */
static __printf(1, 2) void note(const char *fmt, ...)
{
	char line[192];
	va_list ap;
	size_t used;

	va_start(ap, fmt);
	vscnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	pr_info("kfrmr: %s\n", line);
	kernel_param_lock(THIS_MODULE);
	used = strnlen(result, sizeof(result));
	scnprintf(result + used, sizeof(result) - used, "%s\n", line);
	kernel_param_unlock(THIS_MODULE);
}

static u8 pat(unsigned int seed, size_t i)
{
	return (u8)(i * 7 + seed * 31 + 1);
}

/* The MR's byte i is in this page: the page list is [second, first]. */
static u8 *frmr_byte(struct kfrmr *k, size_t i)
{
	struct page *p = k->pages[FRMR_PAGES - 1 - i / PAGE_SIZE];

	return (u8 *)page_address(p) + i % PAGE_SIZE;
}

static void fill(struct kfrmr *k, unsigned int seed)
{
	size_t i;

	for (i = 0; i < FRMR_LEN; i++)
		*frmr_byte(k, i) = pat(seed, i);
}

static bool holds(struct kfrmr *k, unsigned int seed)
{
	size_t i;

	for (i = 0; i < FRMR_LEN; i++)
		if (*frmr_byte(k, i) != pat(seed, i))
			return false;
	return true;
}

static int on_cm_event(struct rdma_cm_id *id, struct rdma_cm_event *ev)
{
	struct kfrmr *k = id->context;

	/* Only a connection's id reaches here (no listener): record, wake. */
	k->status = ev->status;
	set_bit(ev->event, &k->events);
	wake_up(&k->wq);
	return 0;
}

static const unsigned long CM_FAILED = BIT(RDMA_CM_EVENT_ADDR_ERROR) | BIT(RDMA_CM_EVENT_ROUTE_ERROR) |
				       BIT(RDMA_CM_EVENT_CONNECT_ERROR) | BIT(RDMA_CM_EVENT_UNREACHABLE) |
				       BIT(RDMA_CM_EVENT_REJECTED) | BIT(RDMA_CM_EVENT_DEVICE_REMOVAL);

/* Waits for rdma_cm event `want` on the current connection. */
static int wait_cm(struct kfrmr *k, enum rdma_cm_event_type want, const char **why)
{
	long left = wait_event_timeout(k->wq,
				       test_bit(want, &k->events) || (READ_ONCE(k->events) & CM_FAILED) ||
					       kthread_should_stop(),
				       STEP_TIMEOUT);

	if (test_bit(want, &k->events))
		return 0;
	if (kthread_should_stop())
		*why = "unloaded";
	else if (!left)
		*why = "no rdma_cm event in time";
	else
		*why = "rdma_cm reported an error (address, route, connect, unreachable, rejected or device removal)";
	return -EIO;
}

/* Waits for the next completion (a polled CQ). */
static int wait_wc(struct kfrmr *k, struct ib_wc *wc, const char **why)
{
	unsigned long end = jiffies + STEP_TIMEOUT;

	for (;;) {
		int n = ib_poll_cq(k->cq, 1, wc);

		if (n > 0)
			return 0;
		if (n < 0) {
			*why = "ib_poll_cq failed";
			return n;
		}
		if (kthread_should_stop()) {
			*why = "unloaded";
			return -EINTR;
		}
		if (time_after(jiffies, end)) {
			*why = "no completion in time";
			return -ETIMEDOUT;
		}
		usleep_range(200, 1000);
	}
}

/* The PD, the MR over its two pages and the message area: once, on the
 * device the first connection's route resolved to. */
static int setup_memory(struct kfrmr *k, const char **why)
{
	int i, n;

	k->dev = k->id->device;
	k->pd = ib_alloc_pd(k->dev, 0);
	if (IS_ERR(k->pd)) {
		k->pd = NULL;
		*why = "ib_alloc_pd failed";
		return -ENOMEM;
	}
	k->mr = ib_alloc_mr(k->pd, IB_MR_TYPE_MEM_REG, FRMR_PAGES);
	if (IS_ERR(k->mr)) {
		k->mr = NULL;
		*why = "ib_alloc_mr(IB_MR_TYPE_MEM_REG) failed";
		return -ENOMEM;
	}
	sg_init_table(k->sg, FRMR_PAGES);
	for (i = 0; i < FRMR_PAGES; i++) {
		k->pages[i] = alloc_page(GFP_KERNEL | __GFP_ZERO);
		if (!k->pages[i]) {
			*why = "no page";
			return -ENOMEM;
		}
	}
	for (i = 0; i < FRMR_PAGES; i++)
		sg_set_page(&k->sg[i], k->pages[FRMR_PAGES - 1 - i], PAGE_SIZE, 0);
	n = ib_dma_map_sg(k->dev, k->sg, FRMR_PAGES, DMA_BIDIRECTIONAL);
	if (n != FRMR_PAGES) {
		*why = "ib_dma_map_sg failed";
		return -EIO;
	}
	k->sg_mapped = true;
	n = ib_map_mr_sg(k->mr, k->sg, FRMR_PAGES, NULL, PAGE_SIZE);
	if (n != FRMR_PAGES) {
		*why = "ib_map_mr_sg did not map both pages";
		return -EIO;
	}
	k->area = kzalloc(AREA_LEN, GFP_KERNEL);
	if (!k->area) {
		*why = "no message area";
		return -ENOMEM;
	}
	k->area_dma = ib_dma_map_single(k->dev, k->area, AREA_LEN, DMA_BIDIRECTIONAL);
	if (ib_dma_mapping_error(k->dev, k->area_dma)) {
		k->area_dma = 0;
		*why = "ib_dma_map_single failed";
		return -EIO;
	}
	return 0;
}

static void free_memory(struct kfrmr *k)
{
	int i;

	/* The MR first: it names the pages. */
	if (k->mr)
		ib_dereg_mr(k->mr);
	if (k->sg_mapped)
		ib_dma_unmap_sg(k->dev, k->sg, FRMR_PAGES, DMA_BIDIRECTIONAL);
	for (i = 0; i < FRMR_PAGES; i++)
		if (k->pages[i])
			__free_page(k->pages[i]);
	if (k->area_dma)
		ib_dma_unmap_single(k->dev, k->area_dma, AREA_LEN, DMA_BIDIRECTIONAL);
	kfree(k->area);
	if (k->pd)
		ib_dealloc_pd(k->pd);
}

/* One connection to the tool: id, route, the memory (first round), a CQ
 * and an RC QP, a receive posted, connected. */
static int connect_round(struct kfrmr *k, const char **why)
{
	struct sockaddr_in dst = { .sin_family = AF_INET, .sin_port = htons(port) };
	struct ib_qp_init_attr qp_attr = {
		.cap = { .max_send_wr = 8, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1 },
		.sq_sig_type = IB_SIGNAL_ALL_WR,
		.qp_type = IB_QPT_RC,
	};
	/* Responder resources let the tool READ (rdma_cm then grants REMOTE_READ). */
	struct rdma_conn_param param = {
		.responder_resources = 1,
		.initiator_depth = 1,
		.retry_count = 7,
		.rnr_retry_count = 7,
	};
	struct ib_sge sge;
	struct ib_recv_wr rwr = { .wr_id = WR_RECV, .sg_list = &sge, .num_sge = 1 };
	const struct ib_recv_wr *bad;
	int ret;

	if (!in4_pton(server, -1, (u8 *)&dst.sin_addr.s_addr, -1, NULL)) {
		*why = "server is not an IPv4 address";
		return -EINVAL;
	}
	k->events = 0;
	k->id = rdma_create_id(&init_net, on_cm_event, k, RDMA_PS_TCP, IB_QPT_RC);
	if (IS_ERR(k->id)) {
		k->id = NULL;
		*why = "rdma_create_id failed";
		return -ENOMEM;
	}
	ret = rdma_resolve_addr(k->id, NULL, (struct sockaddr *)&dst, 2000);
	if (ret) {
		*why = "rdma_resolve_addr failed";
		return ret;
	}
	ret = wait_cm(k, RDMA_CM_EVENT_ADDR_RESOLVED, why);
	if (ret)
		return ret;
	ret = rdma_resolve_route(k->id, 2000);
	if (ret) {
		*why = "rdma_resolve_route failed";
		return ret;
	}
	ret = wait_cm(k, RDMA_CM_EVENT_ROUTE_RESOLVED, why);
	if (ret)
		return ret;
	if (!k->pd) {
		ret = setup_memory(k, why);
		if (ret)
			return ret;
	} else if (k->id->device != k->dev) {
		*why = "the route moved to another device";
		return -EIO;
	}
	k->cq = ib_alloc_cq(k->dev, k, 16, 0, IB_POLL_DIRECT);
	if (IS_ERR(k->cq)) {
		k->cq = NULL;
		*why = "ib_alloc_cq failed";
		return -ENOMEM;
	}
	qp_attr.send_cq = k->cq;
	qp_attr.recv_cq = k->cq;
	ret = rdma_create_qp(k->id, k->pd, &qp_attr);
	if (ret) {
		*why = "rdma_create_qp failed";
		return ret;
	}
	sge.addr = k->area_dma + RECV_OFF;
	sge.length = INV_SEND_LEN;
	sge.lkey = k->pd->local_dma_lkey;
	ret = ib_post_recv(k->id->qp, &rwr, &bad);
	if (ret) {
		*why = "ib_post_recv failed";
		return ret;
	}
	ret = rdma_connect(k->id, &param);
	if (ret) {
		*why = "rdma_connect failed";
		return ret;
	}
	ret = wait_cm(k, RDMA_CM_EVENT_ESTABLISHED, why);
	if (ret)
		return ret;
	note("round %d: connected to %pI4:%u", k->round, &dst.sin_addr.s_addr, port);
	return 0;
}

static void end_round(struct kfrmr *k)
{
	struct ib_wc wc;

	if (k->id && k->id->qp) {
		rdma_disconnect(k->id);
		rdma_destroy_qp(k->id);
	}
	if (k->cq) {
		/* Flushed work requests: nothing to check. */
		while (ib_poll_cq(k->cq, 1, &wc) > 0)
			;
		ib_free_cq(k->cq);
		k->cq = NULL;
	}
	if (k->id) {
		rdma_destroy_id(k->id);
		k->id = NULL;
	}
}

/* A REG_MR work request with `key` (read and write from the peer). */
static int register_mr(struct kfrmr *k, u32 key, const char **why)
{
	struct ib_reg_wr reg = {
		.wr = { .wr_id = WR_REG, .opcode = IB_WR_REG_MR, .send_flags = IB_SEND_SIGNALED },
		.mr = k->mr,
		.key = key,
		.access = IB_ACCESS_LOCAL_WRITE | IB_ACCESS_REMOTE_READ | IB_ACCESS_REMOTE_WRITE,
	};
	const struct ib_send_wr *bad;
	struct ib_wc wc;
	int ret = ib_post_send(k->id->qp, &reg.wr, &bad);

	if (ret) {
		*why = "ib_post_send (REG_MR) failed";
		return ret;
	}
	ret = wait_wc(k, &wc, why);
	if (ret)
		return ret;
	if (wc.status != IB_WC_SUCCESS || wc.opcode != IB_WC_REG_MR || wc.wr_id != WR_REG) {
		*why = "REG_MR did not complete successfully";
		return -EIO;
	}
	return 0;
}

/* SENDs the keys message: "FRMR <iova> <rkey> <length> <old rkey>". */
static int send_keys(struct kfrmr *k, u32 rkey, u32 old, const char **why)
{
	char *msg = (char *)k->area + SEND_OFF;
	struct ib_sge sge;
	struct ib_send_wr wr = {
		.wr_id = WR_SEND,
		.sg_list = &sge,
		.num_sge = 1,
		.opcode = IB_WR_SEND,
		.send_flags = IB_SEND_SIGNALED,
	};
	const struct ib_send_wr *bad;
	struct ib_wc wc;
	int ret;

	memset(msg, 0, MSG_LEN);
	scnprintf(msg, MSG_LEN, "FRMR %llx %x %lx %x", k->mr->iova, rkey, (unsigned long)FRMR_LEN, old);
	ib_dma_sync_single_for_device(k->dev, k->area_dma + SEND_OFF, MSG_LEN, DMA_BIDIRECTIONAL);
	sge.addr = k->area_dma + SEND_OFF;
	sge.length = MSG_LEN;
	sge.lkey = k->pd->local_dma_lkey;
	ret = ib_post_send(k->id->qp, &wr, &bad);
	if (ret) {
		*why = "ib_post_send (SEND) failed";
		return ret;
	}
	ret = wait_wc(k, &wc, why);
	if (ret)
		return ret;
	if (wc.status != IB_WC_SUCCESS || wc.opcode != IB_WC_SEND) {
		*why = "the keys SEND did not complete successfully";
		return -EIO;
	}
	return 0;
}

/* The SEND WITH INVALIDATE's receive: the flag, the key, the data. */
static int recv_invalidation(struct kfrmr *k, u32 rkey, const char **why)
{
	const u8 *data = (const u8 *)k->area + RECV_OFF;
	struct ib_wc wc;
	size_t i;
	int ret = wait_wc(k, &wc, why);

	if (ret)
		return ret;
	if (wc.status != IB_WC_SUCCESS || wc.opcode != IB_WC_RECV) {
		*why = "the receive did not complete successfully";
		return -EIO;
	}
	if (!(wc.wc_flags & IB_WC_WITH_INVALIDATE) || wc.ex.invalidate_rkey != rkey) {
		pr_info("kfrmr: wc_flags %#x, invalidated rkey %#x, want %#x\n", wc.wc_flags, wc.ex.invalidate_rkey,
			rkey);
		*why = "the receive does not name the invalidated rkey (IB_WC_WITH_INVALIDATE)";
		return -EIO;
	}
	ib_dma_sync_single_for_cpu(k->dev, k->area_dma + RECV_OFF, INV_SEND_LEN, DMA_BIDIRECTIONAL);
	if (wc.byte_len != INV_SEND_LEN) {
		*why = "the receive is not the 4096 bytes sent";
		return -EIO;
	}
	for (i = 0; i < INV_SEND_LEN; i++) {
		if (data[i] != pat(3, i)) {
			*why = "the receive does not hold what was sent";
			return -EIO;
		}
	}
	note("round %d: receive with IB_WC_WITH_INVALIDATE, invalidated rkey %#x, %u B checked: ok", k->round, rkey,
	     INV_SEND_LEN);
	return 0;
}

static int check_pages(struct kfrmr *k, unsigned int seed, const char *what, const char **why)
{
	if (!holds(k, seed)) {
		*why = what;
		return -EIO;
	}
	return 0;
}

static int round_one(struct kfrmr *k, u32 *key, const char **why)
{
	u32 born = k->mr->rkey;
	int ret;

	fill(k, 1);
	/* A key byte other than the one the MR was born with. */
	ib_update_fast_reg_key(k->mr, (u8)(born & 0xff) + 0x11);
	*key = k->mr->rkey;
	ret = register_mr(k, *key, why);
	if (ret)
		return ret;
	note("round 1: fast-registered %lu B (two pages, the second first) at iova %#llx, rkey %#x: ok",
	     (unsigned long)FRMR_LEN, k->mr->iova, *key);
	ret = send_keys(k, *key, 0, why);
	if (ret)
		return ret;
	ret = recv_invalidation(k, *key, why);
	if (ret)
		return ret;
	ret = check_pages(k, 2, "the pages do not hold what the WRITE carried, in the MR's page order", why);
	if (ret)
		return ret;
	note("round 1: both pages hold what was written, in the MR's page order: ok");
	ret = wait_cm(k, RDMA_CM_EVENT_DISCONNECTED, why);
	if (ret)
		return ret;
	ret = check_pages(k, 2, "the WRITE through the invalidated rkey changed the pages", why);
	if (ret)
		return ret;
	note("round 1: disconnected; the pages still hold it (the WRITE through the invalidated rkey did not land): ok");
	return 0;
}

static int round_two(struct kfrmr *k, u32 old, const char **why)
{
	u32 key;
	int ret;

	fill(k, 4);
	ib_update_fast_reg_key(k->mr, (u8)(old & 0xff) + 1);
	key = k->mr->rkey;
	ret = register_mr(k, key, why);
	if (ret)
		return ret;
	note("round 2: key byte moved on (ib_update_fast_reg_key), rkey %#x -> %#x, re-registered: ok", old, key);
	ret = send_keys(k, key, old, why);
	if (ret)
		return ret;
	ret = wait_cm(k, RDMA_CM_EVENT_DISCONNECTED, why);
	if (ret)
		return ret;
	ret = check_pages(k, 5, "the pages do not hold what the WRITE through the new rkey carried", why);
	if (ret)
		return ret;
	note("round 2: disconnected; the pages hold what was written through the new rkey, not the old one's: ok");
	return 0;
}

static int run(void *unused)
{
	struct kfrmr *k = kzalloc(sizeof(*k), GFP_KERNEL);
	const char *why = "out of memory";
	u32 key = 0;
	int ret = -ENOMEM;

	if (!k)
		goto out;
	init_waitqueue_head(&k->wq);
	for (k->round = 1; k->round <= 2; k->round++) {
		ret = connect_round(k, &why);
		if (!ret)
			ret = k->round == 1 ? round_one(k, &key, &why) : round_two(k, key, &why);
		end_round(k);
		if (ret)
			break;
	}
	free_memory(k);
out:
	if (ret)
		note("FAIL frmr as target: round %d: %s (%d)", k ? k->round : 0, why, ret);
	else
		note("PASS frmr as target");
	kfree(k);
	/* Stay until unloaded: kthread_stop() collects the thread. */
	while (!kthread_should_stop())
		msleep_interruptible(100);
	return ret;
}

static int __init kfrmr_init(void)
{
	result[0] = '\0';
	runner = kthread_run(run, NULL, "kfrmr");
	if (IS_ERR(runner))
		return PTR_ERR(runner);
	return 0;
}

static void __exit kfrmr_exit(void)
{
	kthread_stop(runner);
}

module_init(kfrmr_init);
module_exit(kfrmr_exit);
MODULE_DESCRIPTION("Fast-register MR target for the RoCE appliance's interop tests");
MODULE_LICENSE("GPL");
