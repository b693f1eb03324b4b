//! `ivshmem-server --shm FILE [--size BYTES] [--socket PATH] [--vectors N]`:
//! serves the verbs ring's file to an appliance's `ivshmem-doorbell` device
//! and to the host programs that use the ring (QEMU's ivshmem server
//! protocol; `make run` starts one per appliance). The socket defaults to
//! `FILE.sock`; `--size` creates or resizes the file first. Runs until
//! killed; the socket is removed on SIGTERM's default exit by `make run`,
//! and a stale one is replaced at the next start.

use std::path::PathBuf;
use std::process::ExitCode;

fn usage() -> ExitCode {
    eprintln!("usage: ivshmem-server --shm FILE [--size BYTES] [--socket PATH] [--vectors N]");
    ExitCode::from(2)
}

/// `64M`, `1G`, `4096`.
fn size(s: &str) -> Option<u64> {
    let (n, mul) = match s.as_bytes().last()? {
        b'K' | b'k' => (&s[..s.len() - 1], 1 << 10),
        b'M' | b'm' => (&s[..s.len() - 1], 1 << 20),
        b'G' | b'g' => (&s[..s.len() - 1], 1 << 30),
        _ => (s, 1),
    };
    n.parse::<u64>().ok()?.checked_mul(mul)
}

fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let (mut shm, mut socket, mut len, mut vectors) = (None, None, None, 1u16);
    while let Some(a) = args.next() {
        let Some(v) = args.next() else { return usage() };
        match a.as_str() {
            "--shm" => shm = Some(PathBuf::from(v)),
            "--socket" => socket = Some(PathBuf::from(v)),
            "--size" => match size(&v) {
                Some(n) => len = Some(n),
                None => return usage(),
            },
            "--vectors" => match v.parse() {
                Ok(n) if n > 0 => vectors = n,
                _ => return usage(),
            },
            _ => return usage(),
        }
    }
    let Some(shm) = shm else { return usage() };
    let socket = socket.unwrap_or_else(|| ivshmem::socket_for(&shm));
    let file = match std::fs::File::options().read(true).write(true).create(len.is_some()).truncate(false).open(&shm) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("ivshmem-server: {}: {e}", shm.display());
            return ExitCode::FAILURE;
        }
    };
    if let Some(n) = len
        && let Err(e) = file.set_len(n)
    {
        eprintln!("ivshmem-server: cannot size {} to {n} bytes: {e}", shm.display());
        return ExitCode::FAILURE;
    }
    let mut server = match ivshmem::Server::bind(&socket, file, vectors) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("ivshmem-server: {}: {e}", socket.display());
            return ExitCode::FAILURE;
        }
    };
    match server.run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("ivshmem-server: {e}");
            ExitCode::FAILURE
        }
    }
}
