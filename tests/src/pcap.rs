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

/// Checks a capture of an interop run: at least `min_roce` RoCE v2 frames,
/// every one accepted by our codec (ICRC included), and none that tshark
/// (when installed) calls malformed or an error. Panics otherwise: a test
/// helper.
pub fn check_roce_capture(file: &std::path::Path, min_roce: usize) {
    let bytes = std::fs::read(file).unwrap();
    let frames = frames(&bytes).unwrap();
    let roce: Vec<&[u8]> = frames.into_iter().filter(|f| is_roce_v2(f)).collect();
    assert!(roce.len() >= min_roce, "only {} RoCE frames in the capture", roce.len());
    for (i, f) in roce.iter().enumerate() {
        if let Err(reason) = rdma::wire::frame::parse(f) {
            panic!("RoCE frame {i} of the capture is refused: {reason:?}");
        }
    }
    // Over IPv6 both rxe implementations send UDP checksum 0, as over IPv4
    // (Linux rxe writes none, and its receiving socket accepts zero checksums,
    // as RFC 6935 allows for tunnels); Wireshark calls every such frame an
    // error, so that one expert item is not counted.
    let filter = "_ws.malformed || (_ws.expert.severity >= error && !udp.checksum.zero)";
    let out = std::process::Command::new("tshark")
        .arg("-r")
        .arg(file)
        .args(["-d", "udp.port==4791,infiniband", "-Y", filter, "-T", "fields", "-e", "frame.number"])
        // Wireshark's payload heuristics are not our protocol, so they are
        // not asked: RPC-over-RDMA claims any SEND payload and throws on
        // rc_pingpong's 4-byte 0x7b fill, Compressed RTP claims perftest
        // write_lat's 2-byte WRITEs (Linux's frames as much as ours).
        .args(["--disable-protocol", "rpcordma", "--disable-protocol", "crtp"])
        .output();
    match out {
        Err(_) => eprintln!("tshark not found: {} RoCE frames checked by our codec only", roce.len()),
        Ok(out) => {
            assert!(out.status.success(), "tshark: {}", String::from_utf8_lossy(&out.stderr));
            let flagged = String::from_utf8_lossy(&out.stdout);
            assert_eq!(flagged.lines().count(), 0, "tshark flags frames {flagged}");
            eprintln!("capture: {} RoCE frames, every ICRC good, none malformed for tshark", roce.len());
        }
    }
}

/// The frames of a pcapng file (Ethernet link; enhanced and simple packet
/// blocks, either byte order; other blocks skipped), or why it is not one:
/// the golden captures under `rdma/tests/fixtures` are pcapng.
pub fn pcapng_frames(bytes: &[u8]) -> Result<Vec<&[u8]>, String> {
    const SECTION: u32 = 0x0A0D_0D0A;
    const MAGIC: u32 = 0x1A2B_3C4D;
    let raw = |at: usize| bytes.get(at..at + 4).map(|b| [b[0], b[1], b[2], b[3]]);
    let mut little = true;
    let mut out = Vec::new();
    let mut at = 0;
    while at < bytes.len() {
        let head = raw(at).ok_or("a block header is cut short")?;
        if u32::from_le_bytes(head) == SECTION {
            let magic = raw(at + 8).ok_or("a section header is cut short")?;
            little = match (u32::from_le_bytes(magic), u32::from_be_bytes(magic)) {
                (MAGIC, _) => true,
                (_, MAGIC) => false,
                _ => return Err("bad byte-order magic".into()),
            };
        }
        let word = |at: usize| raw(at).map(|b| if little { u32::from_le_bytes(b) } else { u32::from_be_bytes(b) });
        let kind = word(at).ok_or("a block header is cut short")?;
        let len = word(at + 4).ok_or("a block header is cut short")? as usize;
        if len < 12 || !len.is_multiple_of(4) || at + len > bytes.len() {
            return Err(format!("a block of bad length {len} at {at}"));
        }
        let body = at + 8;
        let frame = match kind {
            // Enhanced packet: interface, timestamp (2 words), captured, original, data.
            6 => word(body + 12).map(|n| (body + 20, n as usize)),
            // Simple packet: original length, data.
            3 => word(body).map(|n| (body + 4, (n as usize).min(len - 16))),
            _ => None,
        };
        if let Some((from, n)) = frame {
            out.push(bytes.get(from..from + n).ok_or("a packet is cut short")?);
        }
        at += len;
    }
    Ok(out)
}
