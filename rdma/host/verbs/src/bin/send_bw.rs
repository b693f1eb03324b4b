//! `send_bw`: perftest's `ib_send_bw` for the appliance (see [`verbs::perf`]).

fn main() {
    verbs::perf::main(verbs::perf::Test::SendBw)
}
