//! Host tools of the `verbs` crate (`write_bw`, `rc_pingpong`, ...) run on
//! an appliance's ring, as the tests and benchmarks drive them: started with
//! their output captured, waited for with a limit, killed past it; or
//! [`Watched`], their output read line by line as it comes, each line with
//! the time it arrived, for tests that check what happened before what.

use std::io::Read;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::verbs_tool;

/// Starts tool `name` on `ring` with `args` (split on whitespace).
pub fn spawn(name: &str, ring: &Path, args: &str) -> std::io::Result<Child> {
    Command::new(verbs_tool(name))
        .arg("--ring")
        .arg(ring)
        .args(args.split_whitespace())
        .env_remove("RDMA_RING")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
}

/// Starts Debian's unmodified `/usr/bin/<prog>` with `args` over our
/// `libibverbs.so.1`/`librdmacm.so.1` ([`crate::abi_dir`]) on `ring`.
pub fn spawn_unmodified(prog: &str, ring: &Path, args: &str) -> std::io::Result<Child> {
    Command::new(Path::new("/usr/bin").join(prog))
        .args(args.split_whitespace())
        .env("LD_LIBRARY_PATH", crate::abi_dir())
        .env("RDMA_RING", ring)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
}

/// A program that is killed when this is dropped, also when the test that
/// started it panics, so a failed test leaves no server behind.
pub struct KillOnDrop(pub Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Waits until a host socket listens on TCP `port` (any address; read from
/// `/proc/net/tcp{,6}`, so no probe connection reaches a server that accepts
/// only one), at most `limit`; whether it did.
pub fn wait_listening(port: u16, limit: Duration) -> bool {
    let start = Instant::now();
    while start.elapsed() < limit {
        if ["/proc/net/tcp", "/proc/net/tcp6"]
            .iter()
            .any(|f| std::fs::read_to_string(f).is_ok_and(|t| listens(&t, port)))
        {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    false
}

/// Whether a `/proc/net/tcp` table has a LISTEN (state 0A) socket on `port`.
fn listens(table: &str, port: u16) -> bool {
    table.lines().skip(1).any(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        let local_port = f.get(1).and_then(|a| a.rsplit(':').next()).and_then(|p| u16::from_str_radix(p, 16).ok());
        local_port == Some(port) && f.get(3) == Some(&"0A")
    })
}

/// Waits for `child` at most `limit`: whether it succeeded (a tool still
/// running then is killed and did not), and its stdout followed by stderr.
pub fn finish(mut child: Child, limit: Duration) -> std::io::Result<(bool, String)> {
    let start = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait()? {
            break Some(s);
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut out = String::new();
    if let Some(mut o) = child.stdout.take() {
        o.read_to_string(&mut out)?;
    }
    if let Some(mut e) = child.stderr.take() {
        e.read_to_string(&mut out)?;
    }
    Ok((status.is_some_and(|s| s.success()), out))
}

/// The lines a [`Watched`] tool printed so far, each with when it arrived,
/// and how many of its two pipes are still open.
#[derive(Default)]
struct Lines {
    seen: Vec<(Instant, String)>,
    open: usize,
}

/// A host tool whose stdout and stderr are read as they come, split into
/// lines at `\n` and `\r` (progress lines end in `\r`). Dropping it kills
/// the tool.
pub struct Watched {
    child: Child,
    lines: Arc<(Mutex<Lines>, Condvar)>,
    readers: Vec<JoinHandle<()>>,
}

impl Watched {
    /// Starts tool `name` on `ring` with `args` (split on whitespace).
    pub fn spawn(name: &str, ring: &Path, args: &str) -> std::io::Result<Watched> {
        let mut child = spawn(name, ring, args)?;
        let lines = Arc::new((Mutex::new(Lines { seen: Vec::new(), open: 2 }), Condvar::new()));
        let mut readers = Vec::new();
        let pipes: [Option<Box<dyn Read + Send>>; 2] = [
            child.stdout.take().map(|o| Box::new(o) as Box<dyn Read + Send>),
            child.stderr.take().map(|e| Box::new(e) as Box<dyn Read + Send>),
        ];
        for pipe in pipes {
            let lines = Arc::clone(&lines);
            readers.push(std::thread::spawn(move || follow(pipe, &lines)));
        }
        Ok(Watched { child, lines, readers })
    }

    /// When the first line containing `needle` arrived, waiting for it at
    /// most `limit` (`None`: not within `limit`, or the tool closed its
    /// output without printing it).
    pub fn wait_line(&self, needle: &str, limit: Duration) -> Option<Instant> {
        let (lock, cond) = &*self.lines;
        let deadline = Instant::now() + limit;
        let mut l = lock.lock().unwrap_or_else(PoisonError::into_inner);
        loop {
            if let Some((t, _)) = l.seen.iter().find(|(_, s)| s.contains(needle)) {
                return Some(*t);
            }
            let now = Instant::now();
            if l.open == 0 || now >= deadline {
                return None;
            }
            l = cond.wait_timeout(l, deadline - now).unwrap_or_else(PoisonError::into_inner).0;
        }
    }

    /// The tool's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Everything printed so far, one line each.
    pub fn text(&self) -> String {
        let l = self.lines.0.lock().unwrap_or_else(PoisonError::into_inner);
        l.seen.iter().map(|(_, s)| format!("{s}\n")).collect()
    }

    /// Waits for the tool at most `limit` (killing it past that): whether it
    /// succeeded, and everything it printed.
    pub fn finish(mut self, limit: Duration) -> std::io::Result<(bool, String)> {
        let start = Instant::now();
        let status = loop {
            if let Some(s) = self.child.try_wait()? {
                break Some(s);
            }
            if start.elapsed() > limit {
                let _ = self.child.kill();
                let _ = self.child.wait();
                break None;
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        for r in self.readers.drain(..) {
            let _ = r.join();
        }
        Ok((status.is_some_and(|s| s.success()), self.text()))
    }
}

impl Drop for Watched {
    fn drop(&mut self) {
        // Only a tool not finished yet is still running here.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Reads `pipe` to its end into `lines`, a line at a time.
fn follow(pipe: Option<Box<dyn Read + Send>>, lines: &(Mutex<Lines>, Condvar)) {
    let (lock, cond) = lines;
    let mut partial = Vec::new();
    let mut buf = [0u8; 4096];
    let push = |bytes: &mut Vec<u8>| {
        if !bytes.is_empty() {
            let s = String::from_utf8_lossy(bytes).into_owned();
            lock.lock().unwrap_or_else(PoisonError::into_inner).seen.push((Instant::now(), s));
            cond.notify_all();
        }
        bytes.clear();
    };
    if let Some(mut pipe) = pipe {
        while let Ok(n @ 1..) = pipe.read(&mut buf) {
            for &b in &buf[..n] {
                if b == b'\n' || b == b'\r' {
                    push(&mut partial);
                } else {
                    partial.push(b);
                }
            }
        }
    }
    push(&mut partial);
    lock.lock().unwrap_or_else(PoisonError::into_inner).open -= 1;
    cond.notify_all();
}

#[cfg(test)]
mod tests {
    #[test]
    fn listening_sockets_are_found_by_port() {
        let table = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n\
           0: 0100007F:4A3B 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1\n\
           1: 0100007F:1F90 0100007F:C350 01 00000000:00000000 00:00000000 00000000     0        0 2\n";
        assert!(super::listens(table, 0x4A3B));
        assert!(!super::listens(table, 0x1F90), "an established socket is not a listener");
        assert!(!super::listens(table, 1));
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        assert!(super::wait_listening(port, std::time::Duration::from_secs(5)));
    }
}
