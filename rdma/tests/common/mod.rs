//! Test support: the golden rxe captures (embedded at compile time) and a minimal pcapng
//! reader for them.
#![allow(dead_code)]

pub mod rc_ops;

/// One capture: its name, pcapng bytes and tshark's summary.
pub struct Capture {
    pub name: &'static str,
    pub pcapng: &'static [u8],
    pub summary: &'static str,
}

macro_rules! capture {
    ($name:literal) => {
        Capture {
            name: $name,
            pcapng: include_bytes!(concat!("../fixtures/", $name, ".pcap")),
            summary: include_str!(concat!("../fixtures/", $name, ".txt")),
        }
    };
}

pub const CAPTURES: [Capture; 9] = [
    capture!("atomic_cmpswap"),
    capture!("atomic_fadd"),
    capture!("rc_send_multi"),
    capture!("rc_send_small"),
    capture!("rdma_read"),
    capture!("rdma_read_multi"),
    capture!("rdma_write"),
    capture!("rdma_write_multi"),
    capture!("ud_send"),
];

/// The extended-verbs captures (tests/tests/ext_interop.rs wrote them from an
/// appliance <-> Linux run): Linux's frames only, so they are kept apart from
/// [`CAPTURES`], whose facts hold for two Linux peers.
pub const EXT_CAPTURES: [Capture; 4] =
    [capture!("send_inv_only"), capture!("send_inv_multi"), capture!("nak_rem_access"), capture!("atomic_write")];

/// Total frames over all captures.
pub const FRAME_COUNT: usize = 101;

/// Every frame of every capture, as `(capture name, frame index, bytes)`.
pub fn all_frames() -> Vec<(&'static str, usize, Vec<u8>)> {
    CAPTURES
        .iter()
        .flat_map(|c| read_pcapng(c.pcapng).into_iter().enumerate().map(move |(i, f)| (c.name, i, f)))
        .collect()
}

const SECTION_HEADER: u32 = 0x0A0D_0D0A;
const BYTE_ORDER_MAGIC: u32 = 0x1A2B_3C4D;
const ENHANCED_PACKET: u32 = 6;
const SIMPLE_PACKET: u32 = 3;
const INTERFACE_DESCRIPTION: u32 = 1;
const LINKTYPE_ETHERNET: u16 = 1;

/// Reads the packets of a pcapng file (sections, interfaces, enhanced and simple
/// packet blocks; other blocks are skipped). Panics on a malformed file or a truncated
/// capture: fixtures must hold whole frames.
pub fn read_pcapng(data: &[u8]) -> Vec<Vec<u8>> {
    let mut frames = Vec::new();
    let mut little_endian = true;
    let mut at = 0;
    while at < data.len() {
        let raw_type = u32::from_le_bytes(data[at..at + 4].try_into().unwrap());
        if raw_type == SECTION_HEADER {
            // The byte-order magic decides how to read this section, this block included.
            let magic = &data[at + 8..at + 12];
            little_endian = u32::from_le_bytes(magic.try_into().unwrap()) == BYTE_ORDER_MAGIC;
            assert!(
                little_endian || u32::from_be_bytes(magic.try_into().unwrap()) == BYTE_ORDER_MAGIC,
                "bad byte-order magic"
            );
        }
        let u32_at = |offset: usize| {
            let bytes: [u8; 4] = data[offset..offset + 4].try_into().unwrap();
            if little_endian { u32::from_le_bytes(bytes) } else { u32::from_be_bytes(bytes) }
        };
        let block_type = u32_at(at);
        let block_len = u32_at(at + 4) as usize;
        assert!(block_len >= 12 && block_len.is_multiple_of(4), "bad block length");
        assert_eq!(u32_at(at + block_len - 4) as usize, block_len, "trailer");
        let body = at + 8;
        match block_type {
            INTERFACE_DESCRIPTION => {
                let link = u32_at(body) & 0xFFFF;
                let link = if little_endian { link } else { u32_at(body) >> 16 };
                assert_eq!(link as u16, LINKTYPE_ETHERNET, "Ethernet captures only");
            }
            ENHANCED_PACKET => {
                let captured = u32_at(body + 12) as usize;
                let original = u32_at(body + 16) as usize;
                assert_eq!(captured, original, "frame cut by the snap length");
                frames.push(data[body + 20..body + 20 + captured].to_vec());
            }
            SIMPLE_PACKET => {
                let original = u32_at(body) as usize;
                assert!(original <= block_len - 16, "frame cut by the snap length");
                frames.push(data[body + 4..body + 4 + original].to_vec());
            }
            _ => {}
        }
        at += block_len;
    }
    frames
}

/// One line of a tshark summary.
#[derive(Debug)]
pub struct SummaryLine {
    pub number: usize,
    pub src: String,
    pub dst: String,
    pub len: usize,
    /// e.g. "RC Send Only".
    pub info: String,
    pub qpn: u32,
    /// What tshark adds after the QP, e.g. "[Remote Access Error]" on a NAK.
    pub note: String,
}

/// Parses tshark's one-line summaries, e.g.
/// `1   0.000000     10.0.0.2 → 10.0.0.1     RRoCE 122 RC Send Only QP=0x000011`.
pub fn read_summary(text: &str) -> Vec<SummaryLine> {
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|line| {
            let words: Vec<&str> = line.split_whitespace().collect();
            assert_eq!(words[3], "→", "{line}");
            assert_eq!(words[5], "RRoCE", "{line}");
            // The QP word ends the info (glued to it after an opcode tshark
            // does not know: "Unknown OpCodeQP=0x..."); a NAK's reason follows.
            let at = words.iter().position(|w| w.contains("QP=0x")).expect("a QP= word");
            let (glued, qp) = words[at].split_at(words[at].find("QP=0x").unwrap_or(0));
            let qpn = u32::from_str_radix(&qp[5..], 16).unwrap();
            let mut info = words[7..at].to_vec();
            if !glued.is_empty() {
                info.push(glued);
            }
            SummaryLine {
                number: words[0].parse().unwrap(),
                src: words[2].to_string(),
                dst: words[4].to_string(),
                len: words[6].parse().unwrap(),
                info: info.join(" "),
                qpn,
                note: words[at + 1..].join(" "),
            }
        })
        .collect()
}
