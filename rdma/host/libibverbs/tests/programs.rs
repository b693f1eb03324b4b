//! Debian's unmodified ibverbs-utils and perftest binaries over our
//! libibverbs.so.1, against two host-simulated appliances.

mod common;

use common::{Pair, free_port, program};

fn run(c: &mut std::process::Command) -> (bool, String) {
    let out = c.output().unwrap();
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    (out.status.success(), text)
}

#[test]
fn ibv_devices_and_ibv_devinfo() {
    let pair = Pair::start();
    let (ok, text) = run(&mut program("/usr/bin/ibv_devices", &pair.rings[0]));
    assert!(ok, "{text}");
    assert!(text.contains("rxe0"), "{text}");
    let (ok, text) = run(&mut program("/usr/bin/ibv_devinfo", &pair.rings[0]));
    assert!(ok, "{text}");
    println!("{text}");
    assert!(text.contains("hca_id:\trxe0"), "{text}");
    assert!(text.contains("PORT_ACTIVE"), "{text}");
}

#[test]
fn ibv_rc_pingpong_between_two_appliances() {
    let pair = Pair::start();
    let port = free_port().to_string();
    let args = ["-g", "1", "-n", "100", "-p", &port];
    let server = program("/usr/bin/ibv_rc_pingpong", &pair.rings[0]).args(args).spawn().unwrap();
    std::thread::sleep(std::time::Duration::from_millis(300));
    let (ok, text) = run(program("/usr/bin/ibv_rc_pingpong", &pair.rings[1]).args(args).arg("127.0.0.1"));
    let s = server.wait_with_output().unwrap();
    let stext = format!("{}{}", String::from_utf8_lossy(&s.stdout), String::from_utf8_lossy(&s.stderr));
    assert!(ok && s.status.success(), "client: {text}\nserver: {stext}");
    assert!(text.contains("100 iters in"), "{text}");
}
