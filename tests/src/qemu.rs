//! Starting and stopping one appliance under QEMU.

use crate::console::{Transcript, find_after, find_prompt};
use std::fmt;
use std::io::Write;
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// How QEMU runs the guest.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Accel {
    /// Software emulation, one thread: works everywhere, the default.
    Tcg,
    /// KVM (paravirtual here): faster when usable.
    Kvm,
}

impl Accel {
    /// `$APPLIANCE_ACCEL` (`tcg` or `kvm`), TCG when unset.
    pub fn from_env() -> Self {
        match std::env::var("APPLIANCE_ACCEL").as_deref() {
            Ok("kvm") => Accel::Kvm,
            _ => Accel::Tcg,
        }
    }
}

/// A virtio-net NIC on a point-to-point UDP wire over 127.0.0.1.
#[derive(Clone, Debug)]
pub struct Nic {
    pub mac: String,
    /// Our end of the wire.
    pub local_port: u16,
    /// The peer's end.
    pub peer_port: u16,
    /// MTU the device advertises (virtio's `host_mtu`); 1500 when `None`.
    pub host_mtu: Option<u32>,
}

impl Nic {
    /// A NIC with the default MTU.
    pub fn new(mac: &str, local_port: u16, peer_port: u16) -> Self {
        Nic { mac: mac.into(), local_port, peer_port, host_mtu: None }
    }
}

/// An ivshmem-plain device backed by a file in /dev/shm, created (sized) before
/// QEMU starts and removed when the appliance is dropped.
#[derive(Clone, Debug)]
pub struct Ivshmem {
    pub path: PathBuf,
    pub size: u64,
}

impl Ivshmem {
    /// A unique file name for this process and tag.
    pub fn temp(tag: &str, size: u64) -> Self {
        Ivshmem { path: PathBuf::from(format!("/dev/shm/roce-test-{}-{tag}", std::process::id())), size }
    }
}

#[derive(Clone, Debug)]
pub struct Options {
    pub memory_mib: u32,
    /// The kernel command line (`-append`).
    pub append: String,
    pub nic: Option<Nic>,
    pub ivshmem: Option<Ivshmem>,
    pub accel: Accel,
    /// Extra QEMU arguments.
    pub extra: Vec<String>,
    /// Time allowed from start to the first prompt (TCG is slow on busy hosts).
    pub boot_timeout: Duration,
    /// Time allowed for each command.
    pub cmd_timeout: Duration,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            memory_mib: 256,
            append: String::new(),
            nic: None,
            ivshmem: None,
            accel: Accel::from_env(),
            extra: Vec::new(),
            boot_timeout: Duration::from_secs(60),
            cmd_timeout: Duration::from_secs(30),
        }
    }
}

/// How the guest ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Exit {
    /// ACPI power-off after the firmware said so (QEMU status 0).
    PoweredOff,
    /// The firmware stopped itself on a panic or CPU exception (status 3).
    Failed,
    /// QEMU status 0 without a power-off message: a reset (triple fault).
    Reset,
    /// Anything else: QEMU's own error, a signal.
    Other(Option<i32>),
}

/// A harness error, with the end of the console for context.
pub struct Error {
    pub message: String,
    pub console_tail: String,
}

impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}\n--- console (last lines) ---\n{}\n---", self.message, self.console_tail)
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

impl std::error::Error for Error {}

/// A command started with [`Appliance::start_cmd`] that has not finished yet.
#[must_use]
pub struct Running {
    from: usize,
}

/// A running appliance. Dropping it kills QEMU.
pub struct Appliance {
    child: Child,
    stdin: Option<ChildStdin>,
    console: Transcript,
    stderr: Transcript,
    opts: Options,
    status: Option<ExitStatus>,
}

const EXIT_FAILED: i32 = 3; // isa-debug-exit: (1 << 1) | 1

impl Appliance {
    /// Starts QEMU and waits for the first prompt.
    pub fn boot(opts: Options) -> Result<Self, Error> {
        let a = Self::start(opts)?;
        a.wait_prompt(0, a.opts.boot_timeout).map_err(|e| a.error(format!("no prompt after boot: {}", e.message)))?;
        Ok(a)
    }

    /// Starts QEMU without waiting for anything.
    pub fn start(opts: Options) -> Result<Self, Error> {
        if let Some(shm) = &opts.ivshmem {
            std::fs::File::create(&shm.path)
                .and_then(|f| f.set_len(shm.size))
                .map_err(|e| plain_error(format!("cannot create {}: {e}", shm.path.display())))?;
        }
        let mut cmd = qemu_command(&opts, crate::image());
        cmd.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped());
        let mut child = cmd
            .spawn()
            .map_err(|e| plain_error(format!("cannot start qemu-system-x86_64 ({e}); `make test` installs it")))?;
        let console = Transcript::default();
        let stderr = Transcript::default();
        if let Some(out) = child.stdout.take() {
            console.follow(out);
        }
        if let Some(err) = child.stderr.take() {
            stderr.follow(err);
        }
        let stdin = child.stdin.take();
        Ok(Appliance { child, stdin, console, stderr, opts, status: None })
    }

    fn error(&self, message: String) -> Error {
        let text = self.console.text();
        let lines: Vec<&str> = text.lines().collect();
        let mut tail = lines[lines.len().saturating_sub(30)..].join("\n");
        let err = self.stderr.text();
        if !err.trim().is_empty() {
            tail.push_str("\n--- qemu stderr ---\n");
            tail.push_str(err.trim());
        }
        Error { message, console_tail: tail }
    }

    fn wait_prompt(&self, from: usize, timeout: Duration) -> Result<usize, Error> {
        self.console
            .wait_for(from, timeout, find_prompt)
            .map(|p| from + p)
            .ok_or_else(|| self.error(format!("no prompt within {timeout:?}")))
    }

    /// Sends raw bytes to the console.
    pub fn send(&mut self, bytes: &[u8]) -> Result<(), Error> {
        let r = match self.stdin.as_mut() {
            Some(s) => s.write_all(bytes).and_then(|_| s.flush()),
            None => Err(std::io::Error::other("console input closed")),
        };
        r.map_err(|e| self.error(format!("cannot write to the console: {e}")))
    }

    /// Types a command line and returns its output (without the echo and the
    /// next prompt, `\r\n` made `\n`).
    pub fn cmd(&mut self, line: &str) -> Result<String, Error> {
        let start = self.console.len();
        self.send(line.as_bytes())?;
        self.send(b"\r")?;
        let timeout = self.opts.cmd_timeout;
        let body = self
            .console
            .wait_for(start, timeout, |b| find_after(b, b"\r\n"))
            .ok_or_else(|| self.error(format!("no echo of `{line}`")))?;
        let end =
            self.wait_prompt(start + body, timeout).map_err(|e| self.error(format!("`{line}`: {}", e.message)))?;
        let text = self.console.text_between(start + body, end);
        Ok(text)
    }

    /// Runs a command and checks its output contains `needle`; returns the output.
    pub fn expect(&mut self, line: &str, needle: &str) -> Result<String, Error> {
        let out = self.cmd(line)?;
        if out.contains(needle) { Ok(out) } else { Err(self.error(format!("`{line}` printed no `{needle}`:\n{out}"))) }
    }

    /// Types a command that keeps running (a server) and returns once its
    /// output shows `needle`, without waiting for the prompt.
    pub fn start_cmd(&mut self, line: &str, needle: &str) -> Result<Running, Error> {
        let from = self.console.len();
        self.send(line.as_bytes())?;
        self.send(b"\r")?;
        let timeout = self.opts.cmd_timeout;
        self.console
            .wait_for(from, timeout, |b| find_after(b, needle.as_bytes()))
            .map(|_| Running { from })
            .ok_or_else(|| self.error(format!("`{line}` printed no `{needle}` within {timeout:?}")))
    }

    /// Waits for the prompt that ends a command started with
    /// [`Appliance::start_cmd`]; returns what it printed (echo included).
    pub fn finish_cmd(&mut self, running: Running) -> Result<String, Error> {
        let timeout = self.opts.cmd_timeout;
        // Skip the prompt the command was typed at: the one that ends it comes
        // after the echoed line.
        let body = self
            .console
            .wait_for(running.from, timeout, |b| find_after(b, b"\r\n"))
            .ok_or_else(|| self.error("no echo".into()))?;
        let end = self.wait_prompt(running.from + body, timeout)?;
        Ok(self.console.text_between(running.from + body, end))
    }

    /// Waits for `needle` anywhere in the console from its start.
    pub fn wait_for_text(&self, needle: &str, timeout: Duration) -> Result<(), Error> {
        self.console
            .wait_for(0, timeout, |b| find_after(b, needle.as_bytes()))
            .map(|_| ())
            .ok_or_else(|| self.error(format!("no `{needle}` within {timeout:?}")))
    }

    /// Everything the console printed so far.
    pub fn transcript(&self) -> String {
        self.console.text()
    }

    /// Waits for QEMU to exit and classifies how the guest ended.
    pub fn wait_exit(&mut self, timeout: Duration) -> Result<Exit, Error> {
        let deadline = Instant::now() + timeout;
        let status = loop {
            match self.child.try_wait() {
                Ok(Some(s)) => break s,
                Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(20)),
                Ok(None) => return Err(self.error(format!("QEMU still running after {timeout:?}"))),
                Err(e) => return Err(self.error(format!("cannot wait for QEMU: {e}"))),
            }
        };
        self.status = Some(status);
        // Let the reader thread drain what QEMU wrote last.
        let _ = self.console.wait_for(0, Duration::from_secs(2), |_| None::<()>);
        Ok(match status.code() {
            Some(0) if self.transcript().contains("Powering off.") => Exit::PoweredOff,
            Some(0) => Exit::Reset,
            Some(EXIT_FAILED) => Exit::Failed,
            other => Exit::Other(other),
        })
    }

    /// Types `shutdown` and waits for QEMU to exit.
    pub fn shutdown(mut self) -> Result<Exit, Error> {
        self.send(b"shutdown\r")?;
        let t = self.opts.cmd_timeout;
        self.wait_exit(t)
    }
}

impl Drop for Appliance {
    fn drop(&mut self) {
        if self.status.is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
        if let Some(shm) = &self.opts.ivshmem {
            let _ = std::fs::remove_file(&shm.path);
        }
    }
}

fn plain_error(message: String) -> Error {
    Error { message, console_tail: String::new() }
}

/// `setpriv --pdeathsig KILL` makes the kernel kill QEMU if the test process
/// dies without running destructors (SIGKILL, abort).
fn setpriv() -> Option<&'static str> {
    static FOUND: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    let found = *FOUND.get_or_init(|| {
        Command::new("setpriv").arg("--help").stdout(Stdio::null()).stderr(Stdio::null()).status().is_ok()
    });
    found.then_some("setpriv")
}

/// The QEMU command line for `opts`; the same one `make run` uses.
pub fn qemu_command(opts: &Options, image: &std::path::Path) -> Command {
    let mut cmd = match setpriv() {
        Some(sp) => {
            let mut c = Command::new(sp);
            c.args(["--pdeathsig", "KILL", "qemu-system-x86_64"]);
            c
        }
        None => Command::new("qemu-system-x86_64"),
    };
    cmd.args(["-nodefaults", "-display", "none", "-no-reboot", "-serial", "stdio", "-monitor", "none"]);
    cmd.args(["-device", "isa-debug-exit,iobase=0xf4,iosize=0x04"]);
    cmd.args(["-m", &format!("{}M", opts.memory_mib)]);
    match opts.accel {
        Accel::Tcg => cmd.args(["-accel", "tcg,thread=single"]),
        Accel::Kvm => cmd.args(["-accel", "kvm"]),
    };
    if let Some(nic) = &opts.nic {
        cmd.args([
            "-netdev",
            &format!("socket,id=n0,udp=127.0.0.1:{},localaddr=127.0.0.1:{}", nic.peer_port, nic.local_port),
            "-device",
            &format!(
                "virtio-net-pci,netdev=n0,mac={}{}",
                nic.mac,
                nic.host_mtu.map_or(String::new(), |m| format!(",host_mtu={m}"))
            ),
        ]);
    }
    if let Some(shm) = &opts.ivshmem {
        cmd.args([
            "-object",
            &format!("memory-backend-file,id=shm,mem-path={},size={},share=on", shm.path.display(), shm.size),
            "-device",
            "ivshmem-plain,memdev=shm",
        ]);
    }
    cmd.arg("-kernel").arg(image);
    if !opts.append.is_empty() {
        cmd.args(["-append", &opts.append]);
    }
    cmd.args(&opts.extra);
    cmd
}
