//! The built-in commands: system information and control.

use super::table::{Command, CommandError, CommandResult, Context};
use crate::{mem, pci, poll, print, println, time};
use alloc::boxed::Box;
use alloc::format;
use core::sync::atomic::Ordering;
use kbase::pci::{Bar, Capability, LspciLine};

pub static COMMANDS: &[Command] = &[
    Command { name: "help", usage: "help [command]", help: "list commands, or show one command's usage", run: help },
    Command { name: "version", usage: "version", help: "show the firmware version", run: version },
    Command { name: "uptime", usage: "uptime", help: "time since boot, idle halts and interrupts", run: uptime },
    Command {
        name: "ring",
        usage: "ring",
        help: "how hosts wake the appliance through the verbs ring, and are woken",
        run: ring,
    },
    Command { name: "mem", usage: "mem [-b]", help: "heap and physical frame usage (-b: exact bytes)", run: mem_cmd },
    Command { name: "lspci", usage: "lspci [-v]", help: "list PCI devices (-v: BARs and capabilities)", run: lspci },
    Command {
        name: "log",
        usage: "log level [off|error|warn|info|debug|trace]",
        help: "show or set the console log level",
        run: log_cmd,
    },
    Command {
        name: "md",
        usage: "md <hex address> [words]",
        help: "display memory as 32-bit words (mapped RAM and device BARs only)",
        run: md,
    },
    Command {
        name: "ip",
        usage: "ip [-s] link [show [DEV]] | ip link set DEV up|down|mtu N | ip addr [show|add|del] ... | ip neigh",
        help: "show and configure network devices (iproute2 syntax)",
        run: super::net::ip,
    },
    Command {
        name: "ping",
        usage: "ping ADDRESS [-c count] [-i interval_ms] [-s size]",
        help: "send ICMP echo requests",
        run: super::net::ping,
    },
    Command {
        name: "netbench",
        usage: "netbench send <ip> <frame bytes> <ms> [copy|prebuilt|icrc] | netbench rx | netbench reset",
        help: "measure the raw wire with UDP frames to the discard port",
        run: super::net::netbench,
    },
    Command {
        name: "rdma",
        usage: "rdma [-j] [-p] [-d] link add NAME type rxe netdev DEV | link delete NAME | link|dev|resource|statistic|system [show]",
        help: "manage RDMA links and devices, list their resources (iproute2 rdma syntax)",
        run: |ctx, args| super::net::rdma_tool(ctx, &[&["rdma"], args].concat()),
    },
    Command {
        name: "ibv_rc_pingpong",
        usage: "ibv_rc_pingpong [-p port] [-d dev] [-i port] [-s size] [-m mtu] [-r rx_depth] [-n iters] [-g gid_idx] [-c] [server]",
        help: "RC SEND ping-pong with another appliance or Linux's ibv_rc_pingpong",
        run: super::net::rc_pingpong,
    },
    Command {
        name: "ibv_uc_pingpong",
        usage: "ibv_uc_pingpong [-p port] [-d dev] [-s size] [-m mtu] [-r rx_depth] [-n iters] [-g gid_idx] [-c] [server]",
        help: "UC SEND ping-pong (rdma-core's ibv_uc_pingpong)",
        run: super::net::uc_pingpong,
    },
    Command {
        name: "ibv_ud_pingpong",
        usage: "ibv_ud_pingpong [-p port] [-d dev] [-s size] [-r rx_depth] [-n iters] [-g gid_idx] [-c] [server]",
        help: "UD SEND ping-pong (rdma-core's ibv_ud_pingpong)",
        run: super::net::ud_pingpong,
    },
    Command {
        name: "ibv_devinfo",
        usage: "ibv_devinfo [-v] [-d DEV]",
        help: "RDMA device and port attributes",
        run: |ctx, args| super::net::rdma_tool(ctx, &[&["ibv_devinfo"], args].concat()),
    },
    Command {
        name: "ibv_devices",
        usage: "ibv_devices",
        help: "list RDMA devices",
        run: |ctx, args| super::net::rdma_tool(ctx, &[&["ibv_devices"], args].concat()),
    },
    Command {
        name: "show_gids",
        usage: "show_gids [DEV]",
        help: "the GID tables of the RDMA devices",
        run: |ctx, args| super::net::rdma_tool(ctx, &[&["show_gids"], args].concat()),
    },
    Command {
        name: "cost",
        usage: "cost icrc|copy|shm|shm-crc|shm-copy-crc <bytes> <count>",
        help: "time the per-frame work on this CPU (profiling: ICRC, memory copy, copy out of the ring's memory)",
        run: cost,
    },
    Command {
        name: "perf",
        usage: "perf [reset]",
        help: "profile since the last reset: time per kind of work, frame and retransmission counters",
        run: super::net::perf,
    },
    Command { name: "sleep", usage: "sleep <ms>", help: "wait before the next prompt (for scripts)", run: sleep },
    Command { name: "shutdown", usage: "shutdown", help: "power off the appliance", run: shutdown },
    Command {
        name: "fault",
        usage: "fault panic|page|ud|stack",
        help: "crash on purpose, to test fault reporting",
        run: fault,
    },
];

fn no_args(args: &[&str]) -> CommandResult {
    if args.is_empty() { Ok(()) } else { Err(CommandError::Usage) }
}

fn help(_: &mut Context, args: &[&str]) -> CommandResult {
    match args {
        [] => {
            // One column for the names, as wide as the longest.
            let width = super::table::all().iter().map(|c| c.name.len()).max().unwrap_or(0);
            for c in super::table::all() {
                println!("  {:<width$}  {}", c.name, c.help);
            }
            Ok(())
        }
        [name] => match super::table::find(name) {
            Some(c) => {
                println!("usage: {}\n  {}", c.usage, c.help);
                Ok(())
            }
            None => Err(CommandError::Invalid(format!("no command '{name}'"))),
        },
        _ => Err(CommandError::Usage),
    }
}

pub fn version_line() -> &'static str {
    concat!("RoCE appliance firmware ", env!("CARGO_PKG_VERSION"), " (x86_64, no_std)")
}

fn version(_: &mut Context, args: &[&str]) -> CommandResult {
    no_args(args)?;
    println!("{}", version_line());
    Ok(())
}

fn uptime(_: &mut Context, args: &[&str]) -> CommandResult {
    no_args(args)?;
    let irq = |n: u8| crate::arch::irq::COUNTS[n as usize].load(Ordering::Relaxed);
    println!(
        "up {}, {} idle halts, irqs: timer {} serial {} spurious {}",
        time::now() - time::Instant::ZERO,
        poll::HALTS.load(Ordering::Relaxed),
        irq(crate::arch::irq::IRQ_TIMER),
        irq(crate::arch::irq::IRQ_COM1),
        crate::arch::irq::spurious(),
    );
    Ok(())
}

fn ring(ctx: &mut Context, args: &[&str]) -> CommandResult {
    no_args(args)?;
    match ctx.verbs.as_deref() {
        Some(v) => println!("{}", v.wake_status()),
        None => println!("ring: none (no ivshmem device)"),
    }
    Ok(())
}

/// Bytes as `12.3 MiB`.
pub struct Size(pub u64);

impl core::fmt::Display for Size {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
        let mut v = self.0 as f64;
        let mut u = 0;
        while v >= 1024.0 && u + 1 < UNITS.len() {
            v /= 1024.0;
            u += 1;
        }
        if u == 0 { write!(f, "{} B", self.0) } else { write!(f, "{v:.1} {}", UNITS[u]) }
    }
}

fn mem_cmd(_: &mut Context, args: &[&str]) -> CommandResult {
    let exact = match args {
        [] => false,
        ["-b"] => true,
        _ => return Err(CommandError::Usage),
    };
    let h = mem::heap::stats();
    let fr = mem::frames::stats();
    if exact {
        // Exact figures for a leak check (`make soak` compares them before
        // and after): the rounded sizes below hide a few KiB.
        println!("heap_bytes total {} used {} free {}", h.size, h.used, h.free);
        println!("frame_bytes total {} free {} untracked {}", fr.total, fr.free, fr.leaked);
        return Ok(());
    }
    println!("heap:   total {}, used {}, free {}", Size(h.size as u64), Size(h.used as u64), Size(h.free as u64));
    println!(
        "frames: total {}, free {} ({} free 4 KiB frames), untracked {}",
        Size(fr.total),
        Size(fr.free),
        fr.free / 4096,
        Size(fr.leaked)
    );
    Ok(())
}

fn lspci(_: &mut Context, args: &[&str]) -> CommandResult {
    let verbose = match args {
        [] => false,
        ["-v"] => true,
        _ => return Err(CommandError::Usage),
    };
    for f in pci::functions() {
        println!("{}", LspciLine(f));
        if !verbose {
            continue;
        }
        if f.interrupt_pin != 0 {
            println!("\tInterrupt: pin {} routed to IRQ {}", (b'A' + f.interrupt_pin - 1) as char, f.interrupt_line);
        }
        for (i, bar) in f.bars.iter().enumerate() {
            match bar {
                Some(Bar::Memory { addr, size, is_64bit, prefetchable }) => println!(
                    "\tRegion {i}: Memory at {addr:x} ({}-bit, {}) [size={}]",
                    if *is_64bit { 64 } else { 32 },
                    if *prefetchable { "prefetchable" } else { "non-prefetchable" },
                    crate::shell::builtin::Size(*size)
                ),
                Some(Bar::Io { port, size }) => println!("\tRegion {i}: I/O ports at {port:04x} [size={size}]"),
                None => {}
            }
        }
        for cap in &f.capabilities {
            match cap {
                // The enable and mask bits as the device holds them now, in
                // Linux lspci's words.
                Capability::MsiX { offset, table_size, table_bar, table_offset, pba_bar, pba_offset } => {
                    let ctl = kbase::msi::control(&pci::CONFIG, f.bdf, *offset);
                    let on = |bit: u16| if ctl & bit != 0 { '+' } else { '-' };
                    println!(
                        "\tCapabilities: [{offset:02x}] MSI-X: Enable{} Count={table_size} Masked{}",
                        on(kbase::msi::msix_control::ENABLE),
                        on(kbase::msi::msix_control::FUNCTION_MASK)
                    );
                    println!("\t\tVector table: BAR={table_bar} offset={table_offset:08x}");
                    println!("\t\tPBA: BAR={pba_bar} offset={pba_offset:08x}");
                }
                Capability::Msi { offset } => {
                    let ctl = kbase::msi::control(&pci::CONFIG, f.bdf, *offset);
                    let on = |bit: u16| if ctl & bit != 0 { '+' } else { '-' };
                    println!(
                        "\tCapabilities: [{offset:02x}] MSI: Enable{} Count=1/{} Maskable{} 64bit{}",
                        on(kbase::msi::msi_control::ENABLE),
                        1u32 << ((ctl >> 1) & 7).min(5),
                        on(kbase::msi::msi_control::PER_VECTOR_MASK),
                        on(kbase::msi::msi_control::ADDR_64)
                    );
                }
                Capability::Vendor { offset, cfg_type } => {
                    println!("\tCapabilities: [{offset:02x}] Vendor Specific Information: type={cfg_type}")
                }
                Capability::PciExpress { offset } => println!("\tCapabilities: [{offset:02x}] Express"),
                Capability::Other { id, offset } => println!("\tCapabilities: [{offset:02x}] ID {id:#04x}"),
            }
        }
    }
    Ok(())
}

fn log_cmd(_: &mut Context, args: &[&str]) -> CommandResult {
    match args {
        ["level"] => {
            println!("log level {}", log::max_level().as_str().to_ascii_lowercase());
            Ok(())
        }
        ["level", lvl] => match crate::logger::parse_level(lvl) {
            Some(level) => {
                log::set_max_level(level);
                println!("log level {}", level.as_str().to_ascii_lowercase());
                Ok(())
            }
            None => Err(CommandError::Invalid(format!(
                "unknown level '{lvl}' (expected off, error, warn, info, debug or trace)"
            ))),
        },
        _ => Err(CommandError::Usage),
    }
}

fn sleep(ctx: &mut Context, args: &[&str]) -> CommandResult {
    let [ms] = args else { return Err(CommandError::Usage) };
    let ms: u64 = ms
        .parse()
        .ok()
        .filter(|&ms| ms <= 600_000)
        .ok_or_else(|| CommandError::Invalid(format!("'{ms}' is not a number of milliseconds up to 600000")))?;
    let ready = ctx.ready.clone();
    ready.set(false);
    *ctx.sleep = Some(ctx.timers.arm(time::now() + time::Duration::from_millis(ms), Box::new(move || ready.set(true))));
    Ok(())
}

fn shutdown(_: &mut Context, args: &[&str]) -> CommandResult {
    no_args(args)?;
    println!("Powering off.");
    crate::arch::exit::power_off(&crate::acpi::power_off_writes())
}

fn fault(_: &mut Context, args: &[&str]) -> CommandResult {
    match args {
        ["panic"] => panic!("panic requested from the console"),
        ["page"] => {
            // SAFETY: none: this reads page 0, which is unmapped, to raise a page fault.
            let v = unsafe { core::ptr::read_volatile(core::ptr::null::<u64>().wrapping_add(1)) };
            println!("read {v} from page 0?");
            Ok(())
        }
        // SAFETY: ud2 raises an invalid-opcode exception; that is the point.
        ["ud"] => unsafe { core::arch::asm!("ud2", options(noreturn)) },
        ["stack"] => {
            let depth = recurse(0);
            println!("recursion returned at {depth}?");
            Ok(())
        }
        _ => Err(CommandError::Usage),
    }
}

/// Eats the stack until the guard page stops it (a double fault on IST1).
fn recurse(depth: u64) -> u64 {
    let frame = core::hint::black_box([depth; 64]);
    if depth == u64::MAX { frame[0] } else { recurse(depth + 1) + core::hint::black_box(frame[1]) }
}

/// Most words `md` shows at once.
const MD_MAX_WORDS: u64 = 256;

fn md(_: &mut Context, args: &[&str]) -> CommandResult {
    let (addr, words) = match args {
        [a] => (*a, "4"),
        [a, w] => (*a, *w),
        _ => return Err(CommandError::Usage),
    };
    let hex = addr.trim_start_matches("0x").replace('_', "");
    let addr = u64::from_str_radix(&hex, 16)
        .ok()
        .filter(|a| a % 4 == 0)
        .ok_or_else(|| CommandError::Invalid(format!("'{addr}' is not a 4-byte aligned hex address")))?;
    let words: u64 = words
        .parse()
        .ok()
        .filter(|w| (1..=MD_MAX_WORDS).contains(w))
        .ok_or_else(|| CommandError::Invalid(format!("word count '{words}' is not in 1..={MD_MAX_WORDS}")))?;
    let end = addr
        .checked_add(words * 4 - 1)
        .ok_or_else(|| CommandError::Invalid(format!("{addr:#x} + {words} words wraps around")))?;
    // Check every page first: an unmapped address would fault the firmware.
    for page in (addr & !0xfff..=end).step_by(4096) {
        if mem::paging::translate(page).is_none() {
            return Err(CommandError::Invalid(format!("address {:#x} is not mapped", page.max(addr))));
        }
    }
    for (i, a) in (addr..=end).step_by(4).enumerate() {
        if i % 4 == 0 {
            if i > 0 {
                println!();
            }
            print!("{:08x}_{:08x}:", a >> 32, a as u32);
        }
        // SAFETY: the page is mapped (checked above) and `a` is 4-byte aligned;
        // a volatile read of RAM or a BAR has no effect beyond the device's own.
        let v = unsafe { core::ptr::read_volatile(a as *const u32) };
        print!(" {v:08x}");
    }
    println!();
    Ok(())
}

/// `cost icrc|copy|shm|shm-crc|shm-copy-crc <bytes> <count>`: how long the
/// per-frame work takes on this (emulated) CPU, to see where the transport's
/// time goes. `icrc` times each CRC path the CPU has (the one in use marked);
/// `shm` copies out of the ivshmem region, as a copied payload was before
/// issue 16; `shm-crc` computes the CRC over the region in place, as a
/// zero-copy payload's ICRC is; `shm-copy-crc` copies and hashes in one pass,
/// as a copied payload is now.
fn cost(ctx: &mut Context, args: &[&str]) -> CommandResult {
    use rdma::wire::icrc::{self, Path};
    let [what, bytes, count] = args else { return Err(CommandError::Usage) };
    let bytes: usize = bytes
        .parse()
        .ok()
        .filter(|b| (64..=65536).contains(b))
        .ok_or_else(|| CommandError::Invalid(format!("'{bytes}' is not a size in 64..=65536")))?;
    let count: u32 = count
        .parse()
        .ok()
        .filter(|c| (1..=100_000).contains(c))
        .ok_or_else(|| CommandError::Invalid(format!("'{count}' is not a count in 1..=100000")))?;
    // An IPv4/UDP/BTH-shaped buffer, so the ICRC's header masking runs too.
    let mut frame = alloc::vec![0u8; bytes];
    frame[0] = 0x45;
    let mut copy = alloc::vec![0u8; bytes];
    let shm = ctx.net.as_deref().and_then(|n| n.rdma.shared_memory());
    if what.starts_with("shm") && shm.is_none_or(|s| verbs_ring::SharedMem::len(s) < bytes) {
        return Err(CommandError::Invalid(format!("no shared memory region of {bytes} bytes")));
    }
    let report =
        |per: f64, note: &str| println!("{what} {bytes} B: {per:.2} us each, {:.1} MB/s{note}", bytes as f64 / per);
    match *what {
        "icrc" => {
            for path in Path::ALL {
                let in_use = if path == Path::best() { ", in use" } else { "" };
                if !path.available() {
                    println!("{what} {bytes} B: {path} not available on this CPU");
                    continue;
                }
                let per = per_call(count, || icrc::compute_on(path, &frame).unwrap_or(0));
                report(per, &format!(" ({path}{in_use})"));
            }
        }
        "copy" => {
            let per = per_call(count, || {
                copy.copy_from_slice(&frame);
                u32::from(core::hint::black_box(&copy)[bytes / 2])
            });
            report(per, "");
        }
        "shm" => {
            let per = per_call(count, || {
                if let Some(s) = shm {
                    let _ = verbs_ring::SharedMem::read(s, 0, &mut copy);
                }
                u32::from(core::hint::black_box(&copy)[bytes / 2])
            });
            report(per, "");
        }
        "shm-crc" => {
            let per = per_call(count, || {
                let mut h = icrc::Hasher::new();
                if let Some(s) = shm {
                    let _ = s.hash(0, bytes, &mut h);
                }
                h.finalize()
            });
            report(per, &format!(" ({})", Path::best()));
        }
        "shm-copy-crc" => {
            let per = per_call(count, || {
                let mut h = icrc::Hasher::new();
                if let Some(s) = shm {
                    let _ = s.read_hashed(0, &mut copy, &mut h);
                }
                h.finalize() ^ u32::from(core::hint::black_box(&copy)[bytes / 2])
            });
            report(per, &format!(" ({})", Path::best()));
        }
        _ => return Err(CommandError::Usage),
    }
    Ok(())
}

/// Microseconds per call of `work`, over `count` calls.
fn per_call(count: u32, mut work: impl FnMut() -> u32) -> f64 {
    let start = time::now();
    let mut sink = 0u32;
    for _ in 0..count {
        sink ^= work();
    }
    let us = (time::now() - start).as_micros().max(1);
    core::hint::black_box(sink);
    us as f64 / f64::from(count)
}
