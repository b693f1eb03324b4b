//! Tests of the IB CM state machine.
