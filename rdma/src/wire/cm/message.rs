//! A whole CM MAD: the common header Linux's CM writes (base version 1, class CM,
//! class version 2, method Send) and one message, by attribute ID.

use super::super::mad::{self, Method, MgmtClass};
use super::{AttrId, CLASS_VERSION, drep, dreq, mra, rej, rep, req, rtu, sidr_rep, sidr_req};
use super::{DrepRepr, DreqRepr, MraRepr, RejRepr, RepRepr, ReqRepr, RtuRepr, SidrRepRepr, SidrReqRepr};
use crate::wire::{Error, Result};

/// One CM message, any kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CmMessage<'a> {
    Req(ReqRepr<'a>),
    Mra(MraRepr<'a>),
    Rej(RejRepr<'a>),
    Rep(RepRepr<'a>),
    Rtu(RtuRepr<'a>),
    Dreq(DreqRepr<'a>),
    Drep(DrepRepr<'a>),
    SidrReq(SidrReqRepr<'a>),
    SidrRep(SidrRepRepr<'a>),
}

impl CmMessage<'_> {
    /// The attribute ID this message travels under.
    pub const fn attr_id(&self) -> AttrId {
        match self {
            CmMessage::Req(_) => AttrId::Req,
            CmMessage::Mra(_) => AttrId::Mra,
            CmMessage::Rej(_) => AttrId::Rej,
            CmMessage::Rep(_) => AttrId::Rep,
            CmMessage::Rtu(_) => AttrId::Rtu,
            CmMessage::Dreq(_) => AttrId::Dreq,
            CmMessage::Drep(_) => AttrId::Drep,
            CmMessage::SidrReq(_) => AttrId::SidrReq,
            CmMessage::SidrRep(_) => AttrId::SidrRep,
        }
    }
}

/// A CM MAD as plain values: the header fields that vary and the message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CmMad<'a> {
    /// Transaction ID. Linux's CM sends its MAD agent's id in the upper half and the
    /// sender's local communication ID in the lower.
    pub tid: u64,
    /// Zero unless the sender uses ECE (enhanced connection establishment).
    pub attr_mod: u32,
    pub message: CmMessage<'a>,
}

impl<'a> CmMad<'a> {
    /// Reads a whole 256-byte CM MAD. Fails on anything shorter, on a header that is not
    /// a CM Send of class version 2, and on an attribute without a codec here (LAP, APR,
    /// ClassPortInfo, unknown).
    pub fn parse(bytes: &'a [u8]) -> Result<CmMad<'a>> {
        if bytes.len() < mad::MAD_LEN {
            return Err(Error);
        }
        let header = mad::Packet::new_checked(bytes)?;
        if header.base_version() != mad::BASE_VERSION
            || header.mgmt_class() != MgmtClass::Cm
            || header.class_version() != CLASS_VERSION
            || header.method() != Method::Send
        {
            return Err(Error);
        }
        let data = &bytes[mad::HEADER_LEN..mad::MAD_LEN];
        let message = match AttrId::from_raw(header.attr_id()) {
            AttrId::Req => CmMessage::Req(ReqRepr::parse(&req::Packet::new_checked(data)?)?),
            AttrId::Mra => CmMessage::Mra(MraRepr::parse(&mra::Packet::new_checked(data)?)?),
            AttrId::Rej => CmMessage::Rej(RejRepr::parse(&rej::Packet::new_checked(data)?)?),
            AttrId::Rep => CmMessage::Rep(RepRepr::parse(&rep::Packet::new_checked(data)?)?),
            AttrId::Rtu => CmMessage::Rtu(RtuRepr::parse(&rtu::Packet::new_checked(data)?)?),
            AttrId::Dreq => CmMessage::Dreq(DreqRepr::parse(&dreq::Packet::new_checked(data)?)?),
            AttrId::Drep => CmMessage::Drep(DrepRepr::parse(&drep::Packet::new_checked(data)?)?),
            AttrId::SidrReq => CmMessage::SidrReq(SidrReqRepr::parse(&sidr_req::Packet::new_checked(data)?)?),
            AttrId::SidrRep => CmMessage::SidrRep(SidrRepRepr::parse(&sidr_rep::Packet::new_checked(data)?)?),
            _ => return Err(Error),
        };
        Ok(CmMad { tid: header.tid(), attr_mod: header.attr_mod(), message })
    }

    /// Bytes `emit` writes: a whole MAD.
    pub const fn buffer_len(&self) -> usize {
        mad::MAD_LEN
    }

    /// Writes the whole MAD into `bytes` (at least 256 long), reserved bytes zeroed;
    /// fails when the buffer is short or a variable field does not fit.
    pub fn emit(&self, bytes: &mut [u8]) -> Result<()> {
        if bytes.len() < mad::MAD_LEN {
            return Err(Error);
        }
        let header = mad::Repr {
            base_version: mad::BASE_VERSION,
            mgmt_class: MgmtClass::Cm,
            class_version: CLASS_VERSION,
            method: Method::Send,
            status: 0,
            class_specific: 0,
            tid: self.tid,
            attr_id: self.message.attr_id().to_raw(),
            attr_mod: self.attr_mod,
        };
        header.emit(&mut mad::Packet::new_unchecked(&mut bytes[..]));
        let data = &mut bytes[mad::HEADER_LEN..mad::MAD_LEN];
        match &self.message {
            CmMessage::Req(r) => r.emit(&mut req::Packet::new_unchecked(data)),
            CmMessage::Mra(r) => r.emit(&mut mra::Packet::new_unchecked(data)),
            CmMessage::Rej(r) => r.emit(&mut rej::Packet::new_unchecked(data)),
            CmMessage::Rep(r) => r.emit(&mut rep::Packet::new_unchecked(data)),
            CmMessage::Rtu(r) => r.emit(&mut rtu::Packet::new_unchecked(data)),
            CmMessage::Dreq(r) => r.emit(&mut dreq::Packet::new_unchecked(data)),
            CmMessage::Drep(r) => r.emit(&mut drep::Packet::new_unchecked(data)),
            CmMessage::SidrReq(r) => r.emit(&mut sidr_req::Packet::new_unchecked(data)),
            CmMessage::SidrRep(r) => r.emit(&mut sidr_rep::Packet::new_unchecked(data)),
        }
    }

    /// `emit` into a fresh 256-byte MAD.
    pub fn to_bytes(&self) -> Result<[u8; mad::MAD_LEN]> {
        let mut bytes = [0u8; mad::MAD_LEN];
        self.emit(&mut bytes)?;
        Ok(bytes)
    }
}

#[cfg(test)]
mod test {
    use super::*;
    use crate::wire::cm::{MessageMraed, MessageRejected, RejReason};

    #[test]
    fn mra_round_trips() {
        // Linux sent no MRA in the captures; this one is built from table 107.
        let mra = MraRepr {
            local_comm_id: 0x0102_0304,
            remote_comm_id: 0x0506_0708,
            message_mraed: MessageMraed::Rep,
            service_timeout: 22,
            private_data: &[0xaa; mra::PRIVATE_DATA_LEN],
        };
        let m = CmMad { tid: 9, attr_mod: 0, message: CmMessage::Mra(mra) };
        let bytes = m.to_bytes().expect("fits");
        assert_eq!(&bytes[24..34], &[1, 2, 3, 4, 5, 6, 7, 8, 0x40, 22 << 3]);
        assert_eq!(CmMad::parse(&bytes), Ok(m));
    }

    #[test]
    fn too_much_private_data_is_refused() {
        let rtu = RtuRepr { local_comm_id: 1, remote_comm_id: 2, private_data: &[0; rtu::PRIVATE_DATA_LEN + 1] };
        assert_eq!(CmMad { tid: 0, attr_mod: 0, message: CmMessage::Rtu(rtu) }.to_bytes(), Err(Error));
        let rej = RejRepr {
            local_comm_id: 1,
            remote_comm_id: 2,
            message_rejected: MessageRejected::Req,
            reason: RejReason::ConsumerDefined,
            ari: &[0; rej::ARI_LEN + 1],
            private_data: &[],
        };
        assert_eq!(CmMad { tid: 0, attr_mod: 0, message: CmMessage::Rej(rej) }.to_bytes(), Err(Error));
    }

    #[test]
    fn bad_mads_are_errors() {
        let drep = DrepRepr { local_comm_id: 1, remote_comm_id: 2, private_data: &[] };
        let good = CmMad { tid: 0, attr_mod: 0, message: CmMessage::Drep(drep) }.to_bytes().expect("fits");
        assert_eq!(CmMad::parse(&good[..255]), Err(Error));
        for (at, value) in [(0, 2), (1, 4), (2, 1), (3, 0x01), (17, 0x19), (17, 0x1A), (17, 0x01), (17, 0x77)] {
            let mut bad = good;
            bad[at] = value;
            assert_eq!(CmMad::parse(&bad), Err(Error), "byte {at} = {value:#x}");
        }
    }

    #[test]
    fn an_ari_length_past_its_area_is_cut() {
        let rej = RejRepr {
            local_comm_id: 1,
            remote_comm_id: 2,
            message_rejected: MessageRejected::Other,
            reason: RejReason::Timeout,
            ari: &[7; 8],
            private_data: &[],
        };
        let mut bytes = CmMad { tid: 0, attr_mod: 0, message: CmMessage::Rej(rej) }.to_bytes().expect("fits");
        assert_eq!(bytes[24 + 9], 8 << 1);
        bytes[24 + 9] = 0xFE;
        let Ok(CmMad { message: CmMessage::Rej(r), .. }) = CmMad::parse(&bytes) else { panic!("REJ") };
        assert_eq!(r.ari.len(), rej::ARI_LEN);
    }
}
