//! The uverbs server as a client of the RDMA core (Linux's `uverbs_client`,
//! `ib_uverbs_event_handler`, `ib_uverbs_remove_one`). Registered once, it
//! is added to every device, so it hears what host programs must hear: a
//! port going ACTIVE or down, a GID table change, and the device going away
//! (`rdma link delete`, its netdev unregistered). It only queues them; the
//! server takes the queue on its next pass ([`super::deliver_events`]),
//! turns each into an async event for the ring's contexts, and forgets the
//! objects of a device that is gone.

use alloc::collections::VecDeque;
use alloc::vec::Vec;
use core::any::Any;

use verbs_ring::cmd::event_type;

use crate::core::{Client, ClientData, ClientError, Device, IbEvent, IbEventType};

/// What the server learns from the core between two passes.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Heard {
    /// A port event: device, port, the ring's `event_type`.
    Port { dev: u32, port: u32, event_type: u32 },
    /// The device was added (an index may come back after a removal).
    Added(u32),
    /// The device is gone, with everything on it.
    Removed(u32),
}

/// Events heard from the core but not yet taken, bounded so a flapping link
/// cannot grow it without end (the oldest go first; the ring's own
/// per-context queues bound what reaches hosts anyway).
#[derive(Default)]
pub struct UverbsClient {
    heard: VecDeque<Heard>,
}

const MAX_HEARD: usize = 256;

impl UverbsClient {
    pub fn new() -> Self {
        Self::default()
    }

    /// Everything heard since the last call, oldest first.
    pub fn take(&mut self) -> Vec<Heard> {
        self.heard.drain(..).collect()
    }

    fn push(&mut self, h: Heard) {
        if self.heard.len() >= MAX_HEARD {
            self.heard.pop_front();
        }
        self.heard.push_back(h);
    }
}

impl Client for UverbsClient {
    fn name(&self) -> &str {
        "uverbs"
    }

    fn add(&mut self, dev: &Device) -> Result<Option<ClientData>, ClientError> {
        self.push(Heard::Added(dev.index()));
        Ok(None)
    }

    fn remove(&mut self, dev: &Device, _data: Option<ClientData>) {
        self.push(Heard::Removed(dev.index()));
    }

    fn event(&mut self, ev: &IbEvent, _dev: &Device, _data: Option<&mut ClientData>) {
        let event_type = match ev.kind {
            IbEventType::PortActive => event_type::PORT_ACTIVE,
            IbEventType::PortErr => event_type::PORT_ERR,
            IbEventType::GidChange => event_type::GID_CHANGE,
            IbEventType::PkeyChange => event_type::PKEY_CHANGE,
        };
        self.push(Heard::Port { dev: ev.device_index, port: ev.port, event_type });
    }

    fn as_any_mut(&mut self) -> Option<&mut dyn Any> {
        Some(self)
    }
}
