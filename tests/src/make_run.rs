//! `make boot` (what `make run` does after building) under a pseudo-terminal,
//! as a user at a terminal runs it: `script` gives make, the shell and QEMU a
//! pty, so the terminal's own handling (Ctrl-C, raw mode) is what is tested.
//!
//! ```no_run
//! use tests::MakeRun;
//! let mut run = MakeRun::start(&MakeRun::args(1, 47100, "/dev/shm/roce-doc-1")).unwrap();
//! run.wait_prompt().unwrap();
//! run.cmd("version").unwrap();
//! ```

use crate::console::PROMPT;
use crate::guest::{Guest, plain_error};
use crate::qemu::Error;
use std::path::PathBuf;
use std::process::{Command, ExitStatus};
use std::time::Duration;

/// Time allowed for the boot and for each command.
const TIMEOUT: Duration = Duration::from_secs(120);

/// One `make boot` under `script`. Dropping it kills the QEMU this run
/// started (by its PID, found among `script`'s descendants: QEMU outlives the
/// pty's hangup), then `script`.
/// The ring file is the caller's to remove (several runs may name the same one).
pub struct MakeRun {
    guest: Guest,
    ring: PathBuf,
}

impl MakeRun {
    /// `make boot`'s variables for node `node` with a ring file of its own and
    /// the wire's ports at `port_base` + node and + peer, booting the image
    /// under test.
    pub fn args(node: u8, port_base: u16, ring: &str) -> Vec<String> {
        vec![
            format!("NODE={node}"),
            format!("PORT_BASE={port_base}"),
            format!("RING={ring}"),
            format!("PORT_LOCK={ring}.udp.lock"),
            format!("IMAGE={}", crate::image().display()),
            "MEM=256M".into(),
            "RING_SIZE=16M".into(),
        ]
    }

    /// Starts `make -s boot ARGS...` in the workspace under a pty.
    pub fn start(args: &[String]) -> Result<Self, Error> {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("tests/ lives in the workspace");
        let ring = args
            .iter()
            .find_map(|a| a.strip_prefix("RING="))
            .map(PathBuf::from)
            .ok_or_else(|| plain_error("MakeRun::start needs RING=".into()))?;
        // One word per argument: none of ours holds a quote or a space.
        let line = format!("make -s -C {} boot {}", root.display(), args.join(" "));
        let mut cmd = Command::new("script");
        cmd.args(["-q", "-f", "-e", "-c", &line, "/dev/null"]);
        let guest = Guest::spawn(cmd, PROMPT, 30, "`make deps` installs QEMU; `script` is util-linux's")?;
        Ok(MakeRun { guest, ring })
    }

    /// Waits for the first prompt.
    pub fn wait_prompt(&self) -> Result<(), Error> {
        self.guest.wait_prompt(0, TIMEOUT).map(|_| ())
    }

    /// Types a line; its output without the echo and the next prompt, line
    /// ends made `\n` (the pty adds a `\r` of its own).
    pub fn cmd(&mut self, line: &str) -> Result<String, Error> {
        self.guest.cmd(line, TIMEOUT).map(|out| out.replace('\r', ""))
    }

    /// Sends raw bytes, as keys typed.
    pub fn send(&mut self, bytes: &[u8]) -> Result<(), Error> {
        self.guest.send(bytes)
    }

    /// Types Ctrl-C; what the terminal showed until the next prompt.
    pub fn interrupt(&mut self) -> Result<String, Error> {
        self.guest.interrupt(TIMEOUT).map(|out| out.replace('\r', ""))
    }

    /// Waits for `needle` anywhere in what the terminal showed.
    pub fn wait_for_text(&self, needle: &str) -> Result<(), Error> {
        self.guest.wait_for_text(needle, TIMEOUT).map(|_| ())
    }

    /// Everything the terminal showed, line ends made `\n`.
    pub fn transcript(&self) -> String {
        self.guest.console.text().replace('\r', "")
    }

    /// Waits for make to exit; its status.
    pub fn wait_exit(&mut self, timeout: Duration) -> Result<ExitStatus, Error> {
        self.guest.wait_exit(timeout)
    }

    /// The ring file `make` was given.
    pub fn ring(&self) -> &std::path::Path {
        &self.ring
    }
}

impl Drop for MakeRun {
    fn drop(&mut self) {
        for pid in qemus_under(self.guest.pid()) {
            let _ = Command::new("kill").args(["-KILL", &pid.to_string()]).status();
        }
    }
}

/// The QEMU processes descending from process `root`.
fn qemus_under(root: u32) -> Vec<u32> {
    let Ok(dir) = std::fs::read_dir("/proc") else { return Vec::new() };
    let pids: Vec<u32> = dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok()).collect();
    // Parent of each process, from /proc/PID/stat's fourth field (after the
    // parenthesised command name, which may hold spaces).
    let parent = |pid: u32| -> Option<u32> {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        stat.rsplit_once(')')?.1.split_whitespace().nth(1)?.parse().ok()
    };
    let descends = |mut pid: u32| {
        for _ in 0..64 {
            match parent(pid) {
                Some(p) if p == root => return true,
                Some(p) if p > 1 => pid = p,
                _ => return false,
            }
        }
        false
    };
    pids.into_iter()
        .filter(|&pid| {
            let exe = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            exe.split(|&b| b == 0).next().is_some_and(|a| a.ends_with(b"qemu-system-x86_64")) && descends(pid)
        })
        .collect()
}
