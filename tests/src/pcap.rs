//! Reading the classic pcap files QEMU's `filter-dump` writes.

/// The frames of a little-endian, Ethernet-link pcap file, or why it is not one.
pub fn frames(bytes: &[u8]) -> Result<Vec<&[u8]>, String> {
    let u32_at = |at: usize| bytes.get(at..at + 4).map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]));
    if u32_at(0) != Some(0xa1b2_c3d4) {
        return Err("not a little-endian pcap file".into());
    }
    if u32_at(20) != Some(1) {
        return Err("the link type is not Ethernet".into());
    }
    let mut out = Vec::new();
    let mut at = 24;
    while at < bytes.len() {
        let caplen = u32_at(at + 8).ok_or("a record header is cut short")? as usize;
        let frame = bytes.get(at + 16..at + 16 + caplen).ok_or("a record is cut short")?;
        out.push(frame);
        at += 16 + caplen;
    }
    Ok(out)
}

/// Whether an Ethernet frame is IPv4 or IPv6 UDP to port 4791 (RoCE v2).
pub fn is_roce_v2(f: &[u8]) -> bool {
    let udp = match f.get(12..14) {
        Some([0x08, 0x00]) if f.get(23) == Some(&17) => 14 + usize::from(f.get(14).map_or(0, |b| b & 0x0f)) * 4,
        Some([0x86, 0xdd]) if f.get(20) == Some(&17) => 54,
        _ => return false,
    };
    f.get(udp + 2..udp + 4) == Some(&4791u16.to_be_bytes())
}
