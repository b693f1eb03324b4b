//! The `log` facade on the console: `[   12.345678] LEVEL target: message`,
//! the level changed at run time by `log level <lvl>` or `log=<lvl>` at boot.

use log::{LevelFilter, Log, Metadata, Record};

struct ConsoleLogger;

static LOGGER: ConsoleLogger = ConsoleLogger;

impl Log for ConsoleLogger {
    fn enabled(&self, metadata: &Metadata) -> bool {
        // Library chatter (virtio-drivers' feature negotiation) is debug detail.
        let level = if metadata.target().starts_with("appliance") || metadata.level() <= log::Level::Warn {
            metadata.level()
        } else {
            log::Level::Debug
        };
        level <= log::max_level()
    }

    fn log(&self, record: &Record) {
        if !self.enabled(record.metadata()) {
            return;
        }
        let us = crate::time::now().as_micros();
        crate::println!(
            "[{:5}.{:06}] {:<5} {}: {}",
            us / 1_000_000,
            us % 1_000_000,
            record.level(),
            record.target().trim_start_matches("kernel::"),
            record.args()
        );
    }

    fn flush(&self) {}
}

pub fn init(level: LevelFilter) {
    // Only fails if a logger is already set, which would be our own.
    let _ = log::set_logger(&LOGGER);
    log::set_max_level(level);
}

/// Parses a level name as `log level` and `log=` take it.
pub fn parse_level(s: &str) -> Option<LevelFilter> {
    s.parse().ok()
}
