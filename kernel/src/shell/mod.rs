//! The serial console shell. Tools and tests drive it, so its shape is a
//! contract: after each command's output the prompt [`PROMPT`] is printed at the
//! start of a line; errors are one line starting with `error: `.

mod builtin;
mod net;
mod table;

use crate::jobs::Jobs;
use crate::net::Net;
use crate::poll::Timers;
use crate::time::Instant;
use crate::verbs::Verbs;
use alloc::rc::Rc;
pub use builtin::{Size as builtin_size, version_line};
use core::cell::Cell;
use kbase::line::{Action, LINE_MAX, LineEditor};
use kbase::timer::TimerId;
pub use table::{CommandError, Context};

/// Ctrl-C: abandons the line being typed, or interrupts the running command.
const CTRL_C: u8 = 0x03;

/// Bytes typed while a command runs, kept for the prompt that follows it (a
/// terminal's type-ahead); beyond this they wait in the UART.
const TYPE_AHEAD: usize = 256;

/// The prompt; it ends in `> `, which tools wait for.
pub const PROMPT: &str = "roce> ";

pub struct Shell {
    editor: LineEditor,
    /// Cleared while a command (like `sleep`) finishes later; the prompt waits.
    ready: Rc<Cell<bool>>,
    prompt_due: bool,
    /// The timer a running `sleep` waits on, so Ctrl-C can disarm it.
    sleep: Option<TimerId>,
    /// What was typed while a command ran; Ctrl-C discards it, as a tty does.
    type_ahead: heapless::Deque<u8, TYPE_AHEAD>,
}

impl Shell {
    pub fn new() -> Self {
        Self {
            editor: LineEditor::new(),
            ready: Rc::new(Cell::new(true)),
            prompt_due: true,
            sleep: None,
            type_ahead: heapless::Deque::new(),
        }
    }

    fn execute(
        &mut self,
        line: &str,
        timers: &mut Timers,
        net: Option<&mut Net>,
        verbs: Option<&mut Verbs>,
        jobs: &mut Jobs,
    ) {
        let words: heapless::Vec<&str, { LINE_MAX / 2 }> = line.split_ascii_whitespace().collect();
        let Some((&name, args)) = words.split_first() else { return };
        let Some(cmd) = table::find(name) else {
            crate::println!("error: unknown command '{name}' (try 'help')");
            return;
        };
        let mut ctx = Context { timers, ready: &self.ready, net, verbs, jobs, sleep: &mut self.sleep };
        match (cmd.run)(&mut ctx, args) {
            Ok(()) => {}
            Err(CommandError::Usage) => crate::println!("error: usage: {}", cmd.usage),
            Err(CommandError::Invalid(msg)) => crate::println!("error: {name}: {msg}"),
        }
    }
}

impl Shell {
    /// Reads what was typed and runs a finished line against the network
    /// its owner lends for the pass; returns whether there was input.
    pub fn poll(
        &mut self,
        now: Instant,
        timers: &mut Timers,
        mut net: Option<&mut Net>,
        mut verbs: Option<&mut Verbs>,
        jobs: &mut Jobs,
    ) -> bool {
        if !self.ready.get() {
            return self.watch_for_interrupt(now, timers, net, jobs);
        }
        if core::mem::take(&mut self.prompt_due) {
            crate::print!("{PROMPT}");
        }
        let mut busy = false;
        while let Some(byte) = self.type_ahead.pop_front().or_else(crate::console::read_byte) {
            busy = true;
            match self.editor.feed(byte) {
                Action::None => {}
                Action::Echo(b) => crate::console::write_bytes(&[b]),
                Action::Erase(n) => {
                    for _ in 0..n {
                        crate::console::write_bytes(b"\x08 \x08");
                    }
                }
                Action::Cancel => {
                    crate::println!("^C");
                    self.prompt_due = true;
                }
                Action::TooLong => {
                    crate::println!();
                    crate::println!("error: line too long (at most {LINE_MAX} characters)");
                    self.prompt_due = true;
                }
                Action::Submit => {
                    crate::println!();
                    let mut line = heapless::String::<LINE_MAX>::new();
                    let _ = line.push_str(self.editor.take());
                    self.execute(&line, timers, net.take(), verbs.take(), jobs);
                    self.prompt_due = true;
                }
            }
            if self.prompt_due {
                // Finish this line before reading the next: the prompt comes first.
                break;
            }
        }
        busy
    }

    /// While a command runs: keeps what is typed for later, and on Ctrl-C
    /// stops the command (its jobs end as their tools do on SIGINT) and
    /// discards the type-ahead.
    fn watch_for_interrupt(
        &mut self,
        now: Instant,
        timers: &mut Timers,
        net: Option<&mut Net>,
        jobs: &mut Jobs,
    ) -> bool {
        let mut busy = false;
        while !self.type_ahead.is_full() {
            let Some(byte) = crate::console::read_byte() else { break };
            busy = true;
            if byte != CTRL_C {
                let _ = self.type_ahead.push_back(byte);
                continue;
            }
            self.type_ahead.clear();
            crate::println!("^C");
            if let Some(id) = self.sleep.take() {
                timers.cancel(id);
            }
            if let Some(net) = net {
                jobs.interrupt(net, now);
            }
            self.ready.set(true);
            self.prompt_due = true;
            break;
        }
        busy
    }
}
