//! rdma_cm as a client of the RDMA core (Linux's `cma_client`, `cma_add_one`,
//! `cma_remove_one`): added to every device, it learns which devices exist
//! (each gets an IB CM with the device's node GUID as its CA GUID) and which
//! go away (their ids get DEVICE_REMOVAL). It only queues what it hears; the
//! ring server hands it to [`super::RdmaCm`] on its next pass.

use alloc::collections::VecDeque;
use alloc::vec::Vec;
use core::any::Any;

use crate::core::{Client, ClientData, ClientError, Device};

/// A device coming or going.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Heard {
    Added { dev: u32, guid: u64 },
    Removed(u32),
}

/// What the CM heard from the core and nobody took yet.
#[derive(Default)]
pub struct CmClient {
    heard: VecDeque<Heard>,
}

impl CmClient {
    pub fn new() -> Self {
        Self::default()
    }

    /// Everything heard since the last call, oldest first.
    pub fn take(&mut self) -> Vec<Heard> {
        self.heard.drain(..).collect()
    }
}

impl Client for CmClient {
    fn name(&self) -> &str {
        "rdma_cm"
    }

    fn add(&mut self, dev: &Device) -> Result<Option<ClientData>, ClientError> {
        self.heard.push_back(Heard::Added { dev: dev.index(), guid: dev.attr().node_guid.0 });
        Ok(None)
    }

    fn remove(&mut self, dev: &Device, _data: Option<ClientData>) {
        self.heard.push_back(Heard::Removed(dev.index()));
    }

    fn as_any_mut(&mut self) -> Option<&mut dyn Any> {
        Some(self)
    }
}
