//! `read_bw`: perftest's `ib_read_bw` for the appliance (see [`verbs::perf`]).

fn main() {
    verbs::perf::main(verbs::perf::Test::ReadBw)
}
