//! The console transcript: bytes QEMU wrote to the serial port, collected by a
//! reader thread, searched with a cursor by the test.

use std::io::Read;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// The firmware's prompt (kernel/src/shell/mod.rs); it starts a line.
pub const PROMPT: &str = "roce> ";

#[derive(Default)]
struct State {
    bytes: Vec<u8>,
    closed: bool,
}

/// Shared between the reader thread and the test.
#[derive(Clone, Default)]
pub struct Transcript {
    inner: Arc<(Mutex<State>, Condvar)>,
}

impl Transcript {
    /// Starts a thread that appends everything `src` yields.
    pub fn follow(&self, mut src: impl Read + Send + 'static) {
        let me = self.clone();
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            loop {
                match src.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => me.append(&buf[..n]),
                }
            }
            let (lock, cv) = &*me.inner;
            lock.lock().unwrap_or_else(|e| e.into_inner()).closed = true;
            cv.notify_all();
        });
    }

    fn append(&self, bytes: &[u8]) {
        let (lock, cv) = &*self.inner;
        lock.lock().unwrap_or_else(|e| e.into_inner()).bytes.extend_from_slice(bytes);
        cv.notify_all();
    }

    pub fn len(&self) -> usize {
        self.inner.0.lock().unwrap_or_else(|e| e.into_inner()).bytes.len()
    }

    /// Everything so far, as text with `\r\n` made `\n`.
    pub fn text(&self) -> String {
        let state = self.inner.0.lock().unwrap_or_else(|e| e.into_inner());
        String::from_utf8_lossy(&state.bytes).replace("\r\n", "\n")
    }

    /// The text in `[from, to)`, `\r\n` made `\n`.
    pub fn text_between(&self, from: usize, to: usize) -> String {
        let state = self.inner.0.lock().unwrap_or_else(|e| e.into_inner());
        let end = to.min(state.bytes.len());
        String::from_utf8_lossy(&state.bytes[from.min(end)..end]).replace("\r\n", "\n")
    }

    /// Waits until `find` matches the bytes from `from` on; returns what it
    /// returned, or `None` at the deadline or when the stream closed.
    pub fn wait_for<T>(&self, from: usize, timeout: Duration, find: impl Fn(&[u8]) -> Option<T>) -> Option<T> {
        let deadline = Instant::now() + timeout;
        let (lock, cv) = &*self.inner;
        let mut state = lock.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            if let Some(found) = find(state.bytes.get(from..).unwrap_or(&[])) {
                return Some(found);
            }
            let now = Instant::now();
            if state.closed || now >= deadline {
                return None;
            }
            state = cv.wait_timeout(state, deadline - now).unwrap_or_else(|e| e.into_inner()).0;
        }
    }
}

/// Position just after the first `needle` in `hay`.
pub fn find_after(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle).map(|p| p + needle.len())
}

/// Position of the first `prompt` that starts a line (or the text).
pub fn find_prompt_of(hay: &[u8], prompt: &str) -> Option<usize> {
    let p = prompt.as_bytes();
    (0..hay.len()).find(|&i| hay[i..].starts_with(p) && (i == 0 || hay[i - 1] == b'\n'))
}
