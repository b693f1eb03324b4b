/*
 * ext_verbs: the Linux side of the extended-verbs interop (issue 19), run in
 * the rdma_rxe peer guest against the appliance's `ext_verbs` host tool
 * (rdma/host/verbs/src/bin/ext_verbs.rs), which speaks the same exchange.
 *
 * One side is the target (it owns the memory: an MR, memory windows bound
 * over it), the other the initiator (it WRITEs, READs and SENDs WITH
 * INVALIDATE through the target's keys). Each phase connects a fresh RC QP
 * pair, because a phase ends with a remote access error that moves the QPs
 * to the error state (IBA 9.9.3, class C errors):
 *
 *   mw      type 1 (ibv_bind_mw) and type 2 (IBV_WR_BIND_MW) windows, data
 *           written and read through both, a read-only type 1 window read;
 *           SEND WITH INVALIDATE of the type 2 window (the target's receive
 *           completes with IBV_WC_WITH_INV and that rkey), then a WRITE to it
 *           must fail with IBV_WC_REM_ACCESS_ERR and leave the memory as it was
 *   rights1 a read-only type 1 window: READ works, WRITE fails the same way
 *   rights2 the same with a type 2 window
 *   atomic_write  (IBA 1.5) the initiator ATOMIC WRITEs 8 bytes into the
 *           target's MR and READs them back (Linux initiates with
 *           ibv_wr_atomic_write; its rxe responds from kernel 6.2 on)
 *   flush   (IBA 1.5) the initiator WRITEs a page into an MR of the target's
 *           registered with FLUSH_GLOBAL access, FLUSHes it (global
 *           visibility) and READs it back; this program can be the target only
 *           (rdma-core 44 has no ibv_wr_flush), on a kernel of 6.2 or later
 *   frmr    the target fast-registers two pages (the appliance: Linux
 *           userspace has no fast-register verb, so this program can only be
 *           the initiator here), the initiator WRITEs and READs them, sends a
 *           4096-byte SEND WITH INVALIDATE of the rkey (SEND FIRST..LAST WITH
 *           INVALIDATE at MTU 1024), and a WRITE afterwards must fail
 *
 * The exchange is TCP, one text line each way per step, both sides writing
 * before reading (so neither waits for the other to speak first):
 *   "QP <qpn> <psn> <gid as 32 hex digits>"   per phase, both sides
 *   "MW <addr> <rkey> <addr> <rkey> <addr> <rkey>" / "RIGHTS <addr> <rkey>" /
 *   "FRMR <addr> <rkey> <len>" / "ATOMIC <addr> <rkey>" /
 *   "FLUSH <addr> <rkey>"                     the target's keys; "READY" back
 *   "DONE <phase>"                            both, once the initiator's last
 *                                             operation completed
 * Addresses and keys in hex. Without a server name this side listens.
 * Output: rdma-core-style address lines, one line per checked step, and
 * "PASS <phase> as <role>" per phase; the first failed check prints
 * "FAIL <phase> as <role>: <why>" and exits 1.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <infiniband/verbs.h>
#include <netdb.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define PAGE 4096u
#define BUF_SIZE (64u * 1024)
/* The target's buffer layout (the appliance's tool uses the same offsets). */
#define OFF_MW1 0u         /* mw: type 1 window, read-write */
#define OFF_MW2 (1 * PAGE) /* mw: type 2 window, read-write, then invalidated */
#define OFF_RO1 (2 * PAGE) /* mw and rights1: read-only type 1 window */
#define OFF_RO2 (3 * PAGE) /* rights2: read-only type 2 window */
#define OFF_RECV (8 * PAGE) /* the receive of each SEND WITH INVALIDATE */
#define OFF_ATOMIC (10 * PAGE) /* atomic_write: the 8 bytes */
/* The initiator's: what it sends from and reads into. */
#define OFF_SRC 0u
#define OFF_DST (4 * PAGE)
#define INV_SEND_MW 64u      /* one packet: SEND ONLY WITH INVALIDATE */
#define INV_SEND_FRMR 4096u  /* four at MTU 1024: SEND FIRST .. LAST WITH INVALIDATE */
#define COMPLETION_SECS 30
/* The kernel's IB_UVERBS_ACCESS_FLUSH_GLOBAL: rdma-core 44's headers predate
 * the name (IBV_ACCESS_FLUSH_GLOBAL, rdma-core 45), the kernel takes the bit. */
#define ACCESS_FLUSH_GLOBAL (1 << 8)
/* What ATOMIC WRITE puts there. */
static const uint8_t ATOMIC_DATA[8] = { 'a', 't', 'o', 'm', 'i', 'c', '!', '!' };

static const char *prog = "ext_verbs";
static const char *phase_name = "setup";
static const char *role_name = "?";

static void fail(const char *fmt, ...)
{
	va_list ap;

	printf("FAIL %s as %s: ", phase_name, role_name);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	fflush(stdout);
	exit(1);
}

static void step(const char *fmt, ...)
{
	va_list ap;

	printf("%s: ", phase_name);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf(": ok\n");
	fflush(stdout);
}

/* The byte at offset i of pattern `seed`: each step writes its own. */
static uint8_t pat(unsigned seed, size_t i)
{
	return (uint8_t)(i * 7 + seed * 31 + 1);
}

static void fill(uint8_t *p, size_t len, unsigned seed)
{
	for (size_t i = 0; i < len; i++)
		p[i] = pat(seed, i);
}

static int holds(const uint8_t *p, size_t len, unsigned seed)
{
	for (size_t i = 0; i < len; i++)
		if (p[i] != pat(seed, i))
			return 0;
	return 1;
}

/* --- the TCP exchange --------------------------------------------------- */

static void send_line(int fd, const char *line)
{
	size_t len = strlen(line), done = 0;

	while (done < len) {
		ssize_t n = write(fd, line + done, len - done);
		if (n <= 0)
			fail("cannot send to the peer: %s", strerror(errno));
		done += (size_t)n;
	}
	if (write(fd, "\n", 1) != 1)
		fail("cannot send to the peer: %s", strerror(errno));
}

static void recv_line(int fd, char *out, size_t cap)
{
	size_t len = 0;

	for (;;) {
		char c;
		ssize_t n = read(fd, &c, 1);
		if (n <= 0)
			fail("the peer closed the exchange");
		if (c == '\n')
			break;
		if (len + 1 >= cap)
			fail("an exchange line longer than %zu bytes", cap);
		out[len++] = c;
	}
	out[len] = '\0';
}

/* Both sides write their line first, then read the other's. */
static void xchg(int fd, const char *mine, char *theirs, size_t cap)
{
	send_line(fd, mine);
	recv_line(fd, theirs, cap);
}

static int tcp_connect(const char *host, int port)
{
	struct addrinfo hints = { .ai_family = AF_INET, .ai_socktype = SOCK_STREAM }, *res;
	char service[8];
	time_t deadline = time(NULL) + 10;

	snprintf(service, sizeof service, "%d", port);
	if (getaddrinfo(host, service, &hints, &res))
		fail("cannot resolve %s", host);
	for (;;) {
		int fd = socket(res->ai_family, res->ai_socktype, 0);
		if (fd >= 0 && connect(fd, res->ai_addr, res->ai_addrlen) == 0) {
			freeaddrinfo(res);
			return fd;
		}
		if (fd >= 0)
			close(fd);
		if (time(NULL) > deadline)
			fail("cannot connect to %s:%d: %s", host, port, strerror(errno));
		usleep(100 * 1000);
	}
}

static int tcp_accept(int port)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(port), .sin_addr.s_addr = INADDR_ANY };
	int one = 1, fd = socket(AF_INET, SOCK_STREAM, 0), c;

	if (fd < 0)
		fail("socket: %s", strerror(errno));
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	if (bind(fd, (struct sockaddr *)&a, sizeof a) || listen(fd, 1))
		fail("cannot listen on port %d: %s", port, strerror(errno));
	c = accept(fd, NULL, NULL);
	if (c < 0)
		fail("accept: %s", strerror(errno));
	close(fd);
	return c;
}

/* --- verbs --------------------------------------------------------------- */

struct ctx {
	struct ibv_context *dev;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_mr *mr;
	uint8_t *buf;
	int ib_port, gid_idx;
	enum ibv_mtu mtu;
	int fd;
};

static struct ibv_wc wait_wc(struct ctx *c, const char *what)
{
	struct ibv_wc wc;
	time_t deadline = time(NULL) + COMPLETION_SECS;

	for (;;) {
		int n = ibv_poll_cq(c->cq, 1, &wc);
		if (n < 0)
			fail("ibv_poll_cq failed waiting for %s", what);
		if (n == 1)
			return wc;
		if (time(NULL) > deadline)
			fail("no completion for %s in %d s", what, COMPLETION_SECS);
	}
}

static void expect_ok(struct ctx *c, const char *what)
{
	struct ibv_wc wc = wait_wc(c, what);

	if (wc.status != IBV_WC_SUCCESS)
		fail("%s completed with %s (%d)", what, ibv_wc_status_str(wc.status), wc.status);
}

/* `extra_access`: more QP access rights (Linux's responder also wants a
 * FLUSH's placement type among the QP's rights, not only the MR's). */
static struct ibv_qp *make_qp(struct ctx *c, int atomic_write, int extra_access)
{
	struct ibv_qp_init_attr init = {
		.send_cq = c->cq,
		.recv_cq = c->cq,
		.cap = { .max_send_wr = 16, .max_recv_wr = 16, .max_send_sge = 1, .max_recv_sge = 1 },
		.qp_type = IBV_QPT_RC,
	};
	struct ibv_qp_attr attr = {
		.qp_state = IBV_QPS_INIT,
		.pkey_index = 0,
		.port_num = c->ib_port,
		.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC | extra_access,
	};
	struct ibv_qp *qp;

	if (atomic_write) {
		/* ATOMIC WRITE exists only in the extended send API. */
		struct ibv_qp_init_attr_ex ex = {
			.send_cq = c->cq,
			.recv_cq = c->cq,
			.cap = init.cap,
			.qp_type = IBV_QPT_RC,
			.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
			.pd = c->pd,
			.send_ops_flags = IBV_QP_EX_WITH_ATOMIC_WRITE | IBV_QP_EX_WITH_RDMA_READ |
					  IBV_QP_EX_WITH_RDMA_WRITE,
		};
		qp = ibv_create_qp_ex(c->dev, &ex);
	} else {
		qp = ibv_create_qp(c->pd, &init);
	}
	if (!qp)
		fail("ibv_create_qp%s: %s", atomic_write ? "_ex (ATOMIC WRITE)" : "", strerror(errno));
	if (ibv_modify_qp(qp, &attr, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
		fail("modify QP to INIT: %s", strerror(errno));
	return qp;
}

static void print_gid(const char *what, uint32_t qpn, uint32_t psn, const union ibv_gid *gid)
{
	char text[INET6_ADDRSTRLEN];

	inet_ntop(AF_INET6, gid->raw, text, sizeof text);
	printf("  %s address:  LID 0x0000, QPN 0x%06x, PSN 0x%06x, GID %s\n", what, qpn, psn, text);
}

/* Exchanges QP addresses with the peer and moves `qp` to RTS. */
static void connect_qp(struct ctx *c, struct ibv_qp *qp)
{
	union ibv_gid gid, rgid;
	uint32_t psn = (uint32_t)lrand48() & 0xffffff, rqpn, rpsn;
	char mine[128], theirs[128], hex[33];
	int n = 0;

	if (ibv_query_gid(c->dev, c->ib_port, c->gid_idx, &gid))
		fail("ibv_query_gid %d: %s", c->gid_idx, strerror(errno));
	n = snprintf(mine, sizeof mine, "QP %x %x ", qp->qp_num, psn);
	for (int i = 0; i < 16; i++)
		n += snprintf(mine + n, sizeof mine - n, "%02x", gid.raw[i]);
	xchg(c->fd, mine, theirs, sizeof theirs);
	if (sscanf(theirs, "QP %x %x %32s", &rqpn, &rpsn, hex) != 3 || strlen(hex) != 32)
		fail("not a QP line: %s", theirs);
	for (int i = 0; i < 16; i++) {
		unsigned b;
		if (sscanf(hex + 2 * i, "%2x", &b) != 1)
			fail("bad GID in %s", theirs);
		rgid.raw[i] = (uint8_t)b;
	}
	print_gid("local", qp->qp_num, psn, &gid);
	print_gid("remote", rqpn, rpsn, &rgid);

	struct ibv_qp_attr attr = {
		.qp_state = IBV_QPS_RTR,
		.path_mtu = c->mtu,
		.dest_qp_num = rqpn,
		.rq_psn = rpsn,
		.max_dest_rd_atomic = 1,
		.min_rnr_timer = 12,
		.ah_attr = {
			.is_global = 1,
			.grh = { .dgid = rgid, .sgid_index = (uint8_t)c->gid_idx, .hop_limit = 1 },
			.port_num = (uint8_t)c->ib_port,
		},
	};
	if (ibv_modify_qp(qp, &attr,
			  IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
				  IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
		fail("modify QP to RTR: %s", strerror(errno));
	attr.qp_state = IBV_QPS_RTS;
	attr.timeout = 14;
	attr.retry_cnt = 7;
	attr.rnr_retry = 7;
	attr.sq_psn = psn;
	attr.max_rd_atomic = 1;
	if (ibv_modify_qp(qp, &attr,
			  IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
				  IBV_QP_MAX_QP_RD_ATOMIC))
		fail("modify QP to RTS: %s", strerror(errno));
}

static void post(struct ibv_qp *qp, struct ibv_send_wr *wr)
{
	struct ibv_send_wr *bad;
	int err;

	wr->send_flags |= IBV_SEND_SIGNALED;
	err = ibv_post_send(qp, wr, &bad);
	if (err)
		fail("ibv_post_send (opcode %d): %s", wr->opcode, strerror(err));
}

/* One RDMA WRITE or READ of `len` bytes at `off` of our buffer. */
static void rdma(struct ctx *c, struct ibv_qp *qp, enum ibv_wr_opcode op, size_t off, uint32_t len,
		 uint64_t raddr, uint32_t rkey)
{
	struct ibv_sge sge = { .addr = (uintptr_t)(c->buf + off), .length = len, .lkey = c->mr->lkey };
	struct ibv_send_wr wr = { .wr_id = 1, .sg_list = &sge, .num_sge = 1, .opcode = op };

	wr.wr.rdma.remote_addr = raddr;
	wr.wr.rdma.rkey = rkey;
	post(qp, &wr);
}

static void write_ok(struct ctx *c, struct ibv_qp *qp, unsigned seed, uint32_t len, uint64_t raddr, uint32_t rkey,
		     const char *what)
{
	fill(c->buf + OFF_SRC, len, seed);
	rdma(c, qp, IBV_WR_RDMA_WRITE, OFF_SRC, len, raddr, rkey);
	expect_ok(c, what);
	step("WRITE %u B %s rkey 0x%x", len, what, rkey);
}

static void read_ok(struct ctx *c, struct ibv_qp *qp, unsigned seed, uint32_t len, uint64_t raddr, uint32_t rkey,
		    const char *what)
{
	memset(c->buf + OFF_DST, 0, len);
	rdma(c, qp, IBV_WR_RDMA_READ, OFF_DST, len, raddr, rkey);
	expect_ok(c, what);
	if (!holds(c->buf + OFF_DST, len, seed))
		fail("READ %s rkey 0x%x returned other data", what, rkey);
	step("READ %u B %s rkey 0x%x, data checked", len, what, rkey);
}

/* A WRITE the target must refuse: a NAK (remote access error) comes back. */
static void write_refused(struct ctx *c, struct ibv_qp *qp, unsigned seed, uint64_t raddr, uint32_t rkey,
			  const char *what)
{
	struct ibv_wc wc;

	fill(c->buf + OFF_SRC, 64, seed);
	rdma(c, qp, IBV_WR_RDMA_WRITE, OFF_SRC, 64, raddr, rkey);
	wc = wait_wc(c, what);
	if (wc.status != IBV_WC_REM_ACCESS_ERR)
		fail("WRITE %s rkey 0x%x completed with %s (%d), not remote access error", what, rkey,
		     ibv_wc_status_str(wc.status), wc.status);
	step("WRITE %s rkey 0x%x refused: %s", what, rkey, ibv_wc_status_str(wc.status));
}

static void send_inv(struct ctx *c, struct ibv_qp *qp, uint32_t len, uint32_t rkey)
{
	struct ibv_sge sge = { .addr = (uintptr_t)(c->buf + OFF_SRC), .length = len, .lkey = c->mr->lkey };
	struct ibv_send_wr wr = { .wr_id = 2, .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_SEND_WITH_INV };

	fill(c->buf + OFF_SRC, len, 9);
	wr.invalidate_rkey = rkey;
	post(qp, &wr);
	expect_ok(c, "SEND WITH INVALIDATE");
	step("SEND WITH INVALIDATE %u B of rkey 0x%x", len, rkey);
}

static void post_recv(struct ctx *c, struct ibv_qp *qp)
{
	struct ibv_sge sge = { .addr = (uintptr_t)(c->buf + OFF_RECV), .length = PAGE, .lkey = c->mr->lkey };
	struct ibv_recv_wr wr = { .wr_id = 3, .sg_list = &sge, .num_sge = 1 }, *bad;

	if (ibv_post_recv(qp, &wr, &bad))
		fail("ibv_post_recv: %s", strerror(errno));
}

/*
 * Linux rxe writes the kernel's completion flags into the CQ it shares with
 * userspace, and the kernel's IB_WC_WITH_INVALIDATE (1 << 2) is not
 * libibverbs' IBV_WC_WITH_INV (1 << 3): userspace sees IBV_WC_IP_CSUM_OK's
 * bit. Either bit is taken as "invalidated"; the output says which came.
 */
#define RXE_KERNEL_WC_WITH_INVALIDATE (1u << 2)

/* The target's side of a SEND WITH INVALIDATE: the receive names the key. */
static void recv_inv(struct ctx *c, uint32_t len, uint32_t rkey)
{
	struct ibv_wc wc = wait_wc(c, "the SEND WITH INVALIDATE's receive");
	const char *flag = (wc.wc_flags & IBV_WC_WITH_INV) ? "IBV_WC_WITH_INV"
			   : (wc.wc_flags & RXE_KERNEL_WC_WITH_INVALIDATE) ? "IBV_WC_WITH_INV (as the kernel's bit 2)"
									  : NULL;

	if (wc.status != IBV_WC_SUCCESS)
		fail("the receive completed with %s (%d)", ibv_wc_status_str(wc.status), wc.status);
	if (!flag || wc.invalidated_rkey != rkey)
		fail("the receive has wc_flags 0x%x, invalidated rkey 0x%x (want IBV_WC_WITH_INV, 0x%x)", wc.wc_flags,
		     wc.invalidated_rkey, rkey);
	if (wc.byte_len != len || !holds(c->buf + OFF_RECV, len, 9))
		fail("the receive holds %u B, not the %u B sent", wc.byte_len, len);
	step("receive with %s, invalidated rkey 0x%x, %u B checked", flag, rkey, len);
}

static struct ibv_mw *bind_window(struct ctx *c, struct ibv_qp *qp, enum ibv_mw_type type, size_t off, int access,
			   uint32_t *rkey)
{
	struct ibv_mw *mw = ibv_alloc_mw(c->pd, type);
	struct ibv_mw_bind_info info = { .mr = c->mr, .addr = (uintptr_t)(c->buf + off), .length = PAGE,
					 .mw_access_flags = access };
	struct ibv_wc wc;

	if (!mw)
		fail("ibv_alloc_mw type %d: %s", type, strerror(errno));
	if (type == IBV_MW_TYPE_1) {
		struct ibv_mw_bind b = { .wr_id = 4, .send_flags = IBV_SEND_SIGNALED, .bind_info = info };
		int err = ibv_bind_mw(qp, mw, &b);
		if (err)
			fail("ibv_bind_mw: %s", strerror(err));
		*rkey = mw->rkey;
	} else {
		struct ibv_send_wr wr = { .wr_id = 4, .opcode = IBV_WR_BIND_MW };
		wr.bind_mw.mw = mw;
		wr.bind_mw.rkey = ibv_inc_rkey(mw->rkey);
		wr.bind_mw.bind_info = info;
		post(qp, &wr);
		*rkey = wr.bind_mw.rkey;
	}
	wc = wait_wc(c, "the bind");
	if (wc.status != IBV_WC_SUCCESS || wc.opcode != IBV_WC_BIND_MW)
		fail("the bind completed with %s (%d), opcode %d", ibv_wc_status_str(wc.status), wc.status,
		     wc.opcode);
	step("type %d window bound over %u B, %s, rkey 0x%x", type, PAGE,
	     (access & IBV_ACCESS_REMOTE_WRITE) ? "read-write" : "read-only", *rkey);
	return mw;
}

static void done(struct ctx *c)
{
	char mine[64], theirs[64];

	snprintf(mine, sizeof mine, "DONE %s", phase_name);
	xchg(c->fd, mine, theirs, sizeof theirs);
	if (strcmp(mine, theirs))
		fail("the peer answered \"%s\" to \"%s\"", theirs, mine);
}

static void check_mem(struct ctx *c, size_t off, unsigned seed, const char *what)
{
	if (!holds(c->buf + off, PAGE, seed))
		fail("%s does not hold what was written", what);
	step("%s holds what was written, not what the refused WRITE carried", what);
}

#define RW (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ)

static void phase_mw(struct ctx *c, struct ibv_qp *qp, int target)
{
	char line[256];
	unsigned long long a[3];
	uint32_t k[3];

	if (target) {
		memset(c->buf, 0, 2 * PAGE);
		fill(c->buf + OFF_RO1, PAGE, 3);
		post_recv(c, qp);
		struct ibv_mw *m1 = bind_window(c, qp, IBV_MW_TYPE_1, OFF_MW1, RW, &k[0]);
		struct ibv_mw *m2 = bind_window(c, qp, IBV_MW_TYPE_2, OFF_MW2, RW, &k[1]);
		struct ibv_mw *m3 = bind_window(c, qp, IBV_MW_TYPE_1, OFF_RO1, IBV_ACCESS_REMOTE_READ, &k[2]);
		snprintf(line, sizeof line, "MW %llx %x %llx %x %llx %x", (unsigned long long)(uintptr_t)(c->buf + OFF_MW1),
			 k[0], (unsigned long long)(uintptr_t)(c->buf + OFF_MW2), k[1],
			 (unsigned long long)(uintptr_t)(c->buf + OFF_RO1), k[2]);
		xchg(c->fd, line, line, sizeof line);
		recv_inv(c, INV_SEND_MW, k[1]);
		done(c);
		check_mem(c, OFF_MW1, 1, "the type 1 window");
		check_mem(c, OFF_MW2, 2, "the invalidated type 2 window");
		ibv_dealloc_mw(m1);
		ibv_dealloc_mw(m2);
		ibv_dealloc_mw(m3);
		return;
	}
	xchg(c->fd, "READY", line, sizeof line);
	if (sscanf(line, "MW %llx %x %llx %x %llx %x", &a[0], &k[0], &a[1], &k[1], &a[2], &k[2]) != 6)
		fail("not an MW line: %s", line);
	write_ok(c, qp, 1, PAGE, a[0], k[0], "through the type 1 window");
	write_ok(c, qp, 2, PAGE, a[1], k[1], "through the type 2 window");
	read_ok(c, qp, 1, PAGE, a[0], k[0], "through the type 1 window");
	read_ok(c, qp, 2, PAGE, a[1], k[1], "through the type 2 window");
	read_ok(c, qp, 3, PAGE, a[2], k[2], "through the read-only type 1 window");
	send_inv(c, qp, INV_SEND_MW, k[1]);
	write_refused(c, qp, 4, a[1], k[1], "through the invalidated type 2 window");
	done(c);
}

static void phase_rights(struct ctx *c, struct ibv_qp *qp, int target, enum ibv_mw_type type)
{
	char line[128];
	unsigned long long a;
	uint32_t k;
	size_t off = type == IBV_MW_TYPE_1 ? OFF_RO1 : OFF_RO2;
	unsigned seed = type == IBV_MW_TYPE_1 ? 3 : 5;

	if (target) {
		fill(c->buf + off, PAGE, seed);
		struct ibv_mw *mw = bind_window(c, qp, type, off, IBV_ACCESS_REMOTE_READ, &k);
		snprintf(line, sizeof line, "RIGHTS %llx %x", (unsigned long long)(uintptr_t)(c->buf + off), k);
		xchg(c->fd, line, line, sizeof line);
		done(c);
		check_mem(c, off, seed, "the read-only window");
		ibv_dealloc_mw(mw);
		return;
	}
	xchg(c->fd, "READY", line, sizeof line);
	if (sscanf(line, "RIGHTS %llx %x", &a, &k) != 2)
		fail("not a RIGHTS line: %s", line);
	read_ok(c, qp, seed, PAGE, a, k, "through the read-only window");
	write_refused(c, qp, 6, a, k, "through the read-only window");
	done(c);
}

static void phase_frmr(struct ctx *c, struct ibv_qp *qp, int target)
{
	char line[128];
	unsigned long long a;
	uint32_t k, len;

	if (target)
		fail("Linux userspace has no fast-register verb (ib_alloc_mr is kernel-only): the appliance is the "
		     "target of this phase");
	xchg(c->fd, "READY", line, sizeof line);
	if (sscanf(line, "FRMR %llx %x %x", &a, &k, &len) != 3 || len > 2 * PAGE || len == 0)
		fail("not an FRMR line: %s", line);
	write_ok(c, qp, 7, len, a, k, "into the fast-registered MR");
	read_ok(c, qp, 7, len, a, k, "from the fast-registered MR");
	send_inv(c, qp, INV_SEND_FRMR, k);
	write_refused(c, qp, 8, a, k, "into the invalidated fast-registered MR");
	done(c);
}

static void phase_atomic_write(struct ctx *c, struct ibv_qp *qp, int target)
{
	char line[128];
	unsigned long long a;
	uint32_t k;

	if (target) {
		memset(c->buf + OFF_ATOMIC, 0, 8);
		snprintf(line, sizeof line, "ATOMIC %llx %x", (unsigned long long)(uintptr_t)(c->buf + OFF_ATOMIC),
			 c->mr->rkey);
		xchg(c->fd, line, line, sizeof line);
		done(c);
		if (memcmp(c->buf + OFF_ATOMIC, ATOMIC_DATA, 8))
			fail("the 8 bytes do not hold what ATOMIC WRITE carried");
		step("the 8 bytes hold what ATOMIC WRITE carried");
		return;
	}
	xchg(c->fd, "READY", line, sizeof line);
	if (sscanf(line, "ATOMIC %llx %x", &a, &k) != 2)
		fail("not an ATOMIC line: %s", line);
	struct ibv_qp_ex *qpx = ibv_qp_to_qp_ex(qp);
	int err;

	if (!qpx)
		fail("no extended QP for ATOMIC WRITE");
	ibv_wr_start(qpx);
	qpx->wr_id = 5;
	qpx->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_atomic_write(qpx, k, a, ATOMIC_DATA);
	err = ibv_wr_complete(qpx);
	if (err)
		fail("ibv_wr_atomic_write: %s", strerror(err));
	struct ibv_wc wc = wait_wc(c, "ATOMIC WRITE");
	if (wc.status != IBV_WC_SUCCESS || wc.opcode != IBV_WC_ATOMIC_WRITE)
		fail("ATOMIC WRITE completed with %s (%d), opcode %d", ibv_wc_status_str(wc.status), wc.status,
		     wc.opcode);
	step("ATOMIC WRITE 8 B rkey 0x%x", k);
	memset(c->buf + OFF_DST, 0, 8);
	rdma(c, qp, IBV_WR_RDMA_READ, OFF_DST, 8, a, k);
	expect_ok(c, "READ of the 8 bytes");
	if (memcmp(c->buf + OFF_DST, ATOMIC_DATA, 8))
		fail("READ after ATOMIC WRITE returned other data");
	step("READ 8 B after it, data checked");
	done(c);
}

static void phase_flush(struct ctx *c, int target)
{
	char line[128];
	uint8_t *mem;
	struct ibv_mr *mr;

	if (!target)
		fail("rdma-core 44 (bookworm) has no ibv_wr_flush: this program can only be the target of FLUSH");
	if (posix_memalign((void **)&mem, PAGE, PAGE))
		fail("no memory");
	memset(mem, 0, PAGE);
	mr = ibv_reg_mr(c->pd, mem, PAGE, IBV_ACCESS_LOCAL_WRITE | RW | ACCESS_FLUSH_GLOBAL);
	if (!mr)
		fail("ibv_reg_mr with FLUSH_GLOBAL access: %s (a kernel before 6.2 has no FLUSH)", strerror(errno));
	step("MR of %u B registered with FLUSH_GLOBAL access, rkey 0x%x", PAGE, mr->rkey);
	snprintf(line, sizeof line, "FLUSH %llx %x", (unsigned long long)(uintptr_t)mem, mr->rkey);
	xchg(c->fd, line, line, sizeof line);
	done(c);
	if (!holds(mem, PAGE, 10))
		fail("the flushed page does not hold what was written");
	step("the flushed page holds what was written");
	ibv_dereg_mr(mr);
	free(mem);
}

static void usage(void)
{
	printf("Usage: %s [options] [servername]\n"
	       "  -p, --port=<port>      listen on/connect to port <port> (default 18515)\n"
	       "  -d, --ib-dev=<dev>     use IB device <dev> (default first device found)\n"
	       "  -i, --ib-port=<port>   use port <port> of IB device (default 1)\n"
	       "  -g, --gid-idx=<idx>    local port gid index (default 1)\n"
	       "  -m, --mtu=<size>       path MTU (default 1024)\n"
	       "  -R, --role=<role>      target (owns the memory) or initiator (default)\n"
	       "  -P, --phases=<list>    comma-separated: mw,rights1,rights2,frmr,atomic_write,flush\n"
	       "                         (default mw,rights1,rights2)\n",
	       prog);
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "port", 1, NULL, 'p' }, { "ib-dev", 1, NULL, 'd' }, { "ib-port", 1, NULL, 'i' },
		{ "gid-idx", 1, NULL, 'g' }, { "mtu", 1, NULL, 'm' }, { "role", 1, NULL, 'R' },
		{ "phases", 1, NULL, 'P' }, { "help", 0, NULL, 'h' }, { 0 }
	};
	struct ctx c = { .ib_port = 1, .gid_idx = 1, .mtu = IBV_MTU_1024 };
	const char *devname = NULL, *server = NULL;
	char phases[128] = "mw,rights1,rights2";
	int port = 18515, target = 0, opt;

	while ((opt = getopt_long(argc, argv, "p:d:i:g:m:R:P:h", opts, NULL)) != -1) {
		switch (opt) {
		case 'p': port = atoi(optarg); break;
		case 'd': devname = optarg; break;
		case 'i': c.ib_port = atoi(optarg); break;
		case 'g': c.gid_idx = atoi(optarg); break;
		case 'm':
			switch (atoi(optarg)) {
			case 256: c.mtu = IBV_MTU_256; break;
			case 512: c.mtu = IBV_MTU_512; break;
			case 1024: c.mtu = IBV_MTU_1024; break;
			case 2048: c.mtu = IBV_MTU_2048; break;
			case 4096: c.mtu = IBV_MTU_4096; break;
			default: usage(); return 1;
			}
			break;
		case 'R':
			if (!strcmp(optarg, "target"))
				target = 1;
			else if (strcmp(optarg, "initiator")) {
				usage();
				return 1;
			}
			break;
		case 'P': snprintf(phases, sizeof phases, "%s", optarg); break;
		default: usage(); return opt == 'h' ? 0 : 1;
		}
	}
	if (optind < argc)
		server = argv[optind];
	if (port <= 0 || port > 65535) {
		usage();
		return 1;
	}
	role_name = target ? "target" : "initiator";
	srand48(getpid() * time(NULL));

	int ndev;
	struct ibv_device **list = ibv_get_device_list(&ndev), *dev = NULL;
	for (int i = 0; list && i < ndev; i++)
		if (!devname || !strcmp(ibv_get_device_name(list[i]), devname)) {
			dev = list[i];
			break;
		}
	if (!dev)
		fail("no IB device %s", devname ? devname : "at all");
	c.dev = ibv_open_device(dev);
	if (!c.dev)
		fail("ibv_open_device: %s", strerror(errno));
	c.pd = ibv_alloc_pd(c.dev);
	c.cq = ibv_create_cq(c.dev, 64, NULL, NULL, 0);
	if (!c.pd || !c.cq)
		fail("PD or CQ: %s", strerror(errno));
	if (posix_memalign((void **)&c.buf, PAGE, BUF_SIZE))
		fail("no memory");
	memset(c.buf, 0, BUF_SIZE);
	c.mr = ibv_reg_mr(c.pd, c.buf, BUF_SIZE, IBV_ACCESS_LOCAL_WRITE | RW | IBV_ACCESS_MW_BIND | IBV_ACCESS_REMOTE_ATOMIC);
	if (!c.mr)
		fail("ibv_reg_mr: %s", strerror(errno));
	c.fd = server ? tcp_connect(server, port) : tcp_accept(port);

	for (char *save = NULL, *p = strtok_r(phases, ",", &save); p; p = strtok_r(NULL, ",", &save)) {
		struct ibv_qp *qp;

		phase_name = p;
		if (strcmp(p, "mw") && strcmp(p, "rights1") && strcmp(p, "rights2") && strcmp(p, "frmr") &&
		    strcmp(p, "atomic_write") && strcmp(p, "flush"))
			fail("unknown phase (mw, rights1, rights2, frmr, atomic_write, flush)");
		qp = make_qp(&c, !strcmp(p, "atomic_write") && !target, !strcmp(p, "flush") ? ACCESS_FLUSH_GLOBAL : 0);
		connect_qp(&c, qp);
		if (!strcmp(p, "mw"))
			phase_mw(&c, qp, target);
		else if (!strcmp(p, "rights1"))
			phase_rights(&c, qp, target, IBV_MW_TYPE_1);
		else if (!strcmp(p, "rights2"))
			phase_rights(&c, qp, target, IBV_MW_TYPE_2);
		else if (!strcmp(p, "atomic_write"))
			phase_atomic_write(&c, qp, target);
		else if (!strcmp(p, "flush"))
			phase_flush(&c, target);
		else
			phase_frmr(&c, qp, target);
		/* Completions the error state flushed (the target's) are not checked. */
		while (ibv_poll_cq(c.cq, 1, &(struct ibv_wc){ 0 }) > 0)
			;
		if (ibv_destroy_qp(qp))
			fail("ibv_destroy_qp: %s", strerror(errno));
		printf("PASS %s as %s\n", p, role_name);
		fflush(stdout);
	}
	close(c.fd);
	ibv_dereg_mr(c.mr);
	ibv_destroy_cq(c.cq);
	ibv_dealloc_pd(c.pd);
	ibv_close_device(c.dev);
	ibv_free_device_list(list);
	return 0;
}
