//! The command table: one row per command, looked up by its first word.

use crate::poll::Timers;
use alloc::rc::Rc;
use alloc::string::String;
use core::cell::Cell;

/// What a command can reach.
pub struct Context<'a> {
    pub timers: &'a mut Timers,
    /// Set to false to hold the prompt until a timer sets it back.
    pub ready: &'a Rc<Cell<bool>>,
    /// The network, lent by its owner for this command, when there is one.
    pub net: Option<&'a mut crate::net::Net>,
    /// The ring server (what `rdma resource` lists), when there is one.
    pub verbs: Option<&'a mut crate::verbs::Verbs>,
    /// Where a command leaves a job that outlives it (ping, pingpong, netbench).
    pub jobs: &'a mut crate::jobs::Jobs,
    /// The timer a `sleep` holds the prompt with (Ctrl-C disarms it).
    pub sleep: &'a mut Option<kbase::timer::TimerId>,
}

/// Why a command failed; printed as one `error: ` line.
pub enum CommandError {
    /// Wrong arguments: the usage line is shown.
    Usage,
    /// A specific complaint.
    Invalid(String),
}

pub type CommandResult = Result<(), CommandError>;

pub struct Command {
    pub name: &'static str,
    pub usage: &'static str,
    pub help: &'static str,
    pub run: fn(&mut Context, &[&str]) -> CommandResult,
}

pub fn all() -> &'static [Command] {
    super::builtin::COMMANDS
}

pub fn find(name: &str) -> Option<&'static Command> {
    all().iter().find(|c| c.name == name)
}
