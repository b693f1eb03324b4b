//! Protection domains (IBA vol. 1 10.2.3): the object that ties QPs, MRs, SRQs and
//! AHs together. An access is allowed only when the QP and the MR share a PD.

use super::pool::handle_type;

handle_type! {
    /// A protection domain.
    PdHandle
}

/// A protection domain. It holds nothing but its identity; the objects that belong
/// to it count themselves so it cannot be destroyed under them.
#[derive(Debug, Default)]
pub struct Pd {
    pub(crate) users: u32,
}
