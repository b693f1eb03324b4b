//! An Ethernet switch for N-node tests: a `vde_switch` (Debian's vde2) whose
//! socket directory QEMU's `-netdev vde` NICs plug into. Every frame stays on
//! this machine (the switch is a process with Unix sockets, no tap device).
//! Dropping the switch stops the process it started and removes its sockets.

use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::{Duration, Instant};

pub struct VdeSwitch {
    /// The socket directory NICs name (`-netdev vde,sock=`).
    pub dir: PathBuf,
    child: Child,
    /// Held open: the switch reads commands from its stdin and exits at EOF.
    _console: ChildStdin,
}

impl VdeSwitch {
    /// Whether `vde_switch` is installed (`make deps-vde`).
    pub fn available() -> bool {
        Command::new("vde_switch").arg("--version").stdout(Stdio::null()).stderr(Stdio::null()).status().is_ok()
    }

    /// Starts a switch with `ports` ports, unique to this process and `tag`.
    pub fn start(tag: &str, ports: u32) -> std::io::Result<Self> {
        let dir = PathBuf::from(format!("/tmp/roce-vde-{}-{tag}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let mut child = Command::new("vde_switch")
            .arg("--sock")
            .arg(&dir)
            .args(["--numports", &ports.to_string()])
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()?;
        let console = child.stdin.take().ok_or_else(|| std::io::Error::other("vde_switch: no stdin"))?;
        let switch = VdeSwitch { dir, child, _console: console };
        // Ready once its control socket exists; bounded.
        let deadline = Instant::now() + Duration::from_secs(30);
        while !switch.dir.join("ctl").exists() {
            if Instant::now() > deadline {
                return Err(std::io::Error::other(format!("vde_switch made no {}/ctl", switch.dir.display())));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(switch)
    }
}

impl Drop for VdeSwitch {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
