//! `send_lat`: perftest's `ib_send_lat` for the appliance (see [`verbs::perf`]).

fn main() {
    verbs::perf::main(verbs::perf::Test::SendLat)
}
