/* The alternate path through our libibverbs.so.1, as a C program built
 * against rdma-core 44's verbs.h loads it: IBV_QP_ALT_PATH and
 * IBV_QP_PATH_MIG_STATE in RTR->RTS, ibv_query_qp answering them as
 * loaded, an alternate path on a port the device does not have refused
 * with EINVAL and changing nothing, the migration state rearmed alone in
 * RTS->RTS. (Migration itself is the transport's; verbs' tests/transport.rs
 * migrates a QP through the ring.)
 *
 * Runs alone on one host-simulated appliance (10.0.0.1, peer 10.0.0.2);
 * tests/alt_path.rs starts it. Any failed check prints "FAIL <what>" and
 * exits 1; success prints "OK". */
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

int main(void)
{
	struct ibv_device **list = ibv_get_device_list(NULL);
	CHECK(list && list[0], "device list");
	struct ibv_context *ctx = ibv_open_device(list[0]);
	CHECK(ctx, "open");
	struct ibv_device_attr dev;
	CHECK(!ibv_query_device(ctx, &dev), "query_device");
	CHECK(dev.device_cap_flags & IBV_DEVICE_AUTO_PATH_MIG, "AUTO_PATH_MIG");
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	CHECK(pd, "pd");
	struct ibv_cq *cq = ibv_create_cq(ctx, 8, NULL, NULL, 0);
	CHECK(cq, "cq");
	struct ibv_qp_init_attr ia = {
		.send_cq = cq,
		.recv_cq = cq,
		.cap = { .max_send_wr = 4, .max_recv_wr = 4,
			 .max_send_sge = 1, .max_recv_sge = 1 },
		.qp_type = IBV_QPT_RC,
	};
	struct ibv_qp *qp = ibv_create_qp(pd, &ia);
	CHECK(qp, "create_qp");

	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = 1 };
	CHECK(!ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
					     IBV_QP_PORT | IBV_QP_ACCESS_FLAGS),
	      "INIT");
	union ibv_gid dgid = { .raw = { [10] = 0xff, [11] = 0xff, 10, 0, 0, 2 } };
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = 0x12;
	a.rq_psn = 7;
	a.max_dest_rd_atomic = 1;
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
	a.max_rd_atomic = 1;
	a.alt_ah_attr = a.ah_attr;
	a.alt_ah_attr.grh.traffic_class = 32;
	a.alt_port_num = 1;
	a.alt_pkey_index = 0;
	a.alt_timeout = 12;
	a.path_mig_state = IBV_MIG_ARMED;
	CHECK(!ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT |
					     IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
					     IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC |
					     IBV_QP_ALT_PATH |
					     IBV_QP_PATH_MIG_STATE),
	      "RTS with an armed alternate path");

	struct ibv_qp_attr q;
	struct ibv_qp_init_attr qi;
	memset(&q, 0xee, sizeof(q));
	CHECK(!ibv_query_qp(qp, &q, IBV_QP_ALT_PATH | IBV_QP_PATH_MIG_STATE, &qi),
	      "query_qp");
	CHECK(q.path_mig_state == IBV_MIG_ARMED, "path_mig_state ARMED");
	CHECK(q.alt_port_num == 1 && q.alt_timeout == 12 &&
		      q.alt_pkey_index == 0,
	      "alt_port_num, alt_timeout, alt_pkey_index");
	CHECK(q.alt_ah_attr.is_global == 1 && q.alt_ah_attr.port_num == 1 &&
		      !memcmp(&q.alt_ah_attr.grh.dgid, &dgid, sizeof(dgid)) &&
		      q.alt_ah_attr.grh.sgid_index == 1 &&
		      q.alt_ah_attr.grh.traffic_class == 32,
	      "alt_ah_attr");
	CHECK(q.ah_attr.grh.traffic_class == 0 && q.timeout == 14,
	      "the primary path kept");

	/* A port the device does not have: refused, nothing changed. */
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.alt_ah_attr = q.alt_ah_attr;
	a.alt_ah_attr.port_num = 2;
	a.alt_port_num = 2;
	a.alt_timeout = 3;
	errno = 0;
	CHECK(ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_ALT_PATH) == EINVAL,
	      "alternate path on port 2 refused");
	a.alt_ah_attr.port_num = 1;
	CHECK(ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_ALT_PATH) == EINVAL,
	      "alt_port_num 2 with a vector on port 1 refused");
	memset(&q, 0, sizeof(q));
	CHECK(!ibv_query_qp(qp, &q, IBV_QP_ALT_PATH, &qi), "query_qp");
	CHECK(q.alt_timeout == 12 && q.alt_port_num == 1 &&
		      q.path_mig_state == IBV_MIG_ARMED,
	      "the refusal changed nothing");

	/* The migration state alone, in RTS->RTS. */
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.path_mig_state = IBV_MIG_REARM;
	CHECK(!ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PATH_MIG_STATE),
	      "REARM");
	CHECK(!ibv_query_qp(qp, &q, IBV_QP_PATH_MIG_STATE, &qi) &&
		      q.path_mig_state == IBV_MIG_REARM && q.alt_timeout == 12,
	      "path_mig_state REARM");

	CHECK(!ibv_destroy_qp(qp), "destroy_qp");
	ibv_destroy_cq(cq);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	ibv_free_device_list(list);
	printf("OK\n");
	return 0;
}
