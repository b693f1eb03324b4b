//! A Linux `rdma_rxe` peer under QEMU: the Debian bookworm kernel and a small
//! initramfs (busybox, iproute2, rdma-core, perftest) that `make linux-peer`
//! (tests/linux-peer/build.sh) builds into `target/linux-peer/`.
//!
//! The guest has two NICs: eth0 on the UDP wire (the same kind of wire the
//! appliances use, so a peer can sit next to an appliance or another peer) with
//! rxe0 on top of it, and eth1 on QEMU user networking with `restrict=on`:
//! 10.254.0.15/24, reachable from the host at 127.0.0.1:`host_port` (forwarded
//! to the guest's port 18515), and reaching the host at 10.254.0.100:18515
//! (forwarded to 127.0.0.1:`guest_fwd_port`, when one is given).
//!
//! ```no_run
//! use tests::{LinuxPeer, Nic, PeerOptions, free_udp_port};
//! if !LinuxPeer::available() { return; } // not built: `make linux-peer`
//! let (p1, p2) = (free_udp_port(), free_udp_port());
//! let mut peer = LinuxPeer::boot(PeerOptions::new(Nic::new("52:54:00:00:01:03", p1, p2), "10.0.0.3/24")).unwrap();
//! peer.expect("rdma link show", "state ACTIVE").unwrap();
//! ```
//!
//! In the guest's shell a bare `ip` is iproute2's (a shell function); scripts
//! that run without the profile must call `/usr/bin/ip` (busybox's applet wins
//! over PATH there).

use crate::guest::{Guest, plain_error};
use crate::qemu::{Accel, Error, Nic, Options, qemu_command};
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// The peer's shell prompt (tests/linux-peer/init); it starts a line.
pub const PEER_PROMPT: &str = "peer# ";
/// What init prints when eth0, eth1 and rxe0 are up.
pub const PEER_READY: &str = "PEER-READY";
/// What init prints for each step that failed (before PEER-READY).
const PEER_FAILED: &str = "PEER-FAILED";
/// The guest port the management forwards use, both ways.
pub const MGMT_GUEST_PORT: u16 = 18515;
/// The guest's management address, and the host's as the guest sees it.
pub const MGMT_GUEST_IP: &str = "10.254.0.15";
pub const MGMT_HOST_IP: &str = "10.254.0.100";

/// Where the peer's kernel and initramfs are: `$LINUX_PEER_DIR`, else the
/// workspace's `target/linux-peer` (what `make linux-peer` fills).
pub fn peer_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("LINUX_PEER_DIR") {
        return PathBuf::from(d);
    }
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("tests/ lives in the workspace");
    root.join("target/linux-peer")
}

/// The peer with bookworm-backports' kernel (`PEER_KERNEL=backports
/// tests/linux-peer/build.sh`): `$LINUX_PEER_BACKPORTS_DIR`, else
/// [`peer_dir`] with `-backports` appended. Same userspace, a kernel whose rxe
/// has ATOMIC WRITE and FLUSH; only the tests of those boot it.
pub fn backports_peer_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("LINUX_PEER_BACKPORTS_DIR") {
        return PathBuf::from(d);
    }
    let mut d = peer_dir().into_os_string();
    d.push("-backports");
    PathBuf::from(d)
}

/// A free TCP port on 127.0.0.1 (for the management forwards).
pub fn free_tcp_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|s| s.local_addr())
        .map(|a| a.port())
        .expect("no free TCP port on 127.0.0.1")
}

#[derive(Clone, Debug)]
pub struct PeerOptions {
    /// eth0: the wire NIC (its model from `$APPLIANCE_NIC` unless set: the peer
    /// has Linux's virtio_net, e1000e and igb drivers).
    pub wire: Nic,
    /// eth0's address with its prefix, e.g. `10.0.0.3/24` (`peer_ip=`).
    pub ip: String,
    /// eth0's MTU (`peer_mtu=`); the device's (1500) when `None`.
    pub mtu: Option<u32>,
    /// 127.0.0.1:`host_port` on the host reaches the guest's 10.254.0.15:18515.
    pub host_port: u16,
    /// The guest's 10.254.0.100:18515 reaches 127.0.0.1:`guest_fwd_port` on the
    /// host. QEMU connects to it once, when it starts (a chardev): something
    /// must already listen there, or QEMU exits. That one host connection
    /// carries every guest connection in turn: the end of a guest connection
    /// does not close it. No such forward when `None`.
    pub guest_fwd_port: Option<u16>,
    /// Instead of `guest_fwd_port`: each guest connection to 10.254.0.100:18515
    /// starts this host command with the connection as its stdin and stdout
    /// (QEMU's `guestfwd=...-cmd:`; no commas), and its exit closes that
    /// connection: per-connection semantics, unlike the port forward.
    pub guest_fwd_cmd: Option<String>,
    /// MAC of eth1.
    pub mgmt_mac: String,
    pub memory_mib: u32,
    /// More kernel command line.
    pub append: String,
    /// Extra QEMU arguments.
    pub extra: Vec<String>,
    /// Start to the ready marker (TCG: ~15 s alone, more on a busy host).
    pub boot_timeout: Duration,
    /// Time allowed for each command (`cmd_timeout` for a longer one).
    pub cmd_timeout: Duration,
    /// Where the kernel and initramfs are: [`peer_dir`], or
    /// [`backports_peer_dir`] for the newer kernel.
    pub dir: PathBuf,
}

impl PeerOptions {
    /// A peer on `wire` with eth0 at `ip` (`A.B.C.D/N`), a free host port for
    /// the management forward and no guest forward.
    pub fn new(wire: Nic, ip: &str) -> Self {
        // eth1's MAC: the wire MAC with its second byte 0x55 (locally administered, unique per peer).
        let mut mgmt_mac = wire.mac.clone();
        mgmt_mac.replace_range(3..5, "55");
        PeerOptions {
            wire,
            ip: ip.into(),
            mtu: None,
            host_port: free_tcp_port(),
            guest_fwd_port: None,
            guest_fwd_cmd: None,
            mgmt_mac,
            memory_mib: 1024,
            append: String::new(),
            extra: Vec::new(),
            boot_timeout: Duration::from_secs(120),
            cmd_timeout: Duration::from_secs(60),
            dir: peer_dir(),
        }
    }

    /// The QEMU options: the harness's usual command line (`qemu_command`),
    /// always TCG (`/dev/kvm` here cannot boot a stock kernel), one vCPU.
    fn qemu_options(&self, dir: &std::path::Path) -> Options {
        let mut append = format!("console=ttyS0 panic=-1 peer_ip={}", self.ip);
        if let Some(mtu) = self.mtu {
            append.push_str(&format!(" peer_mtu={mtu}"));
        }
        if !self.append.is_empty() {
            append.push(' ');
            append.push_str(&self.append);
        }
        let mut user = format!(
            "user,id=m0,restrict=on,net=10.254.0.0/24,hostfwd=tcp:127.0.0.1:{}-:{MGMT_GUEST_PORT}",
            self.host_port
        );
        if let Some(cmd) = &self.guest_fwd_cmd {
            assert!(!cmd.contains(','), "QEMU's guestfwd command cannot hold a comma: {cmd}");
            user.push_str(&format!(",guestfwd=tcp:{MGMT_HOST_IP}:{MGMT_GUEST_PORT}-cmd:{cmd}"));
        } else if let Some(gp) = self.guest_fwd_port {
            user.push_str(&format!(",guestfwd=tcp:{MGMT_HOST_IP}:{MGMT_GUEST_PORT}-tcp:127.0.0.1:{gp}"));
        }
        let mut extra: Vec<String> = vec![
            "-smp".into(),
            "1".into(),
            "-initrd".into(),
            dir.join("initramfs.cpio").display().to_string(),
            "-netdev".into(),
            user,
            "-device".into(),
            format!("virtio-net-pci,netdev=m0,mac={}", self.mgmt_mac),
        ];
        extra.extend(self.extra.iter().cloned());
        Options {
            qemu: None,
            memory_mib: self.memory_mib,
            append,
            nic: Some(self.wire.clone()),
            ivshmem: None,
            accel: Accel::Tcg,
            extra,
            boot_timeout: self.boot_timeout,
            cmd_timeout: self.cmd_timeout,
        }
    }
}

/// A running Linux peer. Dropping it kills QEMU.
pub struct LinuxPeer {
    guest: Guest,
    opts: PeerOptions,
    started: Instant,
    ready_after: Option<Duration>,
}

impl LinuxPeer {
    /// Whether the kernel and initramfs are built (`make linux-peer`).
    pub fn available() -> bool {
        Self::available_in(&peer_dir())
    }

    /// Whether the kernel and initramfs in `dir` are built.
    pub fn available_in(dir: &std::path::Path) -> bool {
        dir.join("vmlinuz").is_file() && dir.join("initramfs.cpio").is_file()
    }

    /// For tests: `true` when the peer is built; otherwise prints why the
    /// test is skipped and returns `false`.
    pub fn available_or_skip(test: &str) -> bool {
        let ok = Self::available();
        if !ok {
            eprintln!(
                "SKIPPED {test}: no Linux peer image in {} (`make linux-peer` builds it; `make interop` does first)",
                peer_dir().display()
            );
        }
        ok
    }

    /// Starts QEMU and waits for init's ready marker and the first prompt.
    pub fn boot(opts: PeerOptions) -> Result<Self, Error> {
        let mut peer = Self::start(opts)?;
        peer.wait_ready()?;
        Ok(peer)
    }

    /// Starts QEMU without waiting: start several peers, then `wait_ready` on
    /// each, and they boot side by side. Start them on the thread that keeps
    /// them: QEMU gets SIGKILL when the thread that spawned it ends
    /// (`setpriv --pdeathsig`), so never in a short-lived thread.
    pub fn start(opts: PeerOptions) -> Result<Self, Error> {
        let dir = opts.dir.clone();
        if !Self::available_in(&dir) {
            return Err(plain_error(format!("no Linux peer in {} (`make linux-peer`)", dir.display())));
        }
        let qopts = opts.qemu_options(&dir);
        let started = Instant::now();
        let guest =
            Guest::spawn(qemu_command(&qopts, &dir.join("vmlinuz")), PEER_PROMPT, 40, "`make deps` installs it")?;
        Ok(LinuxPeer { guest, opts, started, ready_after: None })
    }

    /// Waits (at most the boot timeout from the start) for init's ready marker
    /// and the first prompt; fails if init reported a failed step.
    pub fn wait_ready(&mut self) -> Result<(), Error> {
        if self.ready_after.is_some() {
            return Ok(());
        }
        let timeout = self.opts.boot_timeout.saturating_sub(self.started.elapsed());
        let ready = self.guest.wait_for_text(PEER_READY, timeout)?;
        let ready_after = self.started.elapsed();
        let text = self.guest.console.text();
        if let Some(line) = text.lines().find(|l| l.starts_with(PEER_FAILED)) {
            return Err(self.guest.error(format!("init failed: {line}")));
        }
        self.guest
            .wait_prompt(ready, self.opts.cmd_timeout)
            .map_err(|e| self.guest.error(format!("no prompt after boot: {}", e.message)))?;
        self.ready_after = Some(ready_after);
        Ok(())
    }

    /// Time from starting QEMU to the ready marker (zero before `wait_ready`).
    pub fn ready_after(&self) -> Duration {
        self.ready_after.unwrap_or_default()
    }

    /// eth0's address without the prefix.
    pub fn wire_ip(&self) -> &str {
        self.opts.ip.split('/').next().unwrap_or(&self.opts.ip)
    }

    /// 127.0.0.1:`host_port()` reaches the guest's 10.254.0.15:18515.
    pub fn host_port(&self) -> u16 {
        self.opts.host_port
    }

    pub fn options(&self) -> &PeerOptions {
        &self.opts
    }

    fn error(&self, message: String) -> Error {
        self.guest.error(message)
    }

    /// Sends raw bytes to the console.
    pub fn send(&mut self, bytes: &[u8]) -> Result<(), Error> {
        self.guest.send(bytes)
    }

    /// Types a command line and returns its output (without the echo and the
    /// next prompt, `\r\n` made `\n`), allowing the default command time.
    pub fn cmd(&mut self, line: &str) -> Result<String, Error> {
        let t = self.opts.cmd_timeout;
        self.cmd_timeout(line, t)
    }

    /// `cmd` with its own time limit.
    pub fn cmd_timeout(&mut self, line: &str, timeout: Duration) -> Result<String, Error> {
        self.guest.cmd(line, timeout).map(|out| clean(&out))
    }

    /// Runs a command and checks its output contains `needle`; returns the output.
    pub fn expect(&mut self, line: &str, needle: &str) -> Result<String, Error> {
        let out = self.cmd(line)?;
        if out.contains(needle) { Ok(out) } else { Err(self.error(format!("`{line}` printed no `{needle}`:\n{out}"))) }
    }

    /// Runs a command and returns its exit status (`$?`) with its output.
    /// Past `timeout` the command is interrupted (Ctrl-C), so the shell
    /// answers the next one.
    pub fn status(&mut self, line: &str, timeout: Duration) -> Result<(i32, String), Error> {
        let out = match self.cmd_timeout(&format!("{line}; echo \"exit=$?\""), timeout) {
            Ok(out) => out,
            Err(e) => {
                self.interrupt();
                return Err(e);
            }
        };
        let status = out
            .lines()
            .rev()
            .find_map(|l| l.trim().strip_prefix("exit=").and_then(|s| s.parse().ok()))
            .ok_or_else(|| self.error(format!("`{line}`: no exit status in\n{out}")))?;
        Ok((status, out))
    }

    /// Interrupts the command running (Ctrl-C) and waits for the shell's next
    /// prompt. Typing on at once raced the shell: a line typed before the
    /// prompt came could be taken for answered by the prompt that ended the
    /// interrupted command (its output then read as empty).
    fn interrupt(&mut self) {
        let t = self.opts.cmd_timeout;
        let _ = self.guest.interrupt(t);
    }

    /// Starts `line` in the guest's background, its output in `log` and then
    /// a last line `exit=N`, its status. A subshell runs it and writes that
    /// status: the interactive shell reaps a job that ends before the next
    /// command is typed (`[1]+ Done`), after which `wait $!` no longer
    /// knows how it ended. `finish_bg` waits for it; `kill_bg` stops it.
    pub fn spawn_bg(&mut self, line: &str, log: &str) -> Result<String, Error> {
        self.cmd(&format!("{{ {line} & echo $! > {log}.pid; wait $!; echo \"exit=$?\"; }} > {log} 2>&1 &"))
    }

    /// Waits for the job `spawn_bg` started with `log`, and returns its log
    /// (ending `exit=N` once the job has ended). Past `timeout` the wait is
    /// interrupted and the job killed, so the shell answers the next command.
    pub fn finish_bg(&mut self, log: &str, timeout: Duration) -> Result<String, Error> {
        let done = self.cmd_timeout(&format!("wait $! 2>/dev/null; cat {log}"), timeout);
        if done.is_err() {
            self.interrupt();
            let _ = self.kill_bg(log);
            // The shell reports the killed job with the next prompt: let
            // that go by before the caller's next command.
            let _ = self.cmd("sleep 0.2");
        }
        done
    }

    /// Stops the job `spawn_bg` started with `log`, if it still runs.
    pub fn kill_bg(&mut self, log: &str) -> Result<String, Error> {
        self.cmd(&format!("kill $(cat {log}.pid) 2>/dev/null; wait $! 2>/dev/null; true"))
    }

    /// Waits (in the guest, bounded) until something listens on TCP `port`.
    pub fn wait_listening(&mut self, port: u16, timeout: Duration) -> Result<(), Error> {
        let tenths = timeout.as_millis() / 100;
        let line = format!(
            "i=0; until netstat -ltn | grep -q ':{port} '; do i=$((i+1)); [ $i -gt {tenths} ] && break; sleep 0.1; done; \
             netstat -ltn | grep -q ':{port} ' && echo LISTENING || echo NOT-LISTENING"
        );
        let out = self.cmd_timeout(&line, timeout + self.opts.cmd_timeout)?;
        if out.lines().any(|l| l.trim() == "LISTENING") {
            Ok(())
        } else {
            Err(self.error(format!("nothing listens on TCP port {port} in the guest after {timeout:?}:\n{out}")))
        }
    }

    /// Waits for `needle` anywhere in the console from its start.
    pub fn wait_for_text(&self, needle: &str, timeout: Duration) -> Result<(), Error> {
        self.guest.wait_for_text(needle, timeout).map(|_| ())
    }

    /// Stops the guest for `d` and lets it go on: its QEMU (started here) gets
    /// SIGSTOP, then SIGCONT, as when the host does not run its vCPU for a
    /// while. Frames sent to it meanwhile wait in its socket; it sends none.
    pub fn freeze(&self, d: Duration) -> std::io::Result<()> {
        let pid = self.guest.pid().to_string();
        let signal = |sig: &str| -> std::io::Result<()> {
            let status = std::process::Command::new("kill").args([sig, &pid]).status()?;
            if status.success() { Ok(()) } else { Err(std::io::Error::other(format!("kill {sig} {pid}: {status}"))) }
        };
        signal("-STOP")?;
        std::thread::sleep(d);
        signal("-CONT")
    }

    /// Everything the console printed so far.
    pub fn transcript(&self) -> String {
        self.guest.console.text()
    }
}

/// Position of the first peer prompt that starts a line (or the text).
#[cfg(test)]
fn find_peer_prompt(hay: &[u8]) -> Option<usize> {
    crate::console::find_prompt_of(hay, PEER_PROMPT)
}

/// Drops the cursor-position queries (`ESC [6n`) busybox's line editor sends
/// after each prompt.
fn clean(text: &str) -> String {
    text.replace("\x1b[6n", "")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prompt_starts_a_line() {
        assert_eq!(find_peer_prompt(b"peer# "), Some(0));
        assert_eq!(find_peer_prompt(b"x peer# \r\npeer# \x1b[6n"), Some(10));
        assert_eq!(find_peer_prompt(b"no prompt"), None);
    }

    #[test]
    fn options_make_both_nics_and_the_command_line() {
        let mut o = PeerOptions::new(Nic::new("52:54:00:00:01:03", 1000, 1001), "10.0.0.3/24");
        o.host_port = 2000;
        o.guest_fwd_port = Some(2001);
        o.mtu = Some(4200);
        assert_eq!(o.mgmt_mac, "52:55:00:00:01:03");
        let q = o.qemu_options(std::path::Path::new("/p"));
        assert_eq!(q.append, "console=ttyS0 panic=-1 peer_ip=10.0.0.3/24 peer_mtu=4200");
        assert_eq!(q.accel, Accel::Tcg);
        let extra = q.extra.join(" ");
        assert!(extra.contains("-initrd /p/initramfs.cpio"), "{extra}");
        assert!(
            extra.contains(
                "user,id=m0,restrict=on,net=10.254.0.0/24,hostfwd=tcp:127.0.0.1:2000-:18515,\
                 guestfwd=tcp:10.254.0.100:18515-tcp:127.0.0.1:2001"
            ),
            "{extra}"
        );
        assert!(extra.contains("virtio-net-pci,netdev=m0,mac=52:55:00:00:01:03"), "{extra}");
        o.guest_fwd_cmd = Some("cat".into());
        let extra = o.qemu_options(std::path::Path::new("/p")).extra.join(" ");
        assert!(extra.contains(",guestfwd=tcp:10.254.0.100:18515-cmd:cat -device"), "{extra}");
    }
}
