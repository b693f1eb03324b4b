//! The appliance kernel: brings up the machine from the boot information, then
//! runs every driver, protocol engine and the console from one poll loop, all
//! of it owned by one [`appliance::Appliance`] (see ARCHITECTURE.md).
#![no_std]
#![no_main]

extern crate alloc;

mod acpi;
mod appliance;
mod arch;
mod console;
mod jobs;
mod logger;
mod mem;
mod net;
mod panic;
mod pci;
mod poll;
mod prof;
mod shell;
mod time;
mod verbs;

use boot::{BootInfo, BootResult};
use log::LevelFilter;
use shell::Shell;

boot::entry_point!(kmain);

fn kmain(boot: BootResult) -> ! {
    console::init();
    arch::gdt::init();
    arch::idt::init();
    arch::sse::enable();
    let info = match boot {
        Ok(info) => info,
        Err(e) => fatal!("cannot read the boot information: {e}"),
    };
    let level = kbase::cmdline::get(&info.cmdline, "log").and_then(logger::parse_level);
    logger::init(level.unwrap_or(LevelFilter::Info));
    let rsdp = acpi::find_rsdp(&info);
    mem::init(&info);
    acpi::init(rsdp);
    time::init();
    arch::crc::choose(&info.cmdline);
    arch::irq::init();
    // Message-signalled interrupts need the local APIC; without one the
    // NICs stay on their PIC lines.
    if let Err(e) = arch::apic::init() {
        log::warn!("apic: {e:?}: no MSI, legacy interrupts only");
    }
    arch::msi::configure(&info.cmdline);
    arch::irq::enable(arch::irq::IRQ_TIMER);
    arch::irq::enable(arch::irq::IRQ_COM1);
    x86_64::instructions::interrupts::enable();
    let devices = pci::scan();

    let region = verbs::map_region(devices);
    let mut config = net::rdma::config_from_cmdline(&info.cmdline);
    net::rdma::zero_copy_from_cmdline(&info.cmdline);
    let (seed, source) = arch::entropy::seed();
    config.key_seed = seed;
    log::debug!("rxe: key seed from {source:?}");
    let mut net = net::probe(devices, config, region.as_ref().map(|(r, _)| r.clone()), time::now());
    if let Some(n) = net.as_mut() {
        for link in &n.links {
            link.irq.enable();
        }
        configure_from_cmdline(n, &info.cmdline);
        // Deliver the start-up events now, so their log lines precede the banner.
        n.netdevs.process_events();
        n.rdma.process_events();
    }
    banner(&info, devices);
    let verbs = region.and_then(|(mem, f)| verbs::start(mem, f, &info.cmdline, time::now()));
    let mut appliance = appliance::Appliance { net, verbs, shell: Shell::new(), jobs: jobs::Jobs::default() };
    poll::run(&mut [&mut appliance])
}

/// Applies `ip=ADDR/LEN[,DEV]` from the kernel command line.
fn configure_from_cmdline(net: &mut net::Net, cmdline: &str) {
    match knet::bootparam::from_cmdline(cmdline) {
        Ok(Some(p)) => match net.netdevs.add_ipv4(&p.dev, p.cidr) {
            Ok(()) => net.sync_all_addresses(),
            Err(e) => log::error!("ip={}: {e}", p.cidr),
        },
        Ok(None) => {}
        Err(e) => log::error!("{e}"),
    }
}

fn banner(info: &BootInfo, devices: &[kbase::pci::Function]) {
    use shell::builtin_size as size;
    let heap = mem::heap::stats();
    let frames = mem::frames::stats();
    println!("\n{}", shell::version_line());
    println!(
        "memory: {} RAM, heap {}, {} free in frames",
        size(mem::ram_bytes(info)),
        size(heap.size as u64),
        size(frames.free)
    );
    println!(
        "clock: TSC {}.{:03} GHz, calibrated against the PIT",
        time::tsc_hz() / 1_000_000_000,
        time::tsc_hz() / 1_000_000 % 1000
    );
    // Bridges (class 06) are left out of the banner; `lspci` lists them.
    let bridges = devices.iter().filter(|f| f.class == 0x06).count();
    println!("pci: {} functions (and {bridges} bridges: `lspci` lists all)", devices.len() - bridges);
    for f in devices.iter().filter(|f| f.class != 0x06) {
        println!("  {}", kbase::pci::LspciLine(f));
    }
    if !info.cmdline.is_empty() {
        println!("cmdline: {}", info.cmdline);
    }
    log::debug!("memory map:");
    for r in &info.memory_map {
        log::debug!("  {:#014x}-{:#014x} {:?}", r.start, r.end, r.kind);
    }
    println!("Type 'help' for commands.");
}
