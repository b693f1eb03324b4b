//! The ring server's side of rdma_cm: the CM's pass (devices heard from its
//! core client, MADs between each device's QP1 and its IB CM, timers and
//! address resolutions) and the CM commands of host contexts.

use alloc::boxed::Box;
use core::net::IpAddr;

use super::objects::{MacResolution, mac_of_link_local};
use super::{CoreAccess, CoreVerbs, TransportAccess, status};
use crate::cm::client::{CmClient, Heard};
use crate::core::gid::Gid;
use crate::rxe::mad_port::sgid_index;
use crate::rxe::time::Instant;

/// One CM pass: devices that came or went, address resolutions and IB CM
/// timers, then every device's received MADs in and queued MADs out.
pub fn cm_pump<A: CoreAccess + TransportAccess>(p: &mut CoreVerbs<'_, A>, now: Instant) {
    let CoreVerbs { access, u } = p;
    let heard = access.with(|core, _| {
        let id = match u.cm_client {
            Some(id) => id,
            None => {
                let id = core.register_client(Box::new(CmClient::new())).map_err(|e| status(&e))?;
                u.cm_client = Some(id);
                id
            }
        };
        Ok(core.client_mut::<CmClient>(id).map(|c| c.take()).unwrap_or_default())
    });
    let cm = &mut u.cm;
    for h in heard.unwrap_or_default() {
        match h {
            Heard::Added { dev, guid } => cm.add_device(dev, guid),
            Heard::Removed(dev) => cm.remove_device(dev),
        }
    }
    cm.poll(now, &mut |dev, ip| resolve(&mut **access, dev, ip, now));
    let devs: alloc::vec::Vec<u32> = cm.devices().collect();
    for dev in devs {
        let _ = access.with_transport(dev, |t, sink, _| {
            while let Some(m) = t.take_mad() {
                let index = sgid_index(t.local_port(), &m.dst_gid).unwrap_or(0);
                cm.receive(now, dev, &m, index);
            }
            for m in cm.take_mads(dev) {
                let _ = t.send_mad(&m.ah, m.dest_qpn, &m.mad, sink);
            }
            Ok(())
        });
    }
}

/// The next hop's MAC for the CM's address resolution.
fn resolve<A: TransportAccess>(access: &mut A, dev: u32, ip: IpAddr, now: Instant) -> MacResolution {
    match ip {
        IpAddr::V4(a) => access.resolve_ipv4(dev, a, now),
        IpAddr::V6(a) => mac_of_link_local(&Gid::from_ipv6(a)).map_or(MacResolution::Failed, MacResolution::Known),
    }
}
