//! Regenerates the fixtures `tests/tests/golden.rs` compares the appliance's
//! tool output with: a Linux rdma_rxe peer (eth0 52:54:00:00:01:03,
//! 10.0.0.3/24, rxe0 on it) runs each command once and its output is written
//! to `tests/fixtures/linux/<name>.txt`, with a few objects alive for
//! `rdma resource show` (an `ibv_rc_pingpong` server waiting for its client,
//! an `rping` server listening).
//!
//! Not a test of the appliance: run it by hand when the fixtures need redoing
//! (`cargo test -p tests --test golden_capture -- --ignored --nocapture`).

#![deny(unsafe_code)]

use tests::{LinuxPeer, Nic, PeerOptions, free_udp_port};

/// (fixture name, command): what golden.rs runs on the appliance too.
pub const COMMANDS: &[(&str, &str)] = &[
    ("rdma-link", "rdma link"),
    ("rdma-link-show-rxe0-1", "rdma link show rxe0/1"),
    ("rdma-dev", "rdma dev"),
    ("rdma-link-add-dup", "rdma link add rxe0 type rxe netdev eth0"),
    ("ibv_devices", "ibv_devices"),
    ("ibv_devinfo", "ibv_devinfo"),
    ("ibv_devinfo-v", "ibv_devinfo -v"),
    ("ip-link-eth0", "ip link show dev eth0"),
    ("ip-addr-eth0", "ip addr show dev eth0"),
    ("ip-4-addr-eth0", "ip -4 addr show dev eth0"),
    ("rdma-j-link", "rdma -j link"),
    ("rdma-jp-link", "rdma -j -p link"),
    ("rdma-d-link", "rdma -d link"),
    ("rdma-jd-link", "rdma -j -d link"),
    ("rdma-j-dev", "rdma -j dev"),
    ("rdma-d-dev", "rdma -d dev"),
    ("rdma-jd-dev", "rdma -j -d dev"),
    ("rdma-system", "rdma system"),
    ("rdma-system-show", "rdma system show"),
    ("rdma-j-system", "rdma -j system show"),
    ("rdma-j-statistic", "rdma -j statistic show"),
];

/// With an RC pingpong server and an rping server alive.
pub const RESOURCE_COMMANDS: &[(&str, &str)] = &[
    ("rdma-resource", "rdma resource show"),
    ("rdma-resource-qp", "rdma resource show qp"),
    ("rdma-resource-cq", "rdma resource show cq"),
    ("rdma-resource-mr", "rdma resource show mr"),
    ("rdma-resource-pd", "rdma resource show pd"),
    ("rdma-resource-cm_id", "rdma resource show cm_id"),
    ("rdma-resource-rxe0", "rdma resource show rxe0"),
    ("rdma-resource-qp-lqpn-1", "rdma resource show qp lqpn 1"),
    ("rdma-d-resource-qp", "rdma -d resource show qp"),
    ("rdma-j-resource", "rdma -j resource show"),
    ("rdma-jp-resource", "rdma -j -p resource show"),
    ("rdma-j-resource-qp", "rdma -j resource show qp"),
    ("rdma-j-resource-cq", "rdma -j resource show cq"),
    ("rdma-j-resource-mr", "rdma -j resource show mr"),
    ("rdma-j-resource-pd", "rdma -j resource show pd"),
    ("rdma-j-resource-cm_id", "rdma -j resource show cm_id"),
];

/// With an SRQ pingpong server (16 QPs on one SRQ) and an rping server
/// listening on the wildcard address alive.
pub const SRQ_COMMANDS: &[(&str, &str)] = &[
    ("rdma-resource-srq", "rdma resource show srq"),
    ("rdma-j-resource-srq", "rdma -j resource show srq"),
    ("rdma-resource-ctx", "rdma resource show ctx"),
    ("rdma-j-resource-ctx", "rdma -j resource show ctx"),
    ("rdma-resource-srq-ctx", "rdma resource show"),
    ("rdma-resource-qp-srq", "rdma resource show qp"),
    ("rdma-resource-cm_id-any", "rdma resource show cm_id"),
    ("rdma-j-resource-cm_id-any", "rdma -j resource show cm_id"),
];

#[test]
#[ignore = "boots a Linux peer; regenerates tests/fixtures/linux/"]
fn capture_linux_tool_output() {
    if !LinuxPeer::available_or_skip("capture_linux_tool_output") {
        return;
    }
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/linux");
    std::fs::create_dir_all(&dir).unwrap();
    let mut linux = LinuxPeer::boot(PeerOptions::new(
        Nic::new("52:54:00:00:01:03", free_udp_port(), free_udp_port()),
        "10.0.0.3/24",
    ))
    .unwrap();
    let save = |linux: &mut LinuxPeer, name: &str, cmd: &str| {
        let out = linux.cmd(&format!("{cmd} 2>&1")).unwrap();
        eprintln!("--- {name}: {cmd}\n{out}");
        std::fs::write(dir.join(format!("{name}.txt")), out).unwrap();
    };
    for (name, cmd) in COMMANDS {
        save(&mut linux, name, cmd);
    }
    linux.cmd("ibv_rc_pingpong -d rxe0 -g 1 > /dev/null 2>&1 &").unwrap();
    linux.cmd("rping -s -a 10.0.0.3 -p 7471 > /dev/null 2>&1 &").unwrap();
    linux.cmd("sleep 1").unwrap();
    for (name, cmd) in RESOURCE_COMMANDS {
        save(&mut linux, name, cmd);
    }
    linux.cmd("kill %1 %2; wait").unwrap();
    linux.cmd("ibv_srq_pingpong -d rxe0 -g 1 > /dev/null 2>&1 &").unwrap();
    linux.cmd("rping -s -a 0.0.0.0 -p 7472 > /dev/null 2>&1 &").unwrap();
    linux.cmd("sleep 1").unwrap();
    for (name, cmd) in SRQ_COMMANDS {
        save(&mut linux, name, cmd);
    }
    linux.cmd("kill %1 %2; wait").unwrap();
}
