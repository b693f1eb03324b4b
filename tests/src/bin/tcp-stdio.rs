//! `tcp-stdio PORT`: joins stdin and stdout to a TCP connection to
//! 127.0.0.1:PORT. QEMU's `guestfwd=...-cmd:` starts one per guest
//! connection, so each guest client reaches a fresh host listener (the
//! `-tcp:` form opens one host connection for the guest's whole life).

#![deny(unsafe_code)]

use std::io::{Read, Write};
use std::net::{Shutdown, TcpStream};
use std::process::ExitCode;
use std::time::{Duration, Instant};

fn main() -> ExitCode {
    let Some(port) = std::env::args().nth(1).and_then(|p| p.parse::<u16>().ok()) else {
        eprintln!("usage: tcp-stdio PORT");
        return ExitCode::from(2);
    };
    // The host program may still be getting ready to listen.
    let deadline = Instant::now() + Duration::from_secs(10);
    let s = loop {
        match TcpStream::connect(("127.0.0.1", port)) {
            Ok(s) => break s,
            Err(_) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(50)),
            Err(e) => {
                eprintln!("tcp-stdio: 127.0.0.1:{port}: {e}");
                return ExitCode::FAILURE;
            }
        }
    };
    let _ = s.set_nodelay(true);
    let Ok(mut to_host) = s.try_clone() else { return ExitCode::FAILURE };
    std::thread::spawn(move || {
        let _ = std::io::copy(&mut std::io::stdin().lock(), &mut to_host);
        let _ = to_host.shutdown(Shutdown::Write);
    });
    // Unbuffered both ways: perftest's messages are small and each one waits
    // for the answer.
    let mut from_host = s;
    let mut out = std::io::stdout().lock();
    let mut buf = [0u8; 4096];
    loop {
        match from_host.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                if out.write_all(&buf[..n]).and_then(|()| out.flush()).is_err() {
                    break;
                }
            }
        }
    }
    ExitCode::SUCCESS
}
