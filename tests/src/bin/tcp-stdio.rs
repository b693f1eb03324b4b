//! `tcp-stdio PORT`: joins stdin and stdout to a TCP connection to
//! 127.0.0.1:PORT. QEMU's `guestfwd=...-cmd:` starts one per guest
//! connection, so each guest client reaches a fresh host listener (the
//! `-tcp:` form opens one host connection for the guest's whole life).
//!
//! What arrives in one read goes on in one write, both ways. perftest reads
//! each exchange message with a single `read()` and fails on a short one
//! ("ethernet_read_data: Couldn't read reports"), so a message must reach
//! the guest in one TCP segment. Rust's `Stdout` is line-buffered: it
//! writes up to a newline, then the rest, so an 8-byte report holding a
//! 0x0a byte went out as two segments, and a Linux client failed the run.
//! Hence the descriptors themselves (duplicated, unbuffered), not
//! `std::io::stdin()`/`stdout()`.

#![deny(unsafe_code)]

use std::fs::File;
use std::io::{Read, Write};
use std::net::{Shutdown, TcpStream};
use std::os::fd::AsFd;
use std::process::ExitCode;
use std::time::{Duration, Instant};

fn main() -> ExitCode {
    let Some(port) = std::env::args().nth(1).and_then(|p| p.parse::<u16>().ok()) else {
        eprintln!("usage: tcp-stdio PORT");
        return ExitCode::from(2);
    };
    let (Ok(stdin), Ok(stdout)) =
        (std::io::stdin().as_fd().try_clone_to_owned(), std::io::stdout().as_fd().try_clone_to_owned())
    else {
        eprintln!("tcp-stdio: cannot duplicate stdin and stdout");
        return ExitCode::FAILURE;
    };
    let (mut stdin, mut stdout) = (File::from(stdin), File::from(stdout));
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
    // Each message the host program writes goes out at once.
    let _ = s.set_nodelay(true);
    let Ok(mut to_host) = s.try_clone() else { return ExitCode::FAILURE };
    std::thread::spawn(move || {
        relay(&mut stdin, &mut to_host);
        let _ = to_host.shutdown(Shutdown::Write);
    });
    let mut from_host = s;
    relay(&mut from_host, &mut stdout);
    ExitCode::SUCCESS
}

/// Copies `from` to `to` until end of file or an error, each read passed on
/// in one `write_all` (unbuffered: a message is never held back or split here).
fn relay(from: &mut impl Read, to: &mut impl Write) {
    let mut buf = [0u8; 4096];
    loop {
        match from.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                if buf.get(..n).is_none_or(|b| to.write_all(b).is_err()) {
                    break;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A writer that records each write call.
    #[derive(Default)]
    struct Writes(Vec<Vec<u8>>);

    impl Write for Writes {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0.push(b.to_vec());
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_read_holding_a_newline_goes_on_in_one_write() {
        // An 8-byte perftest report field (a big-endian f64) with 0x0a inside.
        let report: &[u8] = &[0x40, 0x20, 0x0a, 0x01, 0x82, 0x3d, 0xb6, 0x85];
        let mut out = Writes::default();
        relay(&mut &report[..], &mut out);
        assert_eq!(out.0, vec![report.to_vec()]);
    }
}
