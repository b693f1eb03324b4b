//! The MAD layer of one port's GSI (QP1): which agent a received MAD goes to, what is
//! answered when none wants it, and the transaction IDs agents send with (IBA vol. 1
//! 13.4 and 13.5; Linux's drivers/infiniband/core/mad.c).
//!
//! Pure: the caller hands each received MAD in with the QP it arrived on and gets back a
//! [`Dispatch`], the agent to give it to, a reply to send back to its sender, or a
//! drop with its reason; nothing here sends or keeps the MAD. Agents register per
//! management class, class version and a set of methods, as `ib_register_mad_agent`
//! does; a response (R bit) goes to the agent whose id is in its TID's upper half.
//!
//! What Linux does with a MAD nobody takes, and so do we: a Get or Set is answered
//! with GetResp and status "unsupported method/attribute" (`generate_unmatched_resp`);
//! anything else is dropped. Malformed MADs (short, wrong base version, SMI classes on
//! QP1, CM methods other than Send) are dropped unanswered (`validate_mad`). Each case
//! is counted.

use alloc::boxed::Box;
use alloc::vec::Vec;

use crate::wire::cm::AttrId;
use crate::wire::mad::{self, Method, MgmtClass};

/// An agent registered with the dispatcher; also the upper 32 bits of the TIDs it
/// sends, so responses find their way back.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct AgentId(pub u32);

/// The set of methods an agent takes (a bit per method value, R bit included).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct MethodSet([u128; 2]);

impl MethodSet {
    pub const EMPTY: MethodSet = MethodSet([0; 2]);

    /// This set and `method`.
    pub const fn with(self, method: Method) -> MethodSet {
        let raw = method.to_raw() as usize;
        let mut words = self.0;
        words[raw / 128] |= 1 << (raw % 128);
        MethodSet(words)
    }

    pub const fn contains(&self, method: Method) -> bool {
        let raw = method.to_raw() as usize;
        self.0[raw / 128] & (1 << (raw % 128)) != 0
    }

    const fn overlaps(&self, other: &MethodSet) -> bool {
        self.0[0] & other.0[0] != 0 || self.0[1] & other.0[1] != 0
    }
}

/// Why a received MAD went to no agent and got no answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MadDrop {
    /// Not exactly 256 bytes.
    BadLength,
    /// Base version other than 1.
    BadBaseVersion,
    /// A subnet management class on QP1, or a GSI class on QP0.
    WrongQp,
    /// A CM MAD other than ClassPortInfo whose method is not Send.
    BadCmMethod,
    /// A response whose TID names no registered agent.
    UnmatchedResponse,
    /// A request no agent takes, and not a Get or Set (which would be answered).
    NoAgent,
}

/// What to do with a received MAD.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Dispatch {
    /// Hand it to this agent.
    Agent(AgentId),
    /// Send this MAD back to where the received one came from.
    Reply(Box<[u8; mad::MAD_LEN]>),
    /// Drop it.
    Drop(MadDrop),
}

/// What the dispatcher saw.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct MadCounters {
    pub received: u64,
    pub delivered: u64,
    /// Unmatched Gets and Sets answered with "unsupported method/attribute".
    pub answered_unsupported: u64,
    pub bad_length: u64,
    pub bad_base_version: u64,
    pub wrong_qp: u64,
    pub bad_cm_method: u64,
    pub unmatched_response: u64,
    pub no_agent: u64,
}

/// A registration refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RegisterError {
    /// Another agent already takes one of these methods of this class and version.
    Conflict,
}

#[derive(Debug, Clone)]
struct Agent {
    id: AgentId,
    class: MgmtClass,
    class_version: u8,
    methods: MethodSet,
}

/// The GSI's agents and counters.
#[derive(Debug, Clone, Default)]
pub struct Dispatcher {
    agents: Vec<Agent>,
    next_id: u32,
    counters: MadCounters,
}

impl Dispatcher {
    pub fn new() -> Dispatcher {
        Dispatcher::default()
    }

    /// Registers an agent for `methods` of `class` at `class_version`. Its responses
    /// (whatever their class) come back to it by TID. Linux numbers agents from 1.
    pub fn register(
        &mut self,
        class: MgmtClass,
        class_version: u8,
        methods: MethodSet,
    ) -> Result<AgentId, RegisterError> {
        let conflict = self
            .agents
            .iter()
            .any(|a| a.class == class && a.class_version == class_version && a.methods.overlaps(&methods));
        if conflict {
            return Err(RegisterError::Conflict);
        }
        self.next_id = self.next_id.wrapping_add(1).max(1);
        let id = AgentId(self.next_id);
        self.agents.push(Agent { id, class, class_version, methods });
        Ok(id)
    }

    pub fn unregister(&mut self, id: AgentId) {
        self.agents.retain(|a| a.id != id);
    }

    /// The TID an agent sends a request with: its id above, its own number below.
    pub const fn tid(agent: AgentId, low: u32) -> u64 {
        ((agent.0 as u64) << 32) | low as u64
    }

    pub fn counters(&self) -> &MadCounters {
        &self.counters
    }

    /// Decides what happens to a MAD received on `qpn` (0 or 1).
    pub fn receive(&mut self, qpn: u32, bytes: &[u8]) -> Dispatch {
        self.counters.received += 1;
        let verdict = self.decide(qpn, bytes);
        let c = &mut self.counters;
        match &verdict {
            Dispatch::Agent(_) => c.delivered += 1,
            Dispatch::Reply(_) => c.answered_unsupported += 1,
            Dispatch::Drop(MadDrop::BadLength) => c.bad_length += 1,
            Dispatch::Drop(MadDrop::BadBaseVersion) => c.bad_base_version += 1,
            Dispatch::Drop(MadDrop::WrongQp) => c.wrong_qp += 1,
            Dispatch::Drop(MadDrop::BadCmMethod) => c.bad_cm_method += 1,
            Dispatch::Drop(MadDrop::UnmatchedResponse) => c.unmatched_response += 1,
            Dispatch::Drop(MadDrop::NoAgent) => c.no_agent += 1,
        }
        verdict
    }

    fn decide(&self, qpn: u32, bytes: &[u8]) -> Dispatch {
        if let Err(drop) = validate(qpn, bytes) {
            return Dispatch::Drop(drop);
        }
        // validate checked the length.
        let header = mad::Packet::new_unchecked(bytes);
        let method = header.method();
        if method.is_response() {
            let hi = (header.tid() >> 32) as u32;
            return match self.agents.iter().find(|a| a.id.0 == hi) {
                Some(a) => Dispatch::Agent(a.id),
                None => Dispatch::Drop(MadDrop::UnmatchedResponse),
            };
        }
        let class = header.mgmt_class();
        let version = header.class_version();
        if let Some(a) =
            self.agents.iter().find(|a| a.class == class && a.class_version == version && a.methods.contains(method))
        {
            return Dispatch::Agent(a.id);
        }
        if matches!(method, Method::Get | Method::Set) {
            let mut reply = Box::new([0u8; mad::MAD_LEN]);
            reply.copy_from_slice(&bytes[..mad::MAD_LEN]);
            let mut packet = mad::Packet::new_unchecked(&mut reply[..]);
            packet.set_method(Method::GetResp);
            packet.set_status(mad::STATUS_UNSUPPORTED_METHOD_ATTRIB);
            return Dispatch::Reply(reply);
        }
        Dispatch::Drop(MadDrop::NoAgent)
    }
}

/// Linux's `validate_mad` for IB MADs, and the fixed size.
fn validate(qpn: u32, bytes: &[u8]) -> Result<(), MadDrop> {
    if bytes.len() != mad::MAD_LEN {
        return Err(MadDrop::BadLength);
    }
    let header = mad::Packet::new_unchecked(bytes);
    if header.base_version() != mad::BASE_VERSION {
        return Err(MadDrop::BadBaseVersion);
    }
    let class = header.mgmt_class();
    if class.is_smi() != (qpn == 0) {
        return Err(MadDrop::WrongQp);
    }
    if class == MgmtClass::Cm && header.attr_id() != AttrId::ClassPortInfo.to_raw() && header.method() != Method::Send {
        return Err(MadDrop::BadCmMethod);
    }
    Ok(())
}

#[cfg(test)]
mod test {
    use super::*;

    fn mad_of(class: u8, version: u8, method: u8, attr: u16, tid: u64) -> [u8; mad::MAD_LEN] {
        let mut m = [0u8; mad::MAD_LEN];
        let repr = mad::Repr {
            base_version: 1,
            mgmt_class: MgmtClass::from_raw(class),
            class_version: version,
            method: Method::from_raw(method),
            status: 0,
            class_specific: 0,
            tid,
            attr_id: attr,
            attr_mod: 0,
        };
        repr.emit(&mut mad::Packet::new_unchecked(&mut m[..]));
        m[100] = 0x5a;
        m
    }

    fn with_cm() -> (Dispatcher, AgentId) {
        let mut d = Dispatcher::new();
        let cm = d.register(MgmtClass::Cm, 2, MethodSet::EMPTY.with(Method::Send)).expect("CM agent");
        (d, cm)
    }

    #[test]
    fn a_cm_send_goes_to_the_cm_agent() {
        let (mut d, cm) = with_cm();
        assert_eq!(d.receive(1, &mad_of(0x07, 2, 0x03, 0x0010, 7)), Dispatch::Agent(cm));
        assert_eq!(d.counters().delivered, 1);
    }

    #[test]
    fn an_unmatched_get_is_answered_unsupported_and_a_send_dropped() {
        let (mut d, _) = with_cm();
        // A Get of the performance class nobody serves: answered, all else echoed.
        let get = mad_of(0x04, 1, 0x01, 0x0012, 0x42);
        let Dispatch::Reply(reply) = d.receive(1, &get) else { panic!("a reply") };
        let p = mad::Packet::new_unchecked(&reply[..]);
        assert_eq!(p.method(), Method::GetResp);
        assert_eq!(p.status(), mad::STATUS_UNSUPPORTED_METHOD_ATTRIB);
        assert_eq!((p.tid(), p.attr_id(), reply[100]), (0x42, 0x0012, 0x5a));
        // A CM class version nobody registered, with Set: answered too.
        assert!(matches!(d.receive(1, &mad_of(0x07, 3, 0x02, 0x0001, 1)), Dispatch::Reply(_)));
        // A Send or Trap of an unknown class: dropped.
        assert_eq!(d.receive(1, &mad_of(0x30, 1, 0x03, 1, 1)), Dispatch::Drop(MadDrop::NoAgent));
        assert_eq!(d.receive(1, &mad_of(0x30, 1, 0x05, 1, 1)), Dispatch::Drop(MadDrop::NoAgent));
        let c = d.counters();
        assert_eq!((c.answered_unsupported, c.no_agent, c.received), (2, 2, 4));
    }

    #[test]
    fn malformed_mads_are_dropped_as_linux_validates_them() {
        let (mut d, _) = with_cm();
        let short = mad_of(0x07, 2, 0x03, 0x10, 1);
        assert_eq!(d.receive(1, &short[..255]), Dispatch::Drop(MadDrop::BadLength));
        let mut bad = mad_of(0x07, 2, 0x03, 0x10, 1);
        bad[0] = 2;
        assert_eq!(d.receive(1, &bad), Dispatch::Drop(MadDrop::BadBaseVersion));
        assert_eq!(d.receive(1, &mad_of(0x81, 1, 0x01, 0x11, 1)), Dispatch::Drop(MadDrop::WrongQp));
        assert_eq!(d.receive(0, &mad_of(0x07, 2, 0x03, 0x10, 1)), Dispatch::Drop(MadDrop::WrongQp));
        // CM messages travel only as Send; a Get of one is dropped, not answered.
        assert_eq!(d.receive(1, &mad_of(0x07, 2, 0x01, 0x10, 1)), Dispatch::Drop(MadDrop::BadCmMethod));
        // ... but ClassPortInfo may be asked for (and nobody here serves it).
        assert!(matches!(d.receive(1, &mad_of(0x07, 2, 0x01, 0x0001, 1)), Dispatch::Reply(_)));
        let c = d.counters();
        assert_eq!((c.bad_length, c.bad_base_version, c.wrong_qp, c.bad_cm_method), (1, 1, 2, 1));
    }

    #[test]
    fn responses_find_their_agent_by_tid() {
        let mut d = Dispatcher::new();
        let sa = d.register(MgmtClass::SubnAdm, 2, MethodSet::EMPTY).expect("SA client");
        let tid = Dispatcher::tid(sa, 77);
        assert_eq!(tid >> 32, u64::from(sa.0));
        assert_eq!(d.receive(1, &mad_of(0x03, 2, 0x81, 0x35, tid)), Dispatch::Agent(sa));
        let stray = Dispatcher::tid(AgentId(sa.0 + 9), 77);
        assert_eq!(d.receive(1, &mad_of(0x03, 2, 0x81, 0x35, stray)), Dispatch::Drop(MadDrop::UnmatchedResponse));
        d.unregister(sa);
        assert_eq!(d.receive(1, &mad_of(0x03, 2, 0x81, 0x35, tid)), Dispatch::Drop(MadDrop::UnmatchedResponse));
    }

    #[test]
    fn overlapping_registrations_are_refused() {
        let (mut d, _) = with_cm();
        let send = MethodSet::EMPTY.with(Method::Send);
        assert_eq!(d.register(MgmtClass::Cm, 2, send), Err(RegisterError::Conflict));
        assert!(d.register(MgmtClass::Cm, 2, MethodSet::EMPTY.with(Method::Get)).is_ok());
        assert!(d.register(MgmtClass::Cm, 3, send).is_ok());
        assert!(send.contains(Method::Send) && !send.contains(Method::Get));
        assert!(MethodSet::EMPTY.with(Method::GetTableResp).contains(Method::GetTableResp));
    }
}
