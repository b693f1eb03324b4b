//! Host benchmark of the wire codec: ICRC throughput at 64 B, 1 KiB and 4 KiB payloads on
//! each CRC path (table, PCLMULQDQ), and the cost of building and of parsing (with ICRC
//! check) a 1 KiB-payload frame.
//! Plain `std::time`, medians over samples: `cargo bench -p rdma`.

use std::hint::black_box;
use std::time::{Duration, Instant};

use rdma::wire::frame::{self, FrameRepr, IpPath, Path};
use rdma::wire::{BthRepr, Ecn, ExtHeaders, Ipv4Address, MacAddr, Opcode, Psn, RoceRepr, icrc, sport};

const SAMPLES: usize = 41;
const SAMPLE_TIME: Duration = Duration::from_millis(20);

fn path() -> Path {
    Path {
        src_mac: MacAddr([0x52, 0x54, 0, 0, 0, 2]),
        dst_mac: MacAddr([0x52, 0x54, 0, 0, 0, 1]),
        ip: IpPath::V4 { src: Ipv4Address([10, 0, 0, 2]), dst: Ipv4Address([10, 0, 0, 1]) },
        dscp: 0,
        ecn: Ecn::NotEct,
        hop_limit: 64,
        src_port: sport::src_port_for_connection(0, 0x11, 0x11),
    }
}

fn send_only() -> RoceRepr {
    RoceRepr {
        bth: BthRepr {
            opcode: Opcode::RcSendOnly,
            solicited: false,
            mig_req: false,
            pad_count: 0,
            tver: 0,
            pkey: 0xFFFF,
            fecn: false,
            becn: false,
            dest_qpn: 0x11,
            ack_req: true,
            psn: Psn::new(0x80_545a),
        },
        ext: ExtHeaders::NONE,
    }
}

/// A SEND ONLY frame with `payload_len` bytes of payload.
fn frame_with_payload(payload_len: usize) -> Vec<u8> {
    let payload: Vec<u8> = (0..payload_len).map(|i| i as u8).collect();
    let repr = FrameRepr { path: path(), ip_id: 1, roce: send_only(), payload: &payload };
    let mut buf = vec![0u8; repr.buffer_len()];
    let len = repr.emit(&mut buf).expect("emits");
    buf.truncate(len);
    buf
}

/// Median time per call of `f`, in nanoseconds.
fn median_ns(mut f: impl FnMut()) -> f64 {
    // Size the batch so one sample takes about SAMPLE_TIME.
    let mut batch = 1u64;
    loop {
        let start = Instant::now();
        for _ in 0..batch {
            f();
        }
        if start.elapsed() >= SAMPLE_TIME / 4 {
            break;
        }
        batch *= 2;
    }
    batch *= 4;
    let mut samples: Vec<f64> = (0..SAMPLES)
        .map(|_| {
            let start = Instant::now();
            for _ in 0..batch {
                f();
            }
            start.elapsed().as_nanos() as f64 / batch as f64
        })
        .collect();
    samples.sort_by(f64::total_cmp);
    samples[SAMPLES / 2]
}

fn main() {
    // `cargo test --benches` runs this with `--bench` absent; keep that quick.
    if !std::env::args().any(|a| a == "--bench") {
        println!("wire bench: skipped (run with cargo bench)");
        return;
    }
    println!("rdma wire benchmark: median of {SAMPLES} samples of ~{SAMPLE_TIME:?}");

    for path in icrc::Path::ALL {
        if !path.available() {
            println!("icrc  {path}: not available on this CPU");
            continue;
        }
        for (label, payload_len) in [("64 B", 64), ("1 KiB", 1024), ("4 KiB", 4096)] {
            let frame = frame_with_payload(payload_len);
            // The ICRC covers the IP packet without its last 4 bytes.
            let covered = &frame[14..frame.len() - icrc::ICRC_LEN];
            let ns = median_ns(|| {
                black_box(icrc::compute_on(path, black_box(covered)).ok());
            });
            println!(
                "icrc  {path:>9} payload {label:>5}: {:7.1} ns per frame, {:5.2} GB/s over {} covered bytes",
                ns,
                covered.len() as f64 / ns,
                covered.len()
            );
        }
    }
    println!("(parse and emit below use the best path: {})", icrc::Path::best());

    let frame = frame_with_payload(1024);
    let ns = median_ns(|| {
        black_box(frame::parse(black_box(&frame)).is_ok());
    });
    println!("parse+verify, 1 KiB payload ({} B frame): {ns:.1} ns", frame.len());

    let payload = vec![0x5Au8; 1024];
    let mut tx = vec![0u8; 2048];
    let roce = send_only();
    let path = path();
    let mut id = frame::IpId::new(0);
    let ns = median_ns(|| {
        let built = frame::emit(&mut tx, &path, id.next_id(), &roce, payload.len(), |p| p.copy_from_slice(&payload));
        black_box(built.is_ok());
    });
    println!("emit (payload copy + ICRC), 1 KiB payload: {ns:.1} ns");
}
