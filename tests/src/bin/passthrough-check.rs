//! `make run-passthrough`'s check: `passthrough-check PCI` prints QEMU's
//! `-device` argument for the host NIC `PCI` (`vfio-pci,host=...`) when it
//! can be passed through, or says on stderr what to fix and exits 2.

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [pci] = args.as_slice() else {
        eprintln!("usage: passthrough-check DDDD:BB:DD.F");
        std::process::exit(2);
    };
    match tests::passthrough::check(&tests::passthrough::host_root(), pci) {
        Ok(p) => {
            eprintln!(
                "{}: {:04x}:{:04x}, the appliance's {} driver; IOMMU group {}, bound to vfio-pci",
                p.bdf, p.vendor, p.device, p.driver, p.iommu_group
            );
            println!("{}", p.qemu_device());
        }
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(2);
        }
    }
}
