//! `write_lat`: perftest's `ib_write_lat` for the appliance (see [`verbs::perf`]).

fn main() {
    verbs::perf::main(verbs::perf::Test::WriteLat)
}
