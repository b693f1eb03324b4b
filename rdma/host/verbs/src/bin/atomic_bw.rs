//! `atomic_bw`: perftest's `ib_atomic_bw` for the appliance (see [`verbs::perf`]).

fn main() {
    verbs::perf::main(verbs::perf::Test::AtomicBw)
}
