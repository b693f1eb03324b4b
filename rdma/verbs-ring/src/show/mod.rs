//! The text the RDMA tools print, formatted once for the firmware console
//! and the host tools alike, from the ring's command types: what the console
//! converts the core's attributes into and what the host reads from the
//! ring are the same structures, so the two outputs cannot drift apart.
//!
//! One module per output, each in the shape of the Linux tool it copies
//! (Linux 6.1 rxe under rdma-core 44 and iproute2 6.1), byte for byte:
//! - [`devinfo`]: rdma-core's `ibv_devinfo` (`-v`, `-l`);
//! - [`devices`]: rdma-core's `ibv_devices`;
//! - [`gids`]: the `show_gids` script (mlnx-tools);
//! - [`rdma_link`], [`rdma_dev`], [`rdma_res`], [`rdma_res_obj`],
//!   [`rdma_stat`], [`rdma_sys`]: iproute2's `rdma link show`, `rdma dev
//!   show`, `rdma resource show` (the summary, and `qp|cq|mr|pd|cm_id|ctx|srq`), `rdma
//!   statistic show` and `rdma system show` lines, and their `-j` JSON
//!   ([`json`]);
//! - [`pingpong`]: the pingpongs' `-c` check and its line;
//! - [`words`]: the spellings more than one of them uses (GUIDs, GIDs, names).
//!
//! Every formatter writes to a [`core::fmt::Write`] and reads values a peer
//! may have sent: nothing here panics on them (unknown codes print as the
//! Linux tools print them, a name that is not UTF-8 prints as `?`).

use alloc::vec::Vec;

use crate::cmd::{DeviceAttr, GidEntry, LinkInfo, PortAttr};

pub mod devices;
pub mod devinfo;
pub mod gids;
pub mod json;
pub mod pingpong;
pub mod rdma_dev;
pub mod rdma_link;
pub mod rdma_res;
pub mod rdma_res_obj;
pub mod rdma_stat;
pub mod rdma_sys;
pub mod words;

/// One device as the tools see it: its link (name, index, GUIDs, netdev),
/// its attributes, and the ports to print.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DeviceView {
    /// The device's LINK_SHOW answer (its first port's link).
    pub link: LinkInfo,
    pub attr: DeviceAttr,
    /// The ports to print, in port order (all of them, or the one
    /// `ibv_devinfo -i` asks for).
    pub ports: Vec<PortView>,
}

/// One port of a [`DeviceView`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PortView {
    pub num: u32,
    pub attr: PortAttr,
    /// The valid entries of the port's GID table, in index order.
    pub gids: Vec<GidEntry>,
}

impl DeviceView {
    /// The device's name (`?` if the field is not a valid name).
    pub fn name(&self) -> &str {
        words::name(&self.link.dev_name)
    }
}

#[cfg(test)]
pub(crate) mod fixture;
