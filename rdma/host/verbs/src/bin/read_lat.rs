//! `read_lat`: perftest's `ib_read_lat` for the appliance (see [`verbs::perf`]).

fn main() {
    verbs::perf::main(verbs::perf::Test::ReadLat)
}
