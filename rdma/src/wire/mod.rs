//! RoCE v2 wire format (IBA vol. 1 ch. 9, RoCE v2 annex A17).
