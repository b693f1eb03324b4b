"""pyverbs (Debian's python3-pyverbs, unmodified) over our libibverbs.so.1.

Run by tests/tests/pyverbs.rs with LD_LIBRARY_PATH at our libraries and
RDMA_RING at an appliance's ring. Each step prints one `ok <what> <facts>`
line the test checks; any failure raises, which exits non-zero.
"""
import sys

import pyverbs.device as d
import pyverbs.enums as e
from pyverbs.cq import CQ, CompChannel
from pyverbs.mr import MR
from pyverbs.pd import PD
from pyverbs.qp import QP, QPAttr, QPCap, QPInitAttr


def main() -> None:
    names = [dev.name.decode() for dev in d.get_device_list()]
    print("ok devices", " ".join(names))
    if "rxe0" not in names:
        sys.exit("rxe0 is not among the devices")

    with d.Context(name="rxe0") as ctx:
        attr = ctx.query_device()
        print(f"ok query_device max_qp={attr.max_qp} max_mr={attr.max_mr} vendor_id={attr.vendor_id:#x}")
        port = ctx.query_port(1)
        print(f"ok query_port state={port.state} active_mtu={port.active_mtu} gid_tbl_len={port.gid_tbl_len}")
        gid = ctx.query_gid(1, 1)
        print(f"ok query_gid 1 {gid}")

        with PD(ctx) as pd:
            print("ok pd")
            with MR(pd, 4096, e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_REMOTE_WRITE) as mr:
                # The MR's memory is pyverbs' own buffer (moved into the
                # ring's shared memory by our ibv_reg_mr): what it writes
                # must read back.
                mr.write(b"pyverbs over the ring", 21)
                back = mr.read(21, 0)
                if back != b"pyverbs over the ring":
                    sys.exit(f"MR read back {back!r}")
                print(f"ok mr lkey={mr.lkey:#x} rkey={mr.rkey:#x} readback")

                channel = CompChannel(ctx)
                cq = CQ(ctx, 32, None, channel, 0)
                print(f"ok cq cqe={cq.cqe}")

                cap = QPCap(max_send_wr=16, max_recv_wr=16, max_send_sge=1, max_recv_sge=1)
                for name, qpt in (("rc", e.IBV_QPT_RC), ("uc", e.IBV_QPT_UC), ("ud", e.IBV_QPT_UD)):
                    init = QPInitAttr(qp_type=qpt, scq=cq, rcq=cq, cap=cap)
                    qp = QP(pd, init)
                    qa = QPAttr(port_num=1)
                    if qpt == e.IBV_QPT_UD:
                        qa.qkey = 0x11111111
                    qp.to_init(qa)
                    state = qp.query(e.IBV_QP_STATE)[0].qp_state
                    if state != e.IBV_QPS_INIT:
                        sys.exit(f"{name} QP state {state} after to_init")
                    print(f"ok qp {name} qpn={qp.qp_num} init")
                    qp.close()
                cq.close()
                channel.close()
    print("ok done")


if __name__ == "__main__":
    main()
