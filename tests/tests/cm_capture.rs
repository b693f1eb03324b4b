//! Regenerates the CM fixtures the rdma crate's host tests check its MAD and CM codecs
//! against: two Linux rdma_rxe peers (10.0.0.3 and 10.0.0.4) on one wire run `rping`,
//! `ucmatose` and `udaddy`, and an `rping` to a port nobody listens on; QEMU's
//! filter-dump records peer a's side, and every MAD on QP1 is written, one per line,
//! to `rdma/tests/fixtures/linux-cm-mads.txt` (and the QP1 frames to
//! `linux-cm.pcap`, for tshark).
//!
//! Not a test of the appliance: run it by hand when the fixtures need redoing
//! (`cargo test -p tests --test cm_capture -- --ignored --nocapture`).

#![deny(unsafe_code)]

use std::collections::HashMap;
use std::fmt::Write as _;
use std::time::Duration;
use tests::{LinuxPeer, Nic, PeerOptions, free_udp_port};

/// Offset of the MAD in a RoCE v2 UD frame over IPv4 without options: Ethernet 14,
/// IPv4 20, UDP 8, BTH 12, DETH 8.
const MAD_AT: usize = 14 + 20 + 8 + 12 + 8;
const MAD_LEN: usize = 256;

#[test]
#[ignore = "boots Linux peers; regenerates rdma/tests/fixtures/linux-cm-*"]
fn capture_linux_cm_fixtures() {
    if !LinuxPeer::available_or_skip("capture_linux_cm_fixtures") {
        return;
    }
    let fixtures = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../rdma/tests/fixtures");
    std::fs::create_dir_all(&fixtures).unwrap();
    let dump = std::env::temp_dir().join(format!("cm-capture-{}.pcap", std::process::id()));
    let (p1, p2) = (free_udp_port(), free_udp_port());
    let mut oa = PeerOptions::new(Nic::new("52:54:00:00:01:03", p1, p2), "10.0.0.3/24");
    oa.extra = vec!["-object".into(), format!("filter-dump,id=f0,netdev=n0,file={}", dump.display())];
    let mut a = LinuxPeer::start(oa).unwrap();
    let mut b = LinuxPeer::start(PeerOptions::new(Nic::new("52:54:00:00:01:04", p2, p1), "10.0.0.4/24")).unwrap();
    a.wait_ready().unwrap();
    b.wait_ready().unwrap();
    let long = Duration::from_secs(120);
    let out = b.cmd("ping -c 2 -W 5 10.0.0.3").unwrap();
    assert!(out.contains("2 packets received") || out.contains("2 received"), "{out}");

    // rping: REQ, REP, RTU, then the client's DREQ and the server's DREP.
    a.cmd("rping -s -a 10.0.0.3 -p 7174 -C 2 -S 64 > /tmp/rping.log 2>&1 &").unwrap();
    std::thread::sleep(Duration::from_secs(2));
    let (status, out) = b.status("rping -c -a 10.0.0.3 -p 7174 -C 2 -S 64 -v", long).unwrap();
    let server = a.cmd_timeout("wait; cat /tmp/rping.log", long).unwrap();
    assert_eq!(status, 0, "rping client:\n{out}\nserver:\n{server}");

    // A REQ to a port nobody listens on: REJ, reason 8.
    let (status, out) = b.status("rping -c -a 10.0.0.3 -p 7175 -C 1 -S 64", long).unwrap();
    eprintln!("rping to a closed port: exit {status}\n{out}");

    // ucmatose: RC through rdma_cm with its own private data.
    a.cmd("ucmatose -b 10.0.0.3 -c 1 -C 1 > /tmp/ucmatose.log 2>&1 &").unwrap();
    std::thread::sleep(Duration::from_secs(2));
    let (status, out) = b.status("ucmatose -s 10.0.0.3 -c 1 -C 1", long).unwrap();
    let server = a.cmd_timeout("wait; cat /tmp/ucmatose.log", long).unwrap();
    assert_eq!(status, 0, "ucmatose client:\n{out}\nserver:\n{server}");

    // udaddy: UD, SIDR_REQ and SIDR_REP.
    a.cmd("udaddy -b 10.0.0.3 -c 1 -C 1 > /tmp/udaddy.log 2>&1 &").unwrap();
    std::thread::sleep(Duration::from_secs(2));
    let (status, out) = b.status("udaddy -s 10.0.0.3 -c 1 -C 1", long).unwrap();
    let server = a.cmd_timeout("wait; cat /tmp/udaddy.log", long).unwrap();
    assert_eq!(status, 0, "udaddy client:\n{out}\nserver:\n{server}");

    // The dump is complete once QEMU is gone.
    drop(a);
    drop(b);
    std::thread::sleep(Duration::from_millis(500));
    let bytes = std::fs::read(&dump).unwrap();
    let frames = tests::pcap::frames(&bytes).unwrap();
    let mads: Vec<&[u8]> = frames.into_iter().filter(|f| is_gsi_mad(f)).collect();
    assert!(mads.len() >= 8, "only {} QP1 MADs captured", mads.len());

    let mut text = String::from(
        "# MADs on QP1 between two Linux 6.1 rdma_rxe peers, 10.0.0.3 (a) and 10.0.0.4 (b), as\n\
         # captured on a's wire by tests/tests/cm_capture.rs. One MAD a line:\n\
         # <scenario> <src>><dst> <attribute> <256 bytes in hex>\n",
    );
    let mut scenario_of: HashMap<u32, &'static str> = HashMap::new();
    let mut pcap = bytes[..24].to_vec();
    for f in &mads {
        let mad = &f[MAD_AT..MAD_AT + MAD_LEN];
        let attr = u16::from_be_bytes([mad[16], mad[17]]);
        let data = &mad[24..];
        let word = |at: usize| u32::from_be_bytes([data[at], data[at + 1], data[at + 2], data[at + 3]]);
        let scenario = match attr {
            // REQ and SIDR_REQ name the service: its port says which run it is.
            0x0010 | 0x0017 => {
                let sid_at = 8;
                let port = u16::from_be_bytes([data[sid_at + 6], data[sid_at + 7]]);
                let name = match port {
                    7174 => "rping",
                    7175 => "rping-closed-port",
                    7471 => "ucmatose",
                    _ => "other",
                };
                let name = if attr == 0x0017 { "udaddy" } else { name };
                scenario_of.insert(word(0), name);
                name
            }
            // Every other message carries the IDs of one of them.
            0x0018 => scenario_of.get(&word(0)).copied().unwrap_or("other"),
            _ => {
                let name = scenario_of.get(&word(0)).or(scenario_of.get(&word(4))).copied().unwrap_or("other");
                scenario_of.insert(word(0), name);
                name
            }
        };
        let name = match attr {
            0x0010 => "REQ",
            0x0011 => "MRA",
            0x0012 => "REJ",
            0x0013 => "REP",
            0x0014 => "RTU",
            0x0015 => "DREQ",
            0x0016 => "DREP",
            0x0017 => "SIDR_REQ",
            0x0018 => "SIDR_REP",
            _ => "OTHER",
        };
        let (src, dst) = (&f[26..30], &f[30..34]);
        let hex: String = mad.iter().fold(String::new(), |mut s, b| {
            let _ = write!(s, "{b:02x}");
            s
        });
        let _ = writeln!(
            text,
            "{scenario} {}.{}.{}.{}>{}.{}.{}.{} {name} {hex}",
            src[0], src[1], src[2], src[3], dst[0], dst[1], dst[2], dst[3]
        );
        // A pcap record: zero timestamps (the fixture must not change with the clock).
        let len = f.len() as u32;
        pcap.extend_from_slice(&[0; 8]);
        pcap.extend_from_slice(&len.to_le_bytes());
        pcap.extend_from_slice(&len.to_le_bytes());
        pcap.extend_from_slice(f);
    }
    std::fs::write(fixtures.join("linux-cm-mads.txt"), &text).unwrap();
    std::fs::write(fixtures.join("linux-cm.pcap"), &pcap).unwrap();
    let _ = std::fs::remove_file(&dump);
    eprintln!("{} MADs written to {}:\n{text}", mads.len(), fixtures.display());
}

/// A RoCE v2 UD SEND ONLY to QP1 over IPv4 carrying a whole MAD.
fn is_gsi_mad(f: &[u8]) -> bool {
    tests::pcap::is_roce_v2(f)
        && f.get(12..14) == Some(&[0x08, 0x00])
        && f.get(14) == Some(&0x45)
        && f.get(42) == Some(&0x64)
        && f.get(47..50) == Some(&[0, 0, 1])
        && f.len() >= MAD_AT + MAD_LEN
}
