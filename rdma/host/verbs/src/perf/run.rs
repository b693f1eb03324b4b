//! The measured part of each test, driven as perftest's `run_iter_*`
//! functions drive theirs, so the two programs meet on the wire: who posts
//! first, which byte a latency test polls, what a receiver keeps posted.
//!
//! The buffer is perftest's: `2 × BUFF_SIZE` bytes, where `BUFF_SIZE` is
//! the message size or the page size if larger. We send, write and read
//! from the first half; the peer targets the second half (the `vaddr` we
//! announce), which is also where our receives land.

use std::time::{Duration, Instant};

use super::Test;
use super::exchange::{BwReport, Keys};
use super::report::{bw_report, bw_report_timed};
use crate::queue::{Cq, EMPTY_WC, WorkCompletion};
use crate::{Error, MemoryRegion, Qp, SendFlags, SendWr, Sge, WrOp};

/// How long one completion (or one latency mark) may take before the run
/// is declared stuck.
const STALL: Duration = Duration::from_secs(30);

/// perftest's `BUFF_SIZE`: each half of the buffer.
pub fn half_buffer(size: usize, page_size: usize) -> usize {
    size.max(page_size)
}

pub struct Run<'a> {
    pub test: Test,
    pub size: usize,
    pub iters: u32,
    /// Requests kept in flight by a bandwidth client.
    pub tx_depth: u32,
    /// A bandwidth client signals every `cq_mod`-th request (and the last),
    /// as perftest's `--cq-mod`; at most `tx_depth`.
    pub cq_mod: u32,
    /// Receives kept posted by a SEND receiver.
    pub rx_depth: u32,
    pub qp: &'a Qp<'a>,
    pub send_cq: &'a Cq<'a>,
    pub recv_cq: &'a Cq<'a>,
    pub mr: &'a MemoryRegion<'a>,
    /// Where the peer's half starts (`BUFF_SIZE`).
    pub inbox: usize,
    pub rem: Keys,
    pub atomic_cas: bool,
}

/// Prints `done/total` on stderr at most once a second (long runs only).
struct Progress {
    last: Instant,
    shown: bool,
}

impl Progress {
    fn new() -> Progress {
        Progress { last: Instant::now(), shown: false }
    }

    fn tick(&mut self, done: u32, total: u32) {
        if self.last.elapsed() >= Duration::from_secs(1) {
            eprint!("\r {done}/{total} iterations");
            self.last = Instant::now();
            self.shown = true;
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        if self.shown {
            eprint!("\r                                        \r");
        }
    }
}

fn check(wc: &WorkCompletion) -> crate::Result<()> {
    if wc.status.is_success() {
        Ok(())
    } else {
        eprintln!("Completion with error at wr_id {}: {}", wc.wr_id, wc.status);
        Err(Error::Protocol(format!("work completion failed: {}", wc.status)))
    }
}

fn stalled(cmd: &'static str) -> Error {
    Error::TimedOut { cmd, firmware_alive: true }
}

/// Reaps completions for a bandwidth run.
struct Poller {
    wc: [WorkCompletion; 16],
    last: Instant,
    idle: u32,
}

impl Poller {
    fn new() -> Poller {
        Poller { wc: [EMPTY_WC; 16], last: Instant::now(), idle: 0 }
    }

    /// One look at `cq`: checks and time-stamps what completed. When
    /// nothing did, backs off, since spinning would take a core from the
    /// QEMU that runs the appliance (on a small host that halves the
    /// bandwidth), and gives up after [`STALL`] without any.
    fn poll(&mut self, cq: &Cq<'_>, stamps: &mut Vec<Instant>) -> crate::Result<u32> {
        let k = cq.poll(&mut self.wc)?;
        for w in &self.wc[..k] {
            check(w)?;
            stamps.push(Instant::now());
        }
        if k > 0 {
            self.last = Instant::now();
            self.idle = 0;
        } else if self.last.elapsed() > STALL {
            return Err(stalled("poll_cq"));
        } else {
            crate::context::backoff(&mut self.idle);
        }
        Ok(k as u32)
    }

    /// [`Poller::poll`] for moderated completions: each CQE retires its
    /// request and the unsignaled ones before it (`wr_id` is the request's
    /// index), each stamped with the CQE's time. Returns how many requests
    /// are retired in all, from `done`; never more than were `posted`.
    fn retire(&mut self, cq: &Cq<'_>, stamps: &mut Vec<Instant>, done: u32, posted: u32) -> crate::Result<u32> {
        let mut at = Vec::with_capacity(self.wc.len());
        let k = self.poll(cq, &mut at)? as usize;
        let mut done = done;
        for (w, t) in self.wc[..k].iter().zip(at) {
            let upto = u32::try_from(w.wr_id).map_or(done, |i| i.saturating_add(1)).clamp(done, posted);
            stamps.extend(std::iter::repeat_n(t, (upto - done) as usize));
            done = upto;
        }
        Ok(done)
    }
}

impl Run<'_> {
    fn op(&self, i: u64) -> WrOp {
        let (remote_addr, rkey) = (self.rem.vaddr, self.rem.rkey);
        match self.test {
            Test::SendBw | Test::SendLat => WrOp::Send,
            Test::WriteBw | Test::WriteLat => WrOp::Write { remote_addr, rkey },
            Test::ReadBw | Test::ReadLat => WrOp::Read { remote_addr, rkey },
            Test::AtomicBw | Test::AtomicLat if self.atomic_cas => {
                WrOp::CompareSwap { remote_addr, rkey, compare: i, swap: i + 1 }
            }
            Test::AtomicBw | Test::AtomicLat => WrOp::FetchAdd { remote_addr, rkey, add: 1 },
        }
    }

    fn outbox(&self) -> crate::Result<[Sge; 1]> {
        Ok([self.mr.sge(0, self.size as u32)?])
    }

    /// Post `k` receives into the inbox; a SEND test does this before the
    /// handshake that lets the sender start, as perftest does.
    pub fn post_recvs(&self, k: u32) -> crate::Result<()> {
        let sge = [self.mr.sge(self.inbox, self.size as u32)?];
        let wrs: Vec<(u64, &[Sge])> = (0..k).map(|_| (0, &sge[..])).collect();
        self.qp.post_recv(&wrs)
    }

    /// The number of receives to post up front.
    pub fn first_recvs(&self) -> u32 {
        self.rx_depth.min(self.iters)
    }

    /// A bandwidth client (`run_iter_bw`): up to `tx_depth` requests in
    /// flight until `iters` completed, each posted by itself and every
    /// `cq_mod`-th signaled, as perftest does, so our tool and Debian's
    /// programs over our libibverbs put the same load on the ring.
    pub fn bandwidth(&self) -> crate::Result<BwReport> {
        let n = self.iters;
        let sge = self.outbox()?;
        let cq_mod = self.cq_mod.clamp(1, self.tx_depth.max(1));
        let mut poller = Poller::new();
        let mut progress = Progress::new();
        let (mut posted, mut done) = (0u32, 0u32);
        let start = Instant::now();
        let mut stamps = Vec::with_capacity(n as usize);
        while done < n {
            while posted < n && posted - done < self.tx_depth {
                let signaled = posted % cq_mod == cq_mod - 1 || posted == n - 1;
                let flags = if signaled { SendFlags::SIGNALED } else { SendFlags::NONE };
                let wr =
                    SendWr { wr_id: u64::from(posted), op: self.op(u64::from(posted)), sg_list: &sge, flags, ud: None };
                self.qp.post_send(&[wr])?;
                posted += 1;
            }
            done = poller.retire(self.send_cq, &mut stamps, done, posted)?;
            progress.tick(done, n);
        }
        Ok(bw_report(self.size, self.tx_depth, start, &stamps))
    }

    /// A timed bandwidth client (`-D`, one period of `--run_infinitely`):
    /// `tx_depth` requests in flight for `period`, then the last ones
    /// reaped; the figures count what completed within the period.
    pub fn timed_bandwidth(&self, period: Duration) -> crate::Result<BwReport> {
        let sge = self.outbox()?;
        let mut poller = Poller::new();
        let (mut posted, mut done) = (0u64, 0u64);
        let start = Instant::now();
        let mut stamps = Vec::new();
        let mut counted = None;
        while counted.is_none() || done < posted {
            let elapsed = start.elapsed();
            if counted.is_none() && elapsed >= period {
                counted = Some((done, elapsed));
            }
            let room = u64::from(self.tx_depth) - (posted - done);
            if counted.is_none() && room > 0 {
                let wrs: Vec<SendWr<'_>> = (0..room)
                    .map(|j| SendWr {
                        wr_id: posted + j,
                        op: self.op(posted + j),
                        sg_list: &sge,
                        flags: SendFlags::SIGNALED,
                        ud: None,
                    })
                    .collect();
                self.qp.post_send(&wrs)?;
                posted += room;
            }
            done += u64::from(poller.poll(self.send_cq, &mut stamps)?);
            // Only the count matters here, not when each completed.
            stamps.clear();
        }
        let (count, elapsed) = counted.unwrap_or((done, start.elapsed()));
        Ok(bw_report_timed(self.size as u64, count, elapsed.as_secs_f64()))
    }

    /// `run_iter_lat` (read_lat, atomic_lat): one operation at a time, each
    /// posted when the last completed. Returns the post times.
    pub fn op_latency(&self) -> crate::Result<Vec<Instant>> {
        let sge = self.outbox()?;
        let mut posts = Vec::with_capacity(self.iters as usize);
        let mut progress = Progress::new();
        for i in 0..self.iters {
            posts.push(Instant::now());
            self.post_one(i, &sge)?;
            check(&self.send_cq.wait(STALL)?)?;
            progress.tick(i + 1, self.iters);
        }
        Ok(posts)
    }

    /// [`Run::op_latency`] for `period` (`-D`): the operations done and
    /// the seconds they took.
    pub fn timed_latency(&self, period: Duration) -> crate::Result<(u64, f64)> {
        let sge = self.outbox()?;
        let start = Instant::now();
        let mut count = 0u64;
        while start.elapsed() < period {
            self.post_one(count as u32, &sge)?;
            check(&self.send_cq.wait(STALL)?)?;
            count += 1;
        }
        Ok((count, start.elapsed().as_secs_f64()))
    }

    /// A SEND receiver (`run_iter_bw_server`): `posted` receives are up;
    /// keep reposting until `iters` messages came.
    pub fn receive_bandwidth(&self, mut posted: u32) -> crate::Result<BwReport> {
        let n = self.iters;
        let mut poller = Poller::new();
        let mut progress = Progress::new();
        let mut got = 0;
        let start = Instant::now();
        let mut stamps = Vec::with_capacity(n as usize);
        while got < n {
            let k = poller.poll(self.recv_cq, &mut stamps)?;
            got += k;
            let more = (n - posted).min(k);
            if more > 0 {
                self.post_recvs(more)?;
                posted += more;
            }
            progress.tick(got, n);
        }
        Ok(bw_report(self.size, self.tx_depth, start, &stamps))
    }

    fn post_one(&self, i: u32, sge: &[Sge]) -> crate::Result<()> {
        let wr = SendWr {
            wr_id: u64::from(i),
            op: self.op(u64::from(i)),
            sg_list: sge,
            flags: SendFlags::SIGNALED,
            ud: None,
        };
        self.qp.post_send(&[wr])
    }

    /// `run_iter_lat_send`: the client sends first; each side answers every
    /// message it gets. `posted` receives are up. Returns the post times.
    pub fn send_latency(&self, client: bool, mut posted: u32) -> crate::Result<Vec<Instant>> {
        let n = self.iters;
        let sge = self.outbox()?;
        let mut posts = Vec::with_capacity(n as usize);
        let mut progress = Progress::new();
        let (mut sent, mut got) = (0u32, 0u32);
        while sent < n || got < n {
            if got < n && !(sent == 0 && client) {
                check(&self.recv_cq.wait(STALL)?)?;
                got += 1;
                if posted < n {
                    self.post_recvs(1)?;
                    posted += 1;
                }
            }
            if sent < n {
                posts.push(Instant::now());
                self.post_one(sent, &sge)?;
                sent += 1;
                check(&self.send_cq.wait(STALL)?)?;
            }
            progress.tick(got, n);
        }
        Ok(posts)
    }

    /// `run_iter_lat_write`: the server writes first. Each write carries
    /// its sequence number (mod 256) in its last byte; each side waits for
    /// the peer's next number in the last byte of its inbox message.
    pub fn write_latency(&self, client: bool) -> crate::Result<Vec<Instant>> {
        let n = self.iters;
        let sge = self.outbox()?;
        let mark_at = self.size - 1;
        let poll_at = self.inbox + self.size - 1;
        let mut posts = Vec::with_capacity(n as usize);
        let mut progress = Progress::new();
        let (mut sent, mut seen) = (0u32, 0u32);
        while sent < n || seen < n {
            // The server's first write goes out unprompted.
            if seen < n && (client || sent > 0) {
                seen += 1;
                self.wait_mark(poll_at, seen as u8)?;
            }
            if sent < n {
                posts.push(Instant::now());
                sent += 1;
                self.mr.write(mark_at, &[sent as u8])?;
                self.post_one(sent, &sge)?;
                check(&self.send_cq.wait(STALL)?)?;
            }
            progress.tick(seen, n);
        }
        Ok(posts)
    }

    fn wait_mark(&self, at: usize, mark: u8) -> crate::Result<()> {
        let t = Instant::now();
        let mut b = [0u8];
        let mut round = 0;
        loop {
            self.mr.read(at, &mut b)?;
            if b[0] == mark {
                return Ok(());
            }
            if t.elapsed() > STALL {
                return Err(stalled("write_lat"));
            }
            crate::context::backoff(&mut round);
        }
    }
}
