//! `write_bw`: perftest's `ib_write_bw` for the appliance (see [`verbs::perf`]).

fn main() {
    verbs::perf::main(verbs::perf::Test::WriteBw)
}
