//! The provider behind the real ring: a host context and the firmware over one
//! shared region, the core behind them, as the appliance runs it.

use super::*;
use crate::core::{MacAddr, NetdevInfo};
use crate::rxe::RxeDriver;
use alloc::vec;
use alloc::vec::Vec;
use core::cell::RefCell;
use core::net::Ipv4Addr;
use verbs_ring::cmd::{DevReq, GidReq, HandleResp, LinkAddReq, LinkShowReq, PortReq, nr};
use verbs_ring::host::HostError;
use verbs_ring::shm::fake::HeapShm;
use verbs_ring::{Firmware, HostContext, Layout, LayoutParams, SharedMem};

struct Shared {
    core: RefCell<RdmaCore>,
    net: Vec<NetdevInfo>,
}

impl CoreAccess for &'static Shared {
    fn with<R>(&self, f: impl FnOnce(&mut RdmaCore, &dyn NetdevProvider) -> Result<R, Status>) -> Result<R, Status> {
        f(&mut self.core.borrow_mut(), &self.net)
    }
}

fn shared() -> &'static Shared {
    let mac = MacAddr([0x52, 0x54, 0, 0, 0, 1]);
    let net = vec![NetdevInfo::new(2, "eth0", mac).with_ipv4(Ipv4Addr::new(10, 0, 0, 1))];
    alloc::boxed::Box::leak(alloc::boxed::Box::new(Shared {
        core: RefCell::new(RdmaCore::with_rxe(RxeDriver::factory())),
        net,
    }))
}

fn name<const N: usize>(s: &str) -> [u8; N] {
    let mut out = [0u8; N];
    out[..s.len()].copy_from_slice(s.as_bytes());
    out
}

#[test]
fn link_add_and_queries_through_the_ring() {
    let mem = HeapShm::new(4 << 20);
    let params = LayoutParams { num_contexts: 2, queue_area_size: 64 << 10, ..LayoutParams::default() };
    let layout = Layout::new(mem.len() as u64, params).unwrap();
    let access = shared();
    let fw = RefCell::new(Firmware::new(&mem, layout, CoreVerbs::new(access), Default::default(), 16).unwrap());
    let tick = || fw.borrow_mut().tick(&mem).is_ok();
    let mut host = HostContext::attach(&mem, 42).unwrap();

    let add = LinkAddReq { dev_name: name("rxe0"), link_type: name("rxe"), netdev: name("eth0") };
    let dev: HandleResp = host.call(&mem, nr::LINK_ADD, &add, tick).unwrap();
    let link: LinkInfo = host.call(&mem, nr::LINK_SHOW, &LinkShowReq { dev_index: 0, port_num: 0 }, tick).unwrap();
    assert_eq!(link.dev_index, dev.handle);
    assert_eq!(&link.dev_name[..5], b"rxe0\0");
    assert_eq!(&link.netdev[..5], b"eth0\0");
    assert_eq!(link.port_state, 4, "PORT_ACTIVE");
    assert_eq!(link.next, NO_MORE);

    let attr: cmd::DeviceAttr =
        host.call(&mem, nr::QUERY_DEVICE, &DevReq { dev_index: dev.handle, reserved: 0 }, tick).unwrap();
    assert_eq!(attr.vendor_id, 0xffffff);
    assert_eq!(attr.node_guid, 0x5054_00ff_fe00_0001);
    assert_eq!(attr.max_qp, 1_048_560);
    let port: cmd::PortAttr =
        host.call(&mem, nr::QUERY_PORT, &PortReq { dev_index: dev.handle, port_num: 1 }, tick).unwrap();
    assert_eq!((port.state, port.active_mtu, port.link_layer, port.gid_tbl_len), (4, 3, 2, 1024));
    let gid: GidEntry = host
        .call(&mem, nr::QUERY_GID, &GidReq { dev_index: dev.handle, port_num: 1, index: 1, reserved: 0 }, tick)
        .unwrap();
    assert_eq!(gid.valid, 1);
    assert_eq!(gid.gid_type, cmd::gid_type::ROCE_V2);
    assert_eq!(gid.gid, [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 0, 0, 1]);

    // Refusals come back as statuses: a taken netdev, an unknown device, and
    // an object command the provider does not offer yet.
    let again = host.call::<_, _, HandleResp>(&mem, nr::LINK_ADD, &add, tick);
    assert!(matches!(again, Err(HostError::Status(_))), "{again:?}");
    let missing =
        host.call::<_, _, cmd::DeviceAttr>(&mem, nr::QUERY_DEVICE, &DevReq { dev_index: 9, reserved: 0 }, tick);
    assert_eq!(missing.unwrap_err(), HostError::Status(Status::ENODEV));
    let pd = host.call::<_, _, HandleResp>(&mem, nr::ALLOC_PD, &DevReq { dev_index: dev.handle, reserved: 0 }, tick);
    assert_eq!(pd.unwrap_err(), HostError::Status(Status::EOPNOTSUPP));

    let _: cmd::Empty = host.call(&mem, nr::LINK_DEL, &DevReq { dev_index: dev.handle, reserved: 0 }, tick).unwrap();
    assert!(access.core.borrow().device_by_name("rxe0").is_none());
}
