/* Issue 19's verbs through our libibverbs.so.1, as a C program built
 * against rdma-core 44's verbs.h uses them: memory windows (ibv_alloc_mw,
 * ibv_bind_mw for type 1, IBV_WR_BIND_MW in ibv_post_send for type 2B,
 * ibv_dealloc_mw), IBV_WR_LOCAL_INV, the ibv_qp_ex wr_bind_mw /
 * wr_local_inv / wr_send_inv / wr_atomic_write calls and the send_ops_flags
 * each QP type takes, a receive completed WITH_INV with the invalidated
 * rkey, ibv_attach_mcast / ibv_detach_mcast, and the errors for bad
 * arguments.
 *
 * The peer is tests/mw.rs on the other host-simulated appliance; the two
 * exchange one line at a time on stdin/stdout. Any failed check prints
 * "FAIL <what>" and exits 1. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <infiniband/verbs.h>

#define CHECK(c, what)                                                        \
	do {                                                                  \
		if (!(c)) {                                                   \
			printf("FAIL %s (errno %d) at line %d\n", what, errno, \
			       __LINE__);                                     \
			exit(1);                                              \
		}                                                             \
	} while (0)

static struct ibv_cq *cq;

/* The next completion, waited for by polling. */
static struct ibv_wc next_wc(void)
{
	struct ibv_wc wc;
	long spins = 0;
	int n;

	while ((n = ibv_poll_cq(cq, 1, &wc)) == 0 && spins++ < 2000000000L)
		;
	CHECK(n == 1, "poll_cq");
	return wc;
}

static void expect_wc(uint64_t wr_id, enum ibv_wc_opcode op, const char *what)
{
	struct ibv_wc wc = next_wc();

	if (wc.status != IBV_WC_SUCCESS || wc.wr_id != wr_id || wc.opcode != op) {
		printf("FAIL %s: wr_id %llu status %s opcode %d\n", what,
		       (unsigned long long)wc.wr_id, ibv_wc_status_str(wc.status),
		       wc.opcode);
		exit(1);
	}
}

int main(void)
{
	struct ibv_device **list = ibv_get_device_list(NULL);
	CHECK(list && list[0], "device list");
	struct ibv_context *ctx = ibv_open_device(list[0]);
	CHECK(ctx, "open");
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	CHECK(pd, "pd");
	cq = ibv_create_cq(ctx, 64, NULL, NULL, 0);
	CHECK(cq, "cq");

	struct ibv_qp_init_attr_ex ia = {
		.send_cq = cq,
		.recv_cq = cq,
		.cap = { .max_send_wr = 16, .max_recv_wr = 16,
			 .max_send_sge = 1, .max_recv_sge = 1 },
		.qp_type = IBV_QPT_RC,
		.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
		.pd = pd,
		.send_ops_flags = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_BIND_MW |
				  IBV_QP_EX_WITH_LOCAL_INV |
				  IBV_QP_EX_WITH_SEND_WITH_INV |
				  IBV_QP_EX_WITH_ATOMIC_WRITE,
	};
	/* Operations the QP type cannot carry are refused, as rxe does. */
	ia.qp_type = IBV_QPT_UD;
	errno = 0;
	CHECK(!ibv_create_qp_ex(ctx, &ia) && errno == EOPNOTSUPP,
	      "UD QP with BIND_MW");
	ia.qp_type = IBV_QPT_RC;
	ia.send_ops_flags |= IBV_QP_EX_WITH_TSO;
	errno = 0;
	CHECK(!ibv_create_qp_ex(ctx, &ia) && errno == EOPNOTSUPP,
	      "RC QP with TSO");
	ia.send_ops_flags &= ~IBV_QP_EX_WITH_TSO;
	struct ibv_qp *qp = ibv_create_qp_ex(ctx, &ia);
	CHECK(qp, "create_qp_ex");
	struct ibv_qp_ex *qpx = ibv_qp_to_qp_ex(qp);
	CHECK(qpx, "qp_to_qp_ex");

	size_t len = 4 * 4096;
	char *buf = aligned_alloc(4096, len);
	CHECK(buf, "buffer");
	memset(buf, 0, len);
	int acc = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
		  IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC |
		  IBV_ACCESS_MW_BIND;
	struct ibv_mr *mr = ibv_reg_mr(pd, buf, len, acc);
	CHECK(mr, "reg_mr");

	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = 1,
				 .qp_access_flags = acc & ~IBV_ACCESS_MW_BIND };
	CHECK(!ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
					     IBV_QP_PORT | IBV_QP_ACCESS_FLAGS),
	      "INIT");
	printf("qpn %u\n", qp->qp_num);
	fflush(stdout);

	unsigned peer_qpn, peer_rkey, peer_inv;
	unsigned long long peer_addr;
	CHECK(scanf("%u %llu %u %u", &peer_qpn, &peer_addr, &peer_rkey,
		    &peer_inv) == 4, "peer line");
	union ibv_gid dgid = { .raw = { [10] = 0xff, [11] = 0xff, 10, 0, 0, 2 } };
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = peer_qpn;
	a.rq_psn = 7;
	a.max_dest_rd_atomic = 4;
	a.min_rnr_timer = 12;
	a.ah_attr.is_global = 1;
	a.ah_attr.grh.dgid = dgid;
	a.ah_attr.grh.sgid_index = 1;
	a.ah_attr.grh.hop_limit = 64;
	a.ah_attr.port_num = 1;
	CHECK(!ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
					     IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
					     IBV_QP_MAX_DEST_RD_ATOMIC |
					     IBV_QP_MIN_RNR_TIMER),
	      "RTR");
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = 7;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.max_rd_atomic = 4;
	CHECK(!ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT |
					     IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
					     IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC),
	      "RTS");

	/* Windows: bad type refused; a type 1 bound by the verb. */
	errno = 0;
	CHECK(!ibv_alloc_mw(pd, 7) && errno == EINVAL, "alloc_mw of type 7");
	struct ibv_mw *mw1 = ibv_alloc_mw(pd, IBV_MW_TYPE_1);
	CHECK(mw1 && mw1->type == IBV_MW_TYPE_1 && mw1->pd == pd, "alloc_mw 1");
	struct ibv_mw *mw2 = ibv_alloc_mw(pd, IBV_MW_TYPE_2);
	CHECK(mw2 && mw2->type == IBV_MW_TYPE_2, "alloc_mw 2");
	uint32_t before = mw1->rkey;
	struct ibv_mw_bind b1 = {
		.wr_id = 1,
		.send_flags = IBV_SEND_SIGNALED,
		.bind_info = { .mr = mr, .addr = (uintptr_t)buf, .length = 4096,
			       .mw_access_flags = IBV_ACCESS_REMOTE_WRITE },
	};
	CHECK(ibv_bind_mw(qp, mw1, &b1) == 0, "bind_mw type 1");
	CHECK(mw1->rkey == ibv_inc_rkey(before), "type 1 rkey moved on");
	expect_wc(1, IBV_WC_BIND_MW, "bind_mw type 1 completion");
	CHECK(ibv_bind_mw(qp, mw2, &b1) == EINVAL, "bind_mw of a type 2 window");

	/* A type 2B window bound by a work request; a null window refused. */
	struct ibv_send_wr wr, *bad = NULL;
	memset(&wr, 0, sizeof(wr));
	wr.wr_id = 2;
	wr.opcode = IBV_WR_BIND_MW;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.bind_mw.rkey = ibv_inc_rkey(mw2->rkey);
	wr.bind_mw.bind_info = (struct ibv_mw_bind_info){
		.mr = mr, .addr = (uintptr_t)buf + 4096, .length = 4096,
		.mw_access_flags = IBV_ACCESS_REMOTE_READ };
	CHECK(ibv_post_send(qp, &wr, &bad) == EINVAL && bad == &wr,
	      "BIND_MW without a window");
	wr.bind_mw.mw = mw2;
	CHECK(ibv_post_send(qp, &wr, &bad) == 0, "post BIND_MW");
	expect_wc(2, IBV_WC_BIND_MW, "BIND_MW completion");
	mw2->rkey = wr.bind_mw.rkey;

	struct ibv_sge rs = { .addr = (uintptr_t)buf + 8192, .length = 64,
			      .lkey = mr->lkey };
	struct ibv_recv_wr rwr = { .wr_id = 3, .sg_list = &rs, .num_sge = 1 },
			   *rbad;
	CHECK(ibv_post_recv(qp, &rwr, &rbad) == 0, "post_recv");
	strcpy(buf + 4096, "read through mw2");
	printf("mw1 %u %llu mw2 %u %llu\n", mw1->rkey,
	       (unsigned long long)(uintptr_t)buf, mw2->rkey,
	       (unsigned long long)(uintptr_t)buf + 4096);
	fflush(stdout);

	/* The peer WRITEs through mw1, READs through mw2, then SENDs WITH
	 * INVALIDATE of mw2. */
	struct ibv_wc wc = next_wc();
	CHECK(wc.status == IBV_WC_SUCCESS && wc.wr_id == 3 &&
		      wc.opcode == IBV_WC_RECV,
	      "receive of the SEND WITH INVALIDATE");
	CHECK(wc.wc_flags & IBV_WC_WITH_INV, "IBV_WC_WITH_INV");
	CHECK(wc.invalidated_rkey == mw2->rkey, "invalidated_rkey");
	CHECK(!strcmp(buf, "written through mw1"), "data written through mw1");

	/* The ibv_qp_ex calls: rebind mw2, invalidate it locally, ATOMIC
	 * WRITE to the peer, SEND WITH INVALIDATE of the peer's window. */
	struct ibv_mw_bind_info info = { .mr = mr, .addr = (uintptr_t)buf + 4096,
					 .length = 4096,
					 .mw_access_flags = IBV_ACCESS_REMOTE_READ };
	uint32_t k2 = ibv_inc_rkey(mw2->rkey);
	ibv_wr_start(qpx);
	qpx->wr_id = 10;
	qpx->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_bind_mw(qpx, mw2, k2, &info);
	CHECK(ibv_wr_complete(qpx) == 0, "wr_bind_mw");
	expect_wc(10, IBV_WC_BIND_MW, "wr_bind_mw completion");
	mw2->rkey = k2;
	ibv_wr_start(qpx);
	qpx->wr_id = 11;
	ibv_wr_local_inv(qpx, mw2->rkey);
	CHECK(ibv_wr_complete(qpx) == 0, "wr_local_inv");
	expect_wc(11, IBV_WC_LOCAL_INV, "wr_local_inv completion");
	ibv_wr_start(qpx);
	qpx->wr_id = 12;
	ibv_wr_atomic_write(qpx, peer_rkey, peer_addr, "atomic!!");
	CHECK(ibv_wr_complete(qpx) == 0, "wr_atomic_write");
	expect_wc(12, IBV_WC_ATOMIC_WRITE, "wr_atomic_write completion");
	strcpy(buf + 12288, "invalidate yours");
	ibv_wr_start(qpx);
	qpx->wr_id = 13;
	ibv_wr_send_inv(qpx, peer_inv);
	ibv_wr_set_sge(qpx, mr->lkey, (uintptr_t)buf + 12288, 16);
	CHECK(ibv_wr_complete(qpx) == 0, "wr_send_inv");
	expect_wc(13, IBV_WC_SEND, "wr_send_inv completion");
	/* A bind with no bind info is refused at wr_complete. */
	ibv_wr_start(qpx);
	ibv_wr_bind_mw(qpx, mw2, k2, NULL);
	CHECK(ibv_wr_complete(qpx) == EINVAL, "wr_bind_mw without info");

	/* IBV_WR_LOCAL_INV through ibv_post_send, after one more bind. */
	wr.wr_id = 14;
	wr.bind_mw.rkey = ibv_inc_rkey(mw2->rkey);
	CHECK(ibv_post_send(qp, &wr, &bad) == 0, "post BIND_MW again");
	expect_wc(14, IBV_WC_BIND_MW, "second BIND_MW completion");
	mw2->rkey = wr.bind_mw.rkey;
	struct ibv_send_wr inv = { .wr_id = 15, .opcode = IBV_WR_LOCAL_INV,
				   .send_flags = IBV_SEND_SIGNALED,
				   .invalidate_rkey = mw2->rkey };
	CHECK(ibv_post_send(qp, &inv, &bad) == 0, "post LOCAL_INV");
	expect_wc(15, IBV_WC_LOCAL_INV, "LOCAL_INV completion");

	CHECK(ibv_dealloc_mw(mw1) == 0, "dealloc_mw 1");
	CHECK(ibv_dealloc_mw(mw2) == 0, "dealloc_mw 2");

	/* Multicast on a UD QP. */
	struct ibv_qp_init_attr ua = { .send_cq = cq, .recv_cq = cq,
				       .cap = { .max_send_wr = 4, .max_recv_wr = 4,
						.max_send_sge = 1, .max_recv_sge = 1 },
				       .qp_type = IBV_QPT_UD };
	struct ibv_qp *ud = ibv_create_qp(pd, &ua);
	CHECK(ud, "UD QP");
	union ibv_gid group = { .raw = { [10] = 0xff, [11] = 0xff, 239, 1, 1, 1 } };
	CHECK(ibv_attach_mcast(ud, &group, 0) == 0, "attach_mcast");
	CHECK(ibv_detach_mcast(ud, &group, 0) == 0, "detach_mcast");
	CHECK(ibv_attach_mcast(ud, &dgid, 0) != 0, "attach to a unicast GID");
	CHECK(ibv_attach_mcast(NULL, &group, 0) == EINVAL, "attach without a QP");
	CHECK(ibv_destroy_qp(ud) == 0, "destroy UD QP");

	printf("ok\n");
	fflush(stdout);
	return 0;
}
