//! Which CRC path the ICRC takes (`rdma::wire::icrc::Path`): `icrc=table` or
//! `icrc=pclmulqdq` on the command line forces one; otherwise both are timed
//! at boot and the cheaper kept, and on the PCLMULQDQ path the input length
//! from which folding beats the table. Timing rather than trusting CPUID, because
//! QEMU 7.2's TCG emulates PCLMULQDQ bit by bit and there the table is faster,
//! while on a real CPU (or a QEMU whose TCG uses the host's carry-less
//! multiply) folding is several times faster.

use rdma::wire::icrc::{self, Path};

use crate::time;

/// Picks the path (SSE must be on, and the clock calibrated) and logs it.
pub fn choose(cmdline: &str) {
    match kbase::cmdline::get(cmdline, "icrc") {
        Some(name) => match name.parse::<Path>() {
            Ok(path) if Path::set_best(path) => {
                log::info!("icrc: CRC-32 by {path} (icrc={name}){}", fold_from(path));
                return;
            }
            Ok(path) => log::warn!("icrc={name}: this CPU has no {path}; timing the paths it has"),
            Err(()) => log::warn!("icrc={name}: not a CRC path (table, pclmulqdq); timing the paths"),
        },
        None if !Path::Clmul.available() => {
            log::info!("icrc: CRC-32 by table (the CPU has no PCLMULQDQ)");
            return;
        }
        None => {}
    }
    let costs = icrc::time_paths(time::cycles);
    let path = icrc::choose_cheaper(&costs);
    let cost = |(path, cycles): (Path, Option<u64>)| match cycles {
        Some(c) => alloc::format!("{path} {:.1} us", c as f64 * 1e6 / time::tsc_hz() as f64),
        None => alloc::format!("{path} n/a"),
    };
    log::info!(
        "icrc: CRC-32 by {path}, the cheaper here (4 KiB: {}, {}){}",
        cost(costs[0]),
        cost(costs[1]),
        fold_from(path)
    );
}

/// On the PCLMULQDQ path, times from which input length folding beats the
/// table (the short strings of RoCE headers may not: under TCG each
/// multiplication is a call into QEMU) and says it for the log.
fn fold_from(path: Path) -> alloc::string::String {
    if path != Path::Clmul {
        return alloc::string::String::new();
    }
    alloc::format!("; folding from {} bytes", icrc::time_crossover(time::cycles))
}
