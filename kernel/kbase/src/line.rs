//! The console's line editor: turns typed bytes into lines, with echo,
//! backspace, Ctrl-U and Ctrl-C, and refuses a line longer than its buffer
//! instead of overflowing it. Output is returned as actions for the caller to
//! write, so the editor knows nothing of the serial port.

/// Longest command line accepted, in bytes.
pub const LINE_MAX: usize = 256;

/// What the caller must do after feeding a byte.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// Nothing to show.
    None,
    /// Echo this byte.
    Echo(u8),
    /// Erase this many characters before the cursor (`"\x08 \x08"` each).
    Erase(usize),
    /// Enter was pressed: take the line with [`LineEditor::take`].
    Submit,
    /// Enter was pressed on a line that had overflowed; it is discarded.
    TooLong,
    /// Ctrl-C: the line is discarded; show a fresh prompt.
    Cancel,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Escape {
    None,
    /// After ESC.
    Start,
    /// Inside a CSI sequence (`ESC [`), until its final byte.
    Csi,
}

/// A fixed-capacity line buffer fed one byte at a time.
#[derive(Debug)]
pub struct LineEditor {
    buf: [u8; LINE_MAX],
    len: usize,
    overflowed: bool,
    escape: Escape,
    last_was_cr: bool,
}

impl Default for LineEditor {
    fn default() -> Self {
        Self::new()
    }
}

impl LineEditor {
    pub const fn new() -> Self {
        Self { buf: [0; LINE_MAX], len: 0, overflowed: false, escape: Escape::None, last_was_cr: false }
    }

    /// Feeds one received byte.
    pub fn feed(&mut self, byte: u8) -> Action {
        let after_cr = core::mem::replace(&mut self.last_was_cr, byte == b'\r');
        match self.escape {
            Escape::Start => {
                self.escape = if byte == b'[' { Escape::Csi } else { Escape::None };
                return Action::None;
            }
            // Cursor keys and the like: swallow the whole sequence.
            Escape::Csi => {
                if (0x40..=0x7e).contains(&byte) {
                    self.escape = Escape::None;
                }
                return Action::None;
            }
            Escape::None => {}
        }
        match byte {
            // CR LF from a terminal or a pipe counts as one Enter.
            b'\n' if after_cr => Action::None,
            b'\r' | b'\n' => {
                if core::mem::take(&mut self.overflowed) {
                    self.len = 0;
                    Action::TooLong
                } else {
                    Action::Submit
                }
            }
            0x08 | 0x7f => {
                if self.len > 0 && !self.overflowed {
                    self.len -= 1;
                    Action::Erase(1)
                } else {
                    Action::None
                }
            }
            0x15 => Action::Erase(self.clear()), // Ctrl-U
            0x03 => {
                self.clear();
                Action::Cancel
            }
            0x1b => {
                self.escape = Escape::Start;
                Action::None
            }
            b'\t' => self.insert(b' '),
            b' '..=b'~' => self.insert(byte),
            _ => Action::None,
        }
    }

    fn insert(&mut self, byte: u8) -> Action {
        if self.overflowed {
            return Action::None;
        }
        if self.len == LINE_MAX {
            self.overflowed = true;
            return Action::None;
        }
        self.buf[self.len] = byte;
        self.len += 1;
        Action::Echo(byte)
    }

    /// Empties the line; returns how many characters were shown.
    fn clear(&mut self) -> usize {
        let shown = if self.overflowed { LINE_MAX } else { self.len };
        self.len = 0;
        self.overflowed = false;
        shown
    }

    /// The submitted line (after [`Action::Submit`]); the editor starts afresh.
    pub fn take(&mut self) -> &str {
        let len = core::mem::take(&mut self.len);
        // Only printable ASCII is ever inserted, so this cannot fail.
        core::str::from_utf8(&self.buf[..len]).unwrap_or("")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::string::String;
    use alloc::vec::Vec;

    /// Feeds `input` and returns the submitted lines and the final action.
    fn run(ed: &mut LineEditor, input: &[u8]) -> (Vec<String>, Vec<Action>) {
        let mut lines = Vec::new();
        let mut actions = Vec::new();
        for &b in input {
            let a = ed.feed(b);
            if a == Action::Submit {
                lines.push(String::from(ed.take()));
            }
            actions.push(a);
        }
        (lines, actions)
    }

    #[test]
    fn plain_line_with_crlf_is_one_line() {
        let mut ed = LineEditor::new();
        let (lines, actions) = run(&mut ed, b"help\r\nver\n");
        assert_eq!(lines, ["help", "ver"]);
        assert_eq!(actions[0], Action::Echo(b'h'));
        assert_eq!(actions.iter().filter(|a| **a == Action::Submit).count(), 2);
    }

    #[test]
    fn backspace_and_ctrl_u() {
        let mut ed = LineEditor::new();
        let (lines, actions) = run(&mut ed, b"hx\x7fi\x15he\x08elp\r");
        assert_eq!(lines, ["help"]);
        assert!(actions.contains(&Action::Erase(2)));
        // Backspace on an empty line does nothing.
        assert_eq!(ed.feed(0x7f), Action::None);
    }

    #[test]
    fn escape_sequences_are_swallowed() {
        let mut ed = LineEditor::new();
        let (lines, _) = run(&mut ed, b"a\x1b[A\x1b[1;5Cb\r");
        assert_eq!(lines, ["ab"]);
    }

    #[test]
    fn overlong_line_is_refused_and_the_next_works() {
        let mut ed = LineEditor::new();
        let mut input = alloc::vec![b'x'; LINE_MAX + 10];
        input.push(b'\r');
        let (lines, actions) = run(&mut ed, &input);
        assert!(lines.is_empty());
        assert_eq!(actions.last(), Some(&Action::TooLong));
        assert_eq!(actions.iter().filter(|a| matches!(a, Action::Echo(_))).count(), LINE_MAX);
        let (lines, _) = run(&mut ed, b"ok\r");
        assert_eq!(lines, ["ok"]);
    }

    #[test]
    fn exactly_full_line_is_accepted() {
        let mut ed = LineEditor::new();
        let mut input = alloc::vec![b'y'; LINE_MAX];
        input.push(b'\n');
        let (lines, _) = run(&mut ed, &input);
        assert_eq!(lines[0].len(), LINE_MAX);
    }

    #[test]
    fn ctrl_c_cancels() {
        let mut ed = LineEditor::new();
        let (lines, actions) = run(&mut ed, b"abc\x03\r");
        assert_eq!(actions[3], Action::Cancel);
        assert_eq!(lines, [""]);
    }

    proptest::proptest! {
        #[test]
        fn never_panics_and_lines_are_printable(input in proptest::collection::vec(proptest::num::u8::ANY, 0..2000)) {
            let mut ed = LineEditor::new();
            let (lines, _) = run(&mut ed, &input);
            for l in lines {
                proptest::prop_assert!(l.len() <= LINE_MAX);
                proptest::prop_assert!(l.bytes().all(|b| (b' '..=b'~').contains(&b)));
            }
        }
    }
}
