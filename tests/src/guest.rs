//! One QEMU process and its serial console, driven like a terminal: what
//! `Appliance` and `LinuxPeer` share. The prompt is what tells a command's end.

use crate::console::{Transcript, find_after, find_prompt_of};
use crate::qemu::Error;
use std::io::Write;
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// A command started with `start_cmd` that has not finished yet.
#[must_use]
pub struct Running {
    from: usize,
    /// The line as typed; the shell echoes it before running it.
    line: String,
}

pub(crate) struct Guest {
    child: Child,
    stdin: Option<ChildStdin>,
    pub(crate) console: Transcript,
    stderr: Transcript,
    /// The shell's prompt; it starts a line.
    prompt: &'static str,
    /// Console lines an error shows.
    tail_lines: usize,
    /// Set once QEMU exited; until then dropping the guest kills it.
    status: Option<ExitStatus>,
}

impl Guest {
    /// The PID of the process the guest runs in (QEMU, or what started it).
    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Starts `cmd` (a QEMU command line) with the console on pipes.
    pub(crate) fn spawn(mut cmd: Command, prompt: &'static str, tail_lines: usize, hint: &str) -> Result<Guest, Error> {
        cmd.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped());
        let mut child =
            cmd.spawn().map_err(|e| plain_error(format!("cannot start qemu-system-x86_64 ({e}); {hint}")))?;
        let console = Transcript::default();
        let stderr = Transcript::default();
        if let Some(out) = child.stdout.take() {
            console.follow(out);
        }
        if let Some(err) = child.stderr.take() {
            stderr.follow(err);
        }
        let stdin = child.stdin.take();
        Ok(Guest { child, stdin, console, stderr, prompt, tail_lines, status: None })
    }

    /// An error with the end of the console (and QEMU's stderr) for context.
    pub(crate) fn error(&self, message: String) -> Error {
        let text = self.console.text();
        let lines: Vec<&str> = text.lines().collect();
        let mut tail = lines[lines.len().saturating_sub(self.tail_lines)..].join("\n");
        let err = self.stderr.text();
        if !err.trim().is_empty() {
            tail.push_str("\n--- qemu stderr ---\n");
            tail.push_str(err.trim());
        }
        Error { message, console_tail: tail }
    }

    /// The position of the first prompt at or after `from`.
    pub(crate) fn wait_prompt(&self, from: usize, timeout: Duration) -> Result<usize, Error> {
        let prompt = self.prompt;
        self.console
            .wait_for(from, timeout, |b| find_prompt_of(b, prompt))
            .map(|p| from + p)
            .ok_or_else(|| self.error(format!("no `{prompt}` prompt within {timeout:?}")))
    }

    pub(crate) fn send(&mut self, bytes: &[u8]) -> Result<(), Error> {
        let r = match self.stdin.as_mut() {
            Some(s) => s.write_all(bytes).and_then(|_| s.flush()),
            None => Err(std::io::Error::other("console input closed")),
        };
        r.map_err(|e| self.error(format!("cannot write to the console: {e}")))
    }

    /// Types a line; returns what it printed between its echo and the next
    /// prompt, `\r\n` made `\n`.
    pub(crate) fn cmd(&mut self, line: &str, timeout: Duration) -> Result<String, Error> {
        let running = self.type_line(line)?;
        self.finish_cmd(running, timeout).map_err(|e| self.error(format!("`{line}`: {}", e.message)))
    }

    fn type_line(&mut self, line: &str) -> Result<Running, Error> {
        let from = self.console.len();
        self.send(line.as_bytes())?;
        self.send(b"\r")?;
        Ok(Running { from, line: line.to_owned() })
    }

    /// Types a line that keeps running and returns once its output shows `needle`.
    pub(crate) fn start_cmd(&mut self, line: &str, needle: &str, timeout: Duration) -> Result<Running, Error> {
        let running = self.type_line(line)?;
        self.console
            .wait_for(running.from, timeout, |b| find_after(b, needle.as_bytes()))
            .map(|_| running)
            .ok_or_else(|| self.error(format!("`{line}` printed no `{needle}` within {timeout:?}")))
    }

    /// Waits for the prompt that ends a typed line; returns its output. The
    /// prompt the line was typed at does not count: the one after the echo does.
    pub(crate) fn finish_cmd(&mut self, running: Running, timeout: Duration) -> Result<String, Error> {
        let prompt = self.prompt;
        let body = self
            .console
            .wait_for(running.from, timeout, |b| echo_end(b, &running.line, prompt))
            .ok_or_else(|| self.error("no echo".into()))?;
        let end = self.wait_prompt(running.from + body, timeout)?;
        Ok(self.console.text_between(running.from + body, end))
    }

    /// Types Ctrl-C while a command runs; returns what it printed from then
    /// until the next prompt.
    pub(crate) fn interrupt(&mut self, timeout: Duration) -> Result<String, Error> {
        let from = self.console.len();
        self.send(b"\x03")?;
        let end = self.wait_prompt(from, timeout)?;
        Ok(self.console.text_between(from, end))
    }

    /// Waits for `needle` anywhere in the console from its start.
    pub(crate) fn wait_for_text(&self, needle: &str, timeout: Duration) -> Result<usize, Error> {
        self.console
            .wait_for(0, timeout, |b| find_after(b, needle.as_bytes()))
            .ok_or_else(|| self.error(format!("no `{needle}` within {timeout:?}")))
    }

    /// Waits for QEMU to exit; its status.
    pub(crate) fn wait_exit(&mut self, timeout: Duration) -> Result<ExitStatus, Error> {
        let deadline = Instant::now() + timeout;
        let status = loop {
            match self.child.try_wait() {
                Ok(Some(s)) => break s,
                Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(20)),
                Ok(None) => return Err(self.error(format!("QEMU still running after {timeout:?}"))),
                Err(e) => return Err(self.error(format!("cannot wait for QEMU: {e}"))),
            }
        };
        self.status = Some(status);
        // Let the reader thread drain what QEMU wrote last.
        let _ = self.console.wait_for(0, Duration::from_secs(2), |_| None::<()>);
        Ok(status)
    }
}

impl Drop for Guest {
    fn drop(&mut self) {
        if self.status.is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Where the echo of `line` ends in what the console printed since it was
/// typed. The echo is the line itself and a line end; a log line or a bare
/// line end may come first, so the first line end alone is not enough. When
/// the line does not show verbatim (editing keys, a shell that wraps long
/// lines), the first non-empty line is the echo, taken once the prompt after
/// it shows that the command finished.
fn echo_end(printed: &[u8], line: &str, prompt: &str) -> Option<usize> {
    if let Some(e) = (!line.is_empty()).then(|| find_after(printed, line.as_bytes())).flatten() {
        return find_after(&printed[e..], b"\r\n").map(|p| e + p);
    }
    let first = find_after(printed, b"\r\n")?;
    ((first > 2 || line.is_empty()) && find_prompt_of(&printed[first..], prompt).is_some()).then_some(first)
}

pub(crate) fn plain_error(message: String) -> Error {
    Error { message, console_tail: String::new() }
}

#[cfg(test)]
mod tests {
    use super::echo_end;

    #[test]
    fn the_echo_is_found_after_a_stray_line_end() {
        let printed = b"\r\nrdma link show\r\nlink rxe0/1 state ACTIVE\r\nroce> ";
        assert_eq!(echo_end(printed, "rdma link show", "roce> "), Some(18));
        let logged = b"[ 1.000] port up\r\nlog level\r\nlog level\r\nroce> ";
        assert_eq!(echo_end(logged, "log level", "roce> "), Some(29));
    }

    #[test]
    fn an_edited_line_ends_at_its_first_line_end_once_the_prompt_shows() {
        let line = "ab\x08c";
        assert_eq!(echo_end(b"ab\x08 \x08c\r\n", line, "roce> "), None);
        assert_eq!(echo_end(b"ab\x08 \x08c\r\nerror: x\r\nroce> ", line, "roce> "), Some(8));
        assert_eq!(echo_end(b"\r\nroce> ", "", "roce> "), Some(2));
    }
}
