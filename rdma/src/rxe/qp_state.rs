//! QP states and the modify-QP rules (IBA vol. 1 10.3.1 QP state machine and table 91
//! of 11.2.5.3 "Modify QP": for each transition and QP type, the attributes that must
//! be given and those that may be). Linux keeps the same table as `qp_state_table` in
//! `ib_modify_qp_is_ok`; the mask bits below are the verbs ABI's `enum ibv_qp_attr_mask`.

use core::fmt;
use verbs_ring::cmd::qp_attr_mask as ibv;

/// The four QP types this transport runs. GSI is QP1, a UD QP with a fixed Q_Key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum QpType {
    Rc,
    Uc,
    Ud,
    Gsi,
}

impl QpType {
    /// Whether the QP is connected (has a fixed remote QP).
    pub const fn is_connected(self) -> bool {
        matches!(self, QpType::Rc | QpType::Uc)
    }

    /// Whether the QP sends datagrams (UD or GSI).
    pub const fn is_datagram(self) -> bool {
        matches!(self, QpType::Ud | QpType::Gsi)
    }

    const fn column(self) -> usize {
        match self {
            QpType::Rc => 0,
            QpType::Uc => 1,
            QpType::Ud => 2,
            QpType::Gsi => 3,
        }
    }
}

/// `enum ibv_qp_state`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum QpState {
    Reset,
    Init,
    /// Ready to receive.
    Rtr,
    /// Ready to send.
    Rts,
    /// Send queue drained: no new send WQE starts.
    Sqd,
    /// Send queue error (UD and UC only): a send failed, receives go on.
    Sqe,
    Err,
}

/// `enum ibv_qp_attr_mask`: which attributes a modify-QP call carries. The
/// bits are the verbs ABI's own (one definition), so a mask from the ring
/// passes to the transport as it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct AttrMask(pub u32);

impl AttrMask {
    pub const STATE: u32 = ibv::STATE;
    pub const CUR_STATE: u32 = ibv::CUR_STATE;
    pub const EN_SQD_ASYNC_NOTIFY: u32 = ibv::EN_SQD_ASYNC_NOTIFY;
    pub const ACCESS_FLAGS: u32 = ibv::ACCESS_FLAGS;
    pub const PKEY_INDEX: u32 = ibv::PKEY_INDEX;
    pub const PORT: u32 = ibv::PORT;
    pub const QKEY: u32 = ibv::QKEY;
    pub const AV: u32 = ibv::AV;
    pub const PATH_MTU: u32 = ibv::PATH_MTU;
    pub const TIMEOUT: u32 = ibv::TIMEOUT;
    pub const RETRY_CNT: u32 = ibv::RETRY_CNT;
    pub const RNR_RETRY: u32 = ibv::RNR_RETRY;
    pub const RQ_PSN: u32 = ibv::RQ_PSN;
    pub const MAX_QP_RD_ATOMIC: u32 = ibv::MAX_QP_RD_ATOMIC;
    pub const ALT_PATH: u32 = ibv::ALT_PATH;
    pub const MIN_RNR_TIMER: u32 = ibv::MIN_RNR_TIMER;
    pub const SQ_PSN: u32 = ibv::SQ_PSN;
    pub const MAX_DEST_RD_ATOMIC: u32 = ibv::MAX_DEST_RD_ATOMIC;
    pub const PATH_MIG_STATE: u32 = ibv::PATH_MIG_STATE;
    pub const CAP: u32 = ibv::CAP;
    pub const DEST_QPN: u32 = ibv::DEST_QPN;

    const NAMES: [&'static str; 21] = [
        "STATE",
        "CUR_STATE",
        "EN_SQD_ASYNC_NOTIFY",
        "ACCESS_FLAGS",
        "PKEY_INDEX",
        "PORT",
        "QKEY",
        "AV",
        "PATH_MTU",
        "TIMEOUT",
        "RETRY_CNT",
        "RNR_RETRY",
        "RQ_PSN",
        "MAX_QP_RD_ATOMIC",
        "ALT_PATH",
        "MIN_RNR_TIMER",
        "SQ_PSN",
        "MAX_DEST_RD_ATOMIC",
        "PATH_MIG_STATE",
        "CAP",
        "DEST_QPN",
    ];

    pub const fn has(self, bits: u32) -> bool {
        self.0 & bits == bits
    }
}

impl fmt::Display for AttrMask {
    /// The attribute names, `|`-separated, as `IBV_QP_*` without the prefix.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut first = true;
        for (bit, name) in Self::NAMES.iter().enumerate() {
            if self.0 & (1 << bit) != 0 {
                if !first {
                    f.write_str("|")?;
                }
                f.write_str(name)?;
                first = false;
            }
        }
        if self.0 >> Self::NAMES.len() != 0 {
            write!(
                f,
                "{}unknown {:#x}",
                if first { "" } else { "|" },
                self.0 >> Self::NAMES.len() << Self::NAMES.len()
            )?;
        }
        Ok(())
    }
}

/// Required and optional attributes of one transition, per QP type (RC, UC, UD, GSI).
#[derive(Clone, Copy)]
struct Rule {
    required: [u32; 4],
    optional: [u32; 4],
}

const NONE4: [u32; 4] = [0; 4];

const fn rule(required: [u32; 4], optional: [u32; 4]) -> Option<Rule> {
    Some(Rule { required, optional })
}

use AttrMask as M;

/// The modify-QP table: the rule for `from -> to`, or `None` when the transition does
/// not exist. Columns are RC, UC, UD, GSI; `None` entries inside a rule's column mean
/// the type cannot make the transition (SQE is for UD/UC/GSI only).
fn table(from: QpState, to: QpState, ty: QpType) -> Option<Rule> {
    use QpState::*;
    // Any state may go to RESET or ERR with no attributes.
    if matches!(to, Reset | Err) {
        return rule(NONE4, NONE4);
    }
    match (from, to) {
        (Reset, Init) => rule(
            [
                M::PKEY_INDEX | M::PORT | M::ACCESS_FLAGS,
                M::PKEY_INDEX | M::PORT | M::ACCESS_FLAGS,
                M::PKEY_INDEX | M::PORT | M::QKEY,
                M::PKEY_INDEX | M::QKEY,
            ],
            NONE4,
        ),
        (Init, Init) => rule(
            NONE4,
            [
                M::PKEY_INDEX | M::PORT | M::ACCESS_FLAGS,
                M::PKEY_INDEX | M::PORT | M::ACCESS_FLAGS,
                M::PKEY_INDEX | M::PORT | M::QKEY,
                M::PKEY_INDEX | M::QKEY,
            ],
        ),
        (Init, Rtr) => rule(
            [
                M::AV | M::PATH_MTU | M::DEST_QPN | M::RQ_PSN | M::MAX_DEST_RD_ATOMIC | M::MIN_RNR_TIMER,
                M::AV | M::PATH_MTU | M::DEST_QPN | M::RQ_PSN,
                0,
                0,
            ],
            [
                M::ALT_PATH | M::ACCESS_FLAGS | M::PKEY_INDEX,
                M::ALT_PATH | M::ACCESS_FLAGS | M::PKEY_INDEX,
                M::PKEY_INDEX | M::QKEY,
                M::PKEY_INDEX | M::QKEY,
            ],
        ),
        (Rtr, Rts) => rule(
            [
                M::TIMEOUT | M::RETRY_CNT | M::RNR_RETRY | M::SQ_PSN | M::MAX_QP_RD_ATOMIC,
                M::SQ_PSN,
                M::SQ_PSN,
                M::SQ_PSN,
            ],
            [
                M::CUR_STATE | M::ALT_PATH | M::ACCESS_FLAGS | M::MIN_RNR_TIMER | M::PATH_MIG_STATE,
                M::CUR_STATE | M::ALT_PATH | M::ACCESS_FLAGS | M::PATH_MIG_STATE,
                M::CUR_STATE | M::QKEY,
                M::CUR_STATE | M::QKEY,
            ],
        ),
        (Rts, Rts) | (Sqd, Rts) => rule(
            NONE4,
            [
                M::CUR_STATE | M::ACCESS_FLAGS | M::ALT_PATH | M::PATH_MIG_STATE | M::MIN_RNR_TIMER,
                M::CUR_STATE | M::ACCESS_FLAGS | M::ALT_PATH | M::PATH_MIG_STATE,
                M::CUR_STATE | M::QKEY,
                M::CUR_STATE | M::QKEY,
            ],
        ),
        (Rts, Sqd) => rule(NONE4, [M::EN_SQD_ASYNC_NOTIFY; 4]),
        (Sqd, Sqd) => rule(
            NONE4,
            [
                M::PORT
                    | M::AV
                    | M::TIMEOUT
                    | M::RETRY_CNT
                    | M::RNR_RETRY
                    | M::MAX_QP_RD_ATOMIC
                    | M::MAX_DEST_RD_ATOMIC
                    | M::ALT_PATH
                    | M::ACCESS_FLAGS
                    | M::PKEY_INDEX
                    | M::MIN_RNR_TIMER
                    | M::PATH_MIG_STATE,
                M::AV | M::ALT_PATH | M::ACCESS_FLAGS | M::PKEY_INDEX | M::PATH_MIG_STATE,
                M::PKEY_INDEX | M::QKEY,
                M::PKEY_INDEX | M::QKEY,
            ],
        ),
        (Sqe, Rts) if ty != QpType::Rc => {
            rule(NONE4, [0, M::CUR_STATE | M::ACCESS_FLAGS, M::CUR_STATE | M::QKEY, M::CUR_STATE | M::QKEY])
        }
        _ => None,
    }
}

/// Why a modify-QP call was refused: each names the culprit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ModifyError {
    /// No such transition for this QP type.
    InvalidTransition { from: QpState, to: QpState, qp_type: QpType },
    /// Attributes the transition requires were not given.
    MissingAttrs { from: QpState, to: QpState, missing: AttrMask },
    /// Attributes the transition does not allow were given.
    UnexpectedAttrs { from: QpState, to: QpState, unexpected: AttrMask },
    /// `cur_qp_state` was given and is not the QP's state.
    CurStateMismatch { actual: QpState, given: QpState },
    /// An attribute value out of range.
    BadValue(&'static str),
}

impl fmt::Display for ModifyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ModifyError::InvalidTransition { from, to, qp_type } => {
                write!(f, "{qp_type:?} QP cannot go from {from:?} to {to:?}")
            }
            ModifyError::MissingAttrs { from, to, missing } => {
                write!(f, "{from:?} -> {to:?} requires {missing}")
            }
            ModifyError::UnexpectedAttrs { from, to, unexpected } => {
                write!(f, "{from:?} -> {to:?} does not take {unexpected}")
            }
            ModifyError::CurStateMismatch { actual, given } => {
                write!(f, "cur_qp_state {given:?} given, QP is in {actual:?}")
            }
            ModifyError::BadValue(what) => write!(f, "bad attribute value: {what}"),
        }
    }
}

/// Checks a modify-QP mask against the table: returns the new state.
/// `to` is the requested state (the QP's current state when `STATE` is not in the mask).
pub fn check_transition(
    qp_type: QpType,
    from: QpState,
    to: QpState,
    mask: AttrMask,
    cur_state: Option<QpState>,
) -> Result<QpState, ModifyError> {
    let rule = table(from, to, qp_type).ok_or(ModifyError::InvalidTransition { from, to, qp_type })?;
    let col = qp_type.column();
    let given = mask.0 & !(M::STATE);
    let missing = rule.required[col] & !given;
    if missing != 0 {
        return Err(ModifyError::MissingAttrs { from, to, missing: AttrMask(missing) });
    }
    let allowed = rule.required[col] | rule.optional[col];
    let unexpected = given & !allowed;
    if unexpected != 0 {
        return Err(ModifyError::UnexpectedAttrs { from, to, unexpected: AttrMask(unexpected) });
    }
    if let Some(given) = cur_state.filter(|_| mask.has(M::CUR_STATE))
        && given != from
    {
        return Err(ModifyError::CurStateMismatch { actual: from, given });
    }
    Ok(to)
}

#[cfg(test)]
mod test {
    use super::*;
    use QpState::{Err as Error, Init, Reset, Rtr, Rts, Sqd, Sqe};

    #[test]
    fn rc_bring_up() {
        let m = |bits| AttrMask(M::STATE | bits);
        assert_eq!(
            check_transition(QpType::Rc, Reset, Init, m(M::PKEY_INDEX | M::PORT | M::ACCESS_FLAGS), None),
            Ok(Init)
        );
        let rtr = M::AV | M::PATH_MTU | M::DEST_QPN | M::RQ_PSN | M::MAX_DEST_RD_ATOMIC | M::MIN_RNR_TIMER;
        assert_eq!(check_transition(QpType::Rc, Init, Rtr, m(rtr), None), Ok(Rtr));
        let rts = M::TIMEOUT | M::RETRY_CNT | M::RNR_RETRY | M::SQ_PSN | M::MAX_QP_RD_ATOMIC;
        assert_eq!(check_transition(QpType::Rc, Rtr, Rts, m(rts), None), Ok(Rts));
    }

    #[test]
    fn errors_name_the_attributes() {
        let err = check_transition(QpType::Rc, Init, Rtr, AttrMask(M::STATE | M::AV), None).expect_err("missing");
        assert_eq!(
            alloc::format!("{err}"),
            "Init -> Rtr requires PATH_MTU|RQ_PSN|MIN_RNR_TIMER|MAX_DEST_RD_ATOMIC|DEST_QPN"
        );
        let err = check_transition(QpType::Ud, Reset, Init, AttrMask(M::PKEY_INDEX | M::PORT | M::QKEY | M::AV), None)
            .expect_err("unexpected");
        assert_eq!(alloc::format!("{err}"), "Reset -> Init does not take AV");
        assert_eq!(
            check_transition(QpType::Rc, Reset, Rts, AttrMask(M::STATE), None),
            Err(ModifyError::InvalidTransition { from: Reset, to: Rts, qp_type: QpType::Rc })
        );
    }

    #[test]
    fn sqe_is_not_for_rc() {
        assert!(check_transition(QpType::Rc, Sqe, Rts, AttrMask(M::STATE), None).is_err());
        assert_eq!(check_transition(QpType::Ud, Sqe, Rts, AttrMask(M::STATE), None), Ok(Rts));
    }

    #[test]
    fn anything_to_reset_or_err() {
        for from in [Reset, Init, Rtr, Rts, Sqd, Sqe, Error] {
            for ty in [QpType::Rc, QpType::Uc, QpType::Ud, QpType::Gsi] {
                assert_eq!(check_transition(ty, from, Error, AttrMask(M::STATE), None), Ok(Error));
                assert_eq!(check_transition(ty, from, Reset, AttrMask(M::STATE), None), Ok(Reset));
            }
        }
    }

    #[test]
    fn gsi_needs_no_port() {
        assert_eq!(check_transition(QpType::Gsi, Reset, Init, AttrMask(M::PKEY_INDEX | M::QKEY), None), Ok(Init));
        assert_eq!(check_transition(QpType::Gsi, Init, Rtr, AttrMask(M::STATE), None), Ok(Rtr));
    }

    #[test]
    fn cur_state_must_match() {
        let r = check_transition(QpType::Ud, Rts, Rts, AttrMask(M::CUR_STATE), Some(Sqe));
        assert_eq!(r, Err(ModifyError::CurStateMismatch { actual: Rts, given: Sqe }));
    }
}
