//! `atomic_lat`: perftest's `ib_atomic_lat` for the appliance (see [`verbs::perf`]).

fn main() {
    verbs::perf::main(verbs::perf::Test::AtomicLat)
}
