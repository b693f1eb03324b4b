//! Starting and stopping one appliance under QEMU.

use crate::console::PROMPT;
use crate::guest::{Guest, Running, plain_error};
use std::fmt;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

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

/// The NIC model QEMU emulates for an appliance.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NicModel {
    /// `virtio-net-pci`: the default.
    Virtio,
    /// `e1000e`, the Intel 82574L.
    E1000e,
    /// `igb`, the Intel 82576 (QEMU 8.0 and later).
    Igb,
}

impl NicModel {
    /// `$APPLIANCE_NIC` (`virtio`, `e1000e` or `igb`), virtio when unset;
    /// anything else is a mistake worth stopping for.
    pub fn from_env() -> Self {
        match std::env::var("APPLIANCE_NIC").as_deref() {
            Err(_) | Ok("") | Ok("virtio") => NicModel::Virtio,
            Ok("e1000e") => NicModel::E1000e,
            Ok("igb") => NicModel::Igb,
            Ok(other) => panic!("APPLIANCE_NIC={other}: expected virtio, e1000e or igb"),
        }
    }

    /// The appliance's name for its driver (the boot log's `eth0: NAME mac ...`).
    pub fn driver(self) -> &'static str {
        match self {
            NicModel::Virtio => "virtio-net",
            NicModel::E1000e => "e1000e",
            NicModel::Igb => "igb",
        }
    }

    /// The Linux driver that takes this model in the peer guest.
    pub fn linux_driver(self) -> &'static str {
        match self {
            NicModel::Virtio => "virtio_net",
            NicModel::E1000e => "e1000e",
            NicModel::Igb => "igb",
        }
    }

    /// QEMU's name for the device (the Intel ones' drivers in the guest go by
    /// the same).
    pub fn name(self) -> &'static str {
        match self {
            NicModel::Virtio => "virtio-net-pci",
            NicModel::E1000e => "e1000e",
            NicModel::Igb => "igb",
        }
    }

    /// QEMU's `-device` for this model on netdev `id`. The Intel models have
    /// no MTU property: their MTU is set in the guest (see
    /// [`Appliance::boot`]).
    pub fn device(self, id: &str, mac: &str, host_mtu: Option<u32>) -> String {
        match self {
            NicModel::Virtio => format!(
                "virtio-net-pci,netdev={id},mac={mac}{}",
                host_mtu.map_or(String::new(), |m| format!(",host_mtu={m}"))
            ),
            NicModel::E1000e | NicModel::Igb => format!("{},netdev={id},mac={mac}", self.name()),
        }
    }

    /// Whether eth0's MTU is raised in the guest rather than by the device.
    pub fn mtu_set_in_guest(self) -> bool {
        self != NicModel::Virtio
    }

    /// Whether the QEMU the harness starts ([`qemu_binary`]) emulates this
    /// model (QEMU 7.2 has no `igb`): asked once of its `-device help`.
    pub fn available(self) -> bool {
        static DEVICES: std::sync::OnceLock<String> = std::sync::OnceLock::new();
        let devices = DEVICES.get_or_init(|| {
            Command::new(qemu_binary())
                .args(["-device", "help"])
                .output()
                .map(|o| String::from_utf8_lossy(&o.stdout).into_owned() + &String::from_utf8_lossy(&o.stderr))
                .unwrap_or_default()
        });
        devices.contains(&format!("name \"{}\"", self.name()))
    }
}

/// A NIC on a point-to-point UDP wire over 127.0.0.1, or on a port of a
/// switch.
#[derive(Clone, Debug)]
pub struct Nic {
    /// virtio-net unless `$APPLIANCE_NIC` says otherwise.
    pub model: NicModel,
    pub mac: String,
    /// Our end of the wire.
    pub local_port: u16,
    /// The peer's end.
    pub peer_port: u16,
    /// eth0's MTU: the one the device advertises (virtio's `host_mtu`), or
    /// for the Intel models, which have none, set with `ip link` once
    /// booted; 1500 when `None`.
    pub host_mtu: Option<u32>,
    /// Instead of the UDP wire: the socket directory of a
    /// [`VdeSwitch`](crate::VdeSwitch) (the ports are then unused).
    pub switch: Option<PathBuf>,
    /// Our end of the UDP wire with this receive buffer, opened by the
    /// harness (see [`crate::udp_wire`]); `None`: QEMU's own socket.
    pub socket_buffer: Option<usize>,
}

impl Nic {
    /// A NIC with the default MTU.
    pub fn new(mac: &str, local_port: u16, peer_port: u16) -> Self {
        Nic {
            model: NicModel::from_env(),
            mac: mac.into(),
            local_port,
            peer_port,
            host_mtu: None,
            switch: None,
            socket_buffer: None,
        }
    }

    /// This NIC on a deep UDP wire end ([`crate::udp_wire::DEEP_BUFFER`]),
    /// where the QEMU takes one; both ends of a wire should be.
    pub fn deep(self) -> Self {
        Nic { socket_buffer: Some(crate::udp_wire::DEEP_BUFFER), ..self }
    }

    /// A NIC on a port of `switch`.
    pub fn on_switch(mac: &str, switch: &crate::VdeSwitch) -> Self {
        Nic { switch: Some(switch.dir.clone()), ..Nic::new(mac, 0, 0) }
    }

    /// QEMU's `-netdev` for this NIC, with `id`.
    pub(crate) fn netdev(&self, id: &str) -> String {
        match &self.switch {
            Some(dir) => format!("vde,id={id},sock={}", dir.display()),
            None => format!("socket,id={id},udp=127.0.0.1:{},localaddr=127.0.0.1:{}", self.peer_port, self.local_port),
        }
    }
}

/// The ring's device: backed by a file in /dev/shm, created (sized) before
/// QEMU starts and removed when the appliance is dropped. With `doorbell`,
/// an `ivshmem-doorbell` whose ivshmem server (this process runs it, in a
/// thread, on the socket beside the file, as `make run` runs the
/// `ivshmem-server` tool) hands QEMU the file, so host programs and the
/// appliance ring each other; without, `ivshmem-plain`, polled.
///
/// Which suites run which: every suite gets the doorbell by default, as
/// `make run` does (`APPLIANCE_DOORBELL=0` makes that plain for a whole
/// run); golden.rs, cm.rs, scale.rs and fuzz_wire.rs always run plain
/// ([`Ivshmem::temp_plain`]), and doorbell.rs runs its pingpongs both ways, so
/// `make test` keeps both modes tested.
#[derive(Clone, Debug)]
pub struct Ivshmem {
    pub path: PathBuf,
    pub size: u64,
    pub doorbell: bool,
}

impl Ivshmem {
    /// A unique file name for this process and tag, with a doorbell unless
    /// `$APPLIANCE_DOORBELL` is `0`.
    pub fn temp(tag: &str, size: u64) -> Self {
        let doorbell = std::env::var("APPLIANCE_DOORBELL").map_or(true, |v| v != "0");
        Ivshmem { path: PathBuf::from(format!("/dev/shm/roce-test-{}-{tag}", std::process::id())), size, doorbell }
    }

    /// [`Ivshmem::temp`] as `ivshmem-plain`, whatever the environment says.
    pub fn temp_plain(tag: &str, size: u64) -> Self {
        Ivshmem { doorbell: false, ..Ivshmem::temp(tag, size) }
    }

    /// The ivshmem server's socket (doorbell only).
    pub fn socket(&self) -> PathBuf {
        ivshmem::socket_for(&self.path)
    }

    /// Creates (sizes) the file, and with a doorbell starts its server.
    fn prepare(&self) -> Result<Option<Server>, Error> {
        std::fs::File::create(&self.path)
            .and_then(|f| f.set_len(self.size))
            .map_err(|e| plain_error(format!("cannot create {}: {e}", self.path.display())))?;
        if !self.doorbell {
            return Ok(None);
        }
        let file = std::fs::File::options()
            .read(true)
            .write(true)
            .open(&self.path)
            .map_err(|e| plain_error(format!("cannot open {}: {e}", self.path.display())))?;
        let mut server = ivshmem::Server::bind(&self.socket(), file, 1)
            .map_err(|e| plain_error(format!("ivshmem server on {}: {e}", self.socket().display())))?;
        let stopper = server.stopper();
        let thread = std::thread::spawn(move || {
            let _ = server.run();
        });
        Ok(Some(Server { stopper, thread: Some(thread) }))
    }

    /// QEMU's arguments for the device.
    fn qemu_args(&self) -> Vec<String> {
        if self.doorbell {
            vec![
                "-chardev".into(),
                format!("socket,path={},id=ivsh", self.socket().display()),
                "-device".into(),
                "ivshmem-doorbell,chardev=ivsh,vectors=1".into(),
            ]
        } else {
            vec![
                "-object".into(),
                format!("memory-backend-file,id=shm,mem-path={},size={},share=on", self.path.display(), self.size),
                "-device".into(),
                "ivshmem-plain,memdev=shm".into(),
            ]
        }
    }
}

/// A ring's ivshmem server running in this process; stopped on drop.
struct Server {
    stopper: ivshmem::Stopper,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stopper.stop();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The QEMU the harness starts: `$APPLIANCE_QEMU` when set (a path, e.g.
/// the bookworm QEMU 7.2 `make qemu-7.2` unpacks under `target/qemu-7.2`),
/// else `qemu-system-x86_64` from PATH. The Makefile's `make run` honours the
/// same variable.
pub fn qemu_binary() -> PathBuf {
    std::env::var_os("APPLIANCE_QEMU")
        .filter(|q| !q.is_empty())
        .map_or_else(|| "qemu-system-x86_64".into(), PathBuf::from)
}

#[derive(Clone, Debug)]
pub struct Options {
    /// The QEMU binary; [`qemu_binary`] when `None`.
    pub qemu: Option<PathBuf>,
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
            qemu: None,
            memory_mib: 256,
            append: String::new(),
            nic: None,
            ivshmem: None,
            accel: Accel::from_env(),
            extra: Vec::new(),
            // Bounds on waits for the guest, not timing checks: generous, as
            // TCG on a machine busy with other work can stall for seconds.
            boot_timeout: Duration::from_secs(120),
            cmd_timeout: Duration::from_secs(60),
        }
    }
}

/// Firmware for booting from an ISO: QEMU's default SeaBIOS, or OVMF (UEFI).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Firmware {
    Bios,
    /// OVMF as one flash-less image (`-bios`; Debian's `ovmf`, `make deps-iso`).
    Uefi(PathBuf),
}

/// What the guest boots: the ELF image by `-kernel` (PVH), or a bootable ISO
/// on the CD-ROM under a firmware (GRUB, Multiboot2).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Medium {
    Kernel(PathBuf),
    Iso { path: PathBuf, firmware: Firmware },
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

/// A running appliance. Dropping it kills QEMU.
pub struct Appliance {
    guest: Guest,
    opts: Options,
    /// The ring's ivshmem server, with a doorbell.
    _server: Option<Server>,
}

const EXIT_FAILED: i32 = 3; // isa-debug-exit: (1 << 1) | 1

impl Appliance {
    /// The common single node: 10.0.0.1/24 on a wire to nowhere, a ring of
    /// `region` bytes (file tagged `tag`) and `rxe0` on `eth0`, active.
    pub fn with_ring(tag: &str, region: u64) -> Result<(Self, Ivshmem), Error> {
        let shm = Ivshmem::temp(tag, region);
        let (p1, p2) = (crate::free_udp_port(), crate::free_udp_port());
        let mut app = Appliance::boot(Options {
            nic: Some(Nic::new("52:54:00:00:00:01", p1, p2)),
            append: "ip=10.0.0.1/24".into(),
            ivshmem: Some(shm.clone()),
            ..Options::default()
        })?;
        let out = app.cmd("rdma link add rxe0 type rxe netdev eth0")?;
        if !out.contains("rxe0: set active") {
            return Err(Error { message: format!("rdma link add: {out}"), console_tail: app.transcript() });
        }
        Ok((app, shm))
    }

    /// Starts QEMU and waits for the first prompt. An Intel NIC with a
    /// `host_mtu` gets that MTU now, as virtio's has it from the device; an
    /// igb's carrier, which comes up once its PHY has negotiated after the
    /// driver's reset (half a second), is waited for.
    pub fn boot(opts: Options) -> Result<Self, Error> {
        let mut a = Self::start(opts)?;
        a.guest
            .wait_prompt(0, a.opts.boot_timeout)
            .map_err(|e| a.guest.error(format!("no prompt after boot: {}", e.message)))?;
        if let Some(Nic { model: NicModel::Igb, .. }) = a.opts.nic {
            a.guest.wait_for_text("eth0: NETDEV_CHANGE carrier on", a.opts.boot_timeout)?;
        }
        if let Some(Nic { model, host_mtu: Some(mtu), .. }) = a.opts.nic.clone()
            && model.mtu_set_in_guest()
            && mtu != 1500
        {
            let out = a.cmd(&format!("ip link set eth0 mtu {mtu}"))?;
            if !out.contains(&format!("eth0: NETDEV_CHANGEMTU {mtu}")) {
                return Err(a.guest.error(format!("ip link set eth0 mtu {mtu}: {out}")));
            }
        }
        Ok(a)
    }

    /// Starts QEMU without waiting for anything.
    pub fn start(opts: Options) -> Result<Self, Error> {
        let server = match &opts.ivshmem {
            Some(shm) => shm.prepare()?,
            None => None,
        };
        let guest = Guest::spawn(appliance_command(&opts), PROMPT, 30, "`make test` installs it")?;
        Ok(Appliance { guest, opts, _server: server })
    }

    /// Like [`Appliance::boot`], from `medium` instead of `-kernel` with the
    /// test image (`opts.append` only applies to a `Medium::Kernel`).
    pub fn boot_from(medium: &Medium, opts: Options) -> Result<Self, Error> {
        let a = Self::start_from(medium, opts)?;
        a.guest
            .wait_prompt(0, a.opts.boot_timeout)
            .map_err(|e| a.guest.error(format!("no prompt after boot: {}", e.message)))?;
        Ok(a)
    }

    /// Like [`Appliance::start`], from `medium`.
    pub fn start_from(medium: &Medium, opts: Options) -> Result<Self, Error> {
        let server = match &opts.ivshmem {
            Some(shm) => shm.prepare()?,
            None => None,
        };
        let cmd = qemu_command_from(&opts, medium);
        let guest = Guest::spawn(cmd, PROMPT, 30, "`make deps-iso` installs it")?;
        Ok(Appliance { guest, opts, _server: server })
    }

    /// Sends raw bytes to the console.
    pub fn send(&mut self, bytes: &[u8]) -> Result<(), Error> {
        self.guest.send(bytes)
    }

    /// Types a command line and returns its output (without the echo and the
    /// next prompt, `\r\n` made `\n`).
    pub fn cmd(&mut self, line: &str) -> Result<String, Error> {
        self.guest.cmd(line, self.opts.cmd_timeout)
    }

    /// Runs a command and checks its output contains `needle`; returns the output.
    pub fn expect(&mut self, line: &str, needle: &str) -> Result<String, Error> {
        let out = self.cmd(line)?;
        if out.contains(needle) {
            Ok(out)
        } else {
            Err(self.guest.error(format!("`{line}` printed no `{needle}`:\n{out}")))
        }
    }

    /// Types a command that keeps running (a server) and returns once its
    /// output shows `needle`, without waiting for the prompt.
    pub fn start_cmd(&mut self, line: &str, needle: &str) -> Result<Running, Error> {
        self.guest.start_cmd(line, needle, self.opts.cmd_timeout)
    }

    /// Waits for the prompt that ends a command started with
    /// [`Appliance::start_cmd`]; returns what it printed.
    pub fn finish_cmd(&mut self, running: Running) -> Result<String, Error> {
        self.guest.finish_cmd(running, self.opts.cmd_timeout)
    }

    /// Types Ctrl-C, which stops the running command; returns what was
    /// printed from then until the next prompt.
    pub fn interrupt(&mut self) -> Result<String, Error> {
        self.guest.interrupt(self.opts.cmd_timeout)
    }

    /// Waits for `needle` anywhere in the console from its start.
    pub fn wait_for_text(&self, needle: &str, timeout: Duration) -> Result<(), Error> {
        self.guest.wait_for_text(needle, timeout).map(|_| ())
    }

    /// Everything the console printed so far.
    pub fn transcript(&self) -> String {
        self.guest.console.text()
    }

    /// Waits for QEMU to exit and classifies how the guest ended.
    pub fn wait_exit(&mut self, timeout: Duration) -> Result<Exit, Error> {
        let status = self.guest.wait_exit(timeout)?;
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
        // QEMU itself is killed when the guest drops, after this.
        if let Some(shm) = &self.opts.ivshmem {
            let _ = std::fs::remove_file(&shm.path);
        }
    }
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

/// The QEMU command line for `opts`: `make run`'s, with the console on pipes
/// (`make run` gives QEMU the terminal, `signal=off` and `mux=on`).
/// [`qemu_command`] for the appliance: QEMU's default CPU model plus PCLMULQDQ,
/// so the ICRC's folding path can run (a test's own `-cpu` in `extra` wins), and
/// `$APPLIANCE_APPEND` added to the command line, e.g. `icrc=pclmulqdq` to run a
/// test file on the path the firmware would not pick by itself.
pub fn appliance_command(opts: &Options) -> Command {
    let mut opts = opts.clone();
    opts.extra.splice(0..0, ["-cpu".to_string(), "qemu64,+pclmulqdq".to_string()]);
    if let Ok(extra) = std::env::var("APPLIANCE_APPEND") {
        opts.append = format!("{} {}", opts.append, extra.trim()).trim().to_string();
    }
    qemu_command(&opts, crate::image())
}

pub fn qemu_command(opts: &Options, image: &std::path::Path) -> Command {
    qemu_command_from(opts, &Medium::Kernel(image.to_path_buf()))
}

/// [`qemu_command`] for any [`Medium`].
pub fn qemu_command_from(opts: &Options, medium: &Medium) -> Command {
    let qemu = opts.qemu.clone().unwrap_or_else(qemu_binary);
    let mut cmd = match setpriv() {
        Some(sp) => {
            let mut c = Command::new(sp);
            c.args(["--pdeathsig", "KILL"]).arg(&qemu);
            c
        }
        None => Command::new(&qemu),
    };
    cmd.args(["-nodefaults", "-display", "none", "-no-reboot", "-serial", "stdio", "-monitor", "none"]);
    cmd.args(["-device", "isa-debug-exit,iobase=0xf4,iosize=0x04"]);
    cmd.args(["-m", &format!("{}M", opts.memory_mib)]);
    match opts.accel {
        Accel::Tcg => cmd.args(["-accel", "tcg,thread=single"]),
        Accel::Kvm => cmd.args(["-accel", "kvm"]),
    };
    if let Some(nic) = &opts.nic {
        let socket = nic
            .socket_buffer
            .filter(|_| nic.switch.is_none() && crate::udp_wire::qemu_takes_connected_socket(&qemu))
            .and_then(|b| crate::udp_wire::socket(nic.local_port, nic.peer_port, b).ok());
        let netdev = match socket {
            Some(fd) => crate::udp_wire::netdev(&mut cmd, "n0", fd),
            None => nic.netdev("n0"),
        };
        cmd.args(["-netdev", &netdev, "-device", &nic.model.device("n0", &nic.mac, nic.host_mtu)]);
    }
    if let Some(shm) = &opts.ivshmem {
        cmd.args(shm.qemu_args());
    }
    match medium {
        Medium::Kernel(image) => {
            cmd.arg("-kernel").arg(image);
            if !opts.append.is_empty() {
                cmd.args(["-append", &opts.append]);
            }
        }
        Medium::Iso { path, firmware } => {
            if let Firmware::Uefi(code) = firmware {
                cmd.arg("-bios").arg(code);
            }
            cmd.arg("-cdrom").arg(path);
        }
    }
    cmd.args(&opts.extra);
    cmd
}
