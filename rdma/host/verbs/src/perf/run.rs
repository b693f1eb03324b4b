//! The measured part of each test, driven as perftest's `run_iter_*`
//! functions drive theirs, so the two programs meet on the wire: who posts
//! first, which byte a latency test polls, what a receiver keeps posted.
//!
//! The buffer is perftest's ([`Layout`]): for `N` QPs, `2N` slots of
//! `BUFF_SIZE` bytes (the message size or the page size if larger, rounded
//! up to the cache line). QP `i` sends, writes and reads from slot `i`; the
//! peer's QP `i` targets slot `N + i` (the `vaddr` QP `i` announces), which
//! is also where QP `i`'s receives land (for UD, with the 40-byte GRH in
//! front, so that the message starts at the slot's second cache line).

use std::time::{Duration, Instant};

use super::Test;
use super::exchange::{BwReport, Keys};
use super::report::{bw_report, bw_report_timed};
use crate::Result;
use crate::queue::{Cq, EMPTY_WC, WorkCompletion};
use crate::{Ah, Error, MemoryRegion, Qp, SendFlags, SendWr, Sge, UdDest, WrOp};

/// How long one completion (or one latency mark) may take before the run
/// is declared stuck.
const STALL: Duration = Duration::from_secs(30);

/// The GRH in front of each UD message received (`UD_ADDITION`).
pub const GRH_LEN: usize = 40;
/// perftest's Q_Key for UD (`DEF_QKEY`).
pub const DEF_QKEY: u32 = 0x1111_1111;

/// Where each QP's messages are in the one buffer, as perftest lays it out
/// (`alloc_ctx`, `set_up_connection`, `ctx_set_recv_wqes`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    /// `BUFF_SIZE` rounded up to the cache line.
    pub slot: usize,
    pub qps: usize,
    pub cache_line: usize,
    pub ud: bool,
}

impl Layout {
    pub fn new(size: usize, page_size: usize, cache_line: usize, qps: usize, ud: bool) -> Layout {
        let cache_line = cache_line.max(GRH_LEN.next_power_of_two());
        Layout { slot: size.max(page_size).next_multiple_of(cache_line), qps: qps.max(1), cache_line, ud }
    }

    /// The buffer's bytes (UD: a cache line more, for the last GRH).
    pub fn bytes(&self) -> usize {
        2 * self.qps * self.slot + if self.ud { self.cache_line } else { 0 }
    }

    /// What QP `i` sends, writes and reads from.
    pub fn outbox(&self, i: usize) -> usize {
        i * self.slot
    }

    /// What the peer's QP `i` targets: the offset QP `i` announces.
    pub fn inbox(&self, i: usize) -> usize {
        (self.qps + i) * self.slot
    }

    /// Where QP `i`'s receives start.
    pub fn recv_at(&self, i: usize) -> usize {
        self.inbox(i) + if self.ud { self.cache_line - GRH_LEN } else { 0 }
    }
}

/// A send's `wr_id`: its QP's index and its number on that QP.
fn tag(qp: usize, seq: u64) -> u64 {
    ((qp as u64) << 32) | (seq & 0xffff_ffff)
}

fn untag(wr_id: u64) -> (usize, u64) {
    ((wr_id >> 32) as usize, wr_id & 0xffff_ffff)
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
    /// Receives kept posted by a SEND receiver, per QP.
    pub rx_depth: u32,
    /// The test's QPs, sharing the two CQs, as perftest's.
    pub qps: &'a [Qp<'a>],
    pub send_cq: &'a Cq<'a>,
    pub recv_cq: &'a Cq<'a>,
    pub mr: &'a MemoryRegion<'a>,
    pub layout: Layout,
    /// The peer's keys, one per QP.
    pub rems: &'a [Keys],
    /// UD: the address of the peer's QP `i`, one per QP; else empty.
    pub ahs: &'a [Ah<'a>],
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

    fn tick(&mut self, done: u64, total: u64) {
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

/// Nothing came for [`STALL`]: no `what` from the peer.
fn stalled(what: &'static str) -> Error {
    Error::NothingCame { what, waited: STALL }
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
    fn poll(&mut self, cq: &Cq<'_>, stamps: &mut Vec<Instant>) -> Result<u32> {
        let k = cq.poll(&mut self.wc)?;
        for w in &self.wc[..k] {
            check(w)?;
            stamps.push(Instant::now());
        }
        if k > 0 {
            self.last = Instant::now();
            self.idle = 0;
        } else if self.last.elapsed() > STALL {
            return Err(stalled("completion"));
        } else {
            crate::context::backoff(&mut self.idle);
        }
        Ok(k as u32)
    }

    /// [`Poller::poll`] for moderated completions: each CQE retires its
    /// request and the unsignaled ones before it on its QP (`wr_id` is the
    /// QP's index and the request's number, [`tag`]), each stamped with the
    /// CQE's time. `done[i]` counts QP `i`'s retired requests, never more
    /// than it `posted`.
    fn retire(&mut self, cq: &Cq<'_>, stamps: &mut Vec<Instant>, done: &mut [u64], posted: &[u64]) -> Result<()> {
        let mut at = Vec::with_capacity(self.wc.len());
        let k = self.poll(cq, &mut at)? as usize;
        for (w, t) in self.wc[..k].iter().zip(at) {
            let (qp, seq) = untag(w.wr_id);
            let (Some(d), Some(&p)) = (done.get_mut(qp), posted.get(qp)) else {
                return Err(Error::Protocol(format!("a completion for no request of ours: wr_id {:#x}", w.wr_id)));
            };
            let upto = (seq + 1).clamp(*d, p);
            stamps.extend(std::iter::repeat_n(t, (upto - *d) as usize));
            *d = upto;
        }
        Ok(())
    }
}

impl Run<'_> {
    fn nqps(&self) -> usize {
        self.qps.len()
    }

    /// Every QP's messages: `iters` each.
    fn total(&self) -> u64 {
        u64::from(self.iters) * self.nqps() as u64
    }

    fn op(&self, qp: usize, i: u64) -> Result<WrOp> {
        let rem = self.rems.get(qp).ok_or(Error::InvalidArgument("no peer keys for a QP"))?;
        let (remote_addr, rkey) = (rem.vaddr, rem.rkey);
        Ok(match self.test {
            Test::SendBw | Test::SendLat => WrOp::Send,
            Test::WriteBw | Test::WriteLat => WrOp::Write { remote_addr, rkey },
            Test::ReadBw | Test::ReadLat => WrOp::Read { remote_addr, rkey },
            Test::AtomicBw | Test::AtomicLat if self.atomic_cas => {
                WrOp::CompareSwap { remote_addr, rkey, compare: i, swap: i + 1 }
            }
            Test::AtomicBw | Test::AtomicLat => WrOp::FetchAdd { remote_addr, rkey, add: 1 },
        })
    }

    /// UD: where QP `qp`'s sends go (the peer's QP of the same index).
    fn ud(&self, qp: usize) -> Option<UdDest<'_>> {
        let ah = self.ahs.get(qp)?;
        Some(UdDest { ah, remote_qpn: self.rems.get(qp)?.qpn, remote_qkey: DEF_QKEY })
    }

    fn send_wr<'s>(&'s self, qp: usize, seq: u64, sge: &'s [Sge], flags: SendFlags) -> Result<SendWr<'s>> {
        Ok(SendWr { wr_id: tag(qp, seq), op: self.op(qp, seq)?, sg_list: sge, flags, ud: self.ud(qp) })
    }

    fn outboxes(&self) -> Result<Vec<[Sge; 1]>> {
        (0..self.nqps()).map(|i| Ok([self.mr.sge(self.layout.outbox(i), self.size as u32)?])).collect()
    }

    /// Post `k` receives on QP `qp` (`wr_id` its index); a SEND test does
    /// this before the handshake that lets the sender start, as perftest.
    pub fn post_recvs(&self, qp: usize, k: u64) -> Result<()> {
        let len = self.size + if self.layout.ud { GRH_LEN } else { 0 };
        let sge = [self.mr.sge(self.layout.recv_at(qp), len as u32)?];
        let wrs: Vec<(u64, &[Sge])> = (0..k).map(|_| (qp as u64, &sge[..])).collect();
        self.qps.get(qp).ok_or(Error::InvalidArgument("no such QP"))?.post_recv(&wrs)
    }

    /// [`Run::first_recvs`] receives on every QP.
    pub fn post_first_recvs(&self) -> Result<u64> {
        let k = self.first_recvs();
        for qp in 0..self.nqps() {
            self.post_recvs(qp, k)?;
        }
        Ok(k)
    }

    /// The number of receives each QP posts up front.
    pub fn first_recvs(&self) -> u64 {
        u64::from(self.rx_depth.min(self.iters))
    }

    /// Sends on every QP in turn, each keeping up to `tx_depth` in flight,
    /// each posted by itself and every `cq_mod`-th signaled (and its last),
    /// as perftest's `run_iter_bw` and `run_iter_bi` post them.
    fn post_round(&self, sges: &[[Sge; 1]], posted: &mut [u64], done: &[u64]) -> Result<()> {
        let n = u64::from(self.iters);
        let cq_mod = u64::from(self.cq_mod.clamp(1, self.tx_depth.max(1)));
        for (i, qp) in self.qps.iter().enumerate() {
            while posted[i] < n && posted[i] - done[i] < u64::from(self.tx_depth) {
                let p = posted[i];
                let signaled = p % cq_mod == cq_mod - 1 || p == n - 1;
                let flags = if signaled { SendFlags::SIGNALED } else { SendFlags::NONE };
                qp.post_send(&[self.send_wr(i, p, &sges[i], flags)?])?;
                posted[i] += 1;
            }
        }
        Ok(())
    }

    /// The figures of a run from its completion times: `iters` per QP in
    /// all, as perftest counts them; the peak over a window of every QP's
    /// requests in flight.
    fn figures(&self, start: Instant, stamps: &[Instant]) -> BwReport {
        bw_report(self.size, self.tx_depth.saturating_mul(self.nqps() as u32), start, stamps)
    }

    /// A bandwidth client (`run_iter_bw`): the QPs' requests in flight
    /// until every QP's `iters` completed.
    pub fn bandwidth(&self) -> Result<BwReport> {
        let total = self.total();
        let sges = self.outboxes()?;
        let mut poller = Poller::new();
        let mut progress = Progress::new();
        let (mut posted, mut done) = (vec![0u64; self.nqps()], vec![0u64; self.nqps()]);
        let start = Instant::now();
        let mut stamps = Vec::with_capacity(total as usize);
        while (stamps.len() as u64) < total {
            self.post_round(&sges, &mut posted, &done)?;
            poller.retire(self.send_cq, &mut stamps, &mut done, &posted)?;
            progress.tick(stamps.len() as u64, total);
        }
        Ok(self.figures(start, &stamps))
    }

    /// A duplex SEND run (`run_iter_bi`): both sides send and receive at
    /// once, the server sending only once the client's first message came.
    /// `posted` receives are up on each QP. The figures are the sends'.
    pub fn bidirectional_send(&self, client: bool, posted: u64) -> Result<BwReport> {
        let (total, n) = (self.total(), u64::from(self.iters));
        let sges = self.outboxes()?;
        let (mut sent, mut done) = (vec![0u64; self.nqps()], vec![0u64; self.nqps()]);
        let mut recv_posted = vec![posted; self.nqps()];
        let (mut tx, mut rx) = (Poller::new(), Poller::new());
        let mut progress = Progress::new();
        let mut started = client;
        let mut got = 0u64;
        let mut start = Instant::now();
        let mut stamps = Vec::with_capacity(total as usize);
        let mut scratch = Vec::new();
        while (stamps.len() as u64) < total || got < total {
            if started {
                self.post_round(&sges, &mut sent, &done)?;
            }
            if got < total {
                let k = rx.poll(self.recv_cq, &mut scratch)? as usize;
                scratch.clear();
                if k > 0 && !started {
                    started = true;
                    start = Instant::now();
                }
                for w in &rx.wc[..k] {
                    got += 1;
                    let qp = w.wr_id as usize;
                    let Some(p) = recv_posted.get_mut(qp) else {
                        return Err(Error::Protocol(format!("a receive for no QP of ours: wr_id {}", w.wr_id)));
                    };
                    if *p < n {
                        self.post_recvs(qp, 1)?;
                        *p += 1;
                    }
                }
            }
            if (stamps.len() as u64) < total && started {
                tx.retire(self.send_cq, &mut stamps, &mut done, &sent)?;
            }
            progress.tick(got.min(stamps.len() as u64), total);
        }
        Ok(self.figures(start, &stamps))
    }

    /// A timed bandwidth client (`-D`, one period of `--run_infinitely`):
    /// `tx_depth` requests in flight on each QP for `period`, then the
    /// last ones reaped; the figures count what completed within the period.
    pub fn timed_bandwidth(&self, period: Duration) -> Result<BwReport> {
        let sges = self.outboxes()?;
        let mut poller = Poller::new();
        let (mut posted, mut done) = (vec![0u64; self.nqps()], vec![0u64; self.nqps()]);
        let start = Instant::now();
        let mut stamps = Vec::new();
        let mut counted = None;
        let all_done = |posted: &[u64], done: &[u64]| posted.iter().zip(done).all(|(p, d)| p == d);
        while counted.is_none() || !all_done(&posted, &done) {
            let elapsed = start.elapsed();
            if counted.is_none() && elapsed >= period {
                counted = Some((done.iter().sum::<u64>(), elapsed));
            }
            if counted.is_none() {
                for (i, qp) in self.qps.iter().enumerate() {
                    let room = u64::from(self.tx_depth) - (posted[i] - done[i]);
                    let wrs = (0..room)
                        .map(|j| self.send_wr(i, posted[i] + j, &sges[i], SendFlags::SIGNALED))
                        .collect::<Result<Vec<_>>>()?;
                    if !wrs.is_empty() {
                        qp.post_send(&wrs)?;
                    }
                    posted[i] += room;
                }
            }
            let k = poller.poll(self.send_cq, &mut stamps)? as usize;
            for w in &poller.wc[..k] {
                if let Some(d) = done.get_mut(untag(w.wr_id).0) {
                    *d += 1;
                }
            }
            // Only the count matters here, not when each completed.
            stamps.clear();
        }
        let (count, elapsed) = counted.unwrap_or((done.iter().sum(), start.elapsed()));
        Ok(bw_report_timed(self.size as u64, count, elapsed.as_secs_f64()))
    }

    fn qp0(&self) -> Result<&Qp<'_>> {
        self.qps.first().ok_or(Error::InvalidArgument("no QP"))
    }

    /// `run_iter_lat` (read_lat, atomic_lat): one operation at a time, each
    /// posted when the last completed. Returns the post times.
    pub fn op_latency(&self) -> Result<Vec<Instant>> {
        let sges = self.outboxes()?;
        let mut posts = Vec::with_capacity(self.iters as usize);
        let mut progress = Progress::new();
        for i in 0..self.iters {
            posts.push(Instant::now());
            self.post_one(u64::from(i), &sges[0])?;
            check(&self.send_cq.wait(STALL)?)?;
            progress.tick(u64::from(i + 1), u64::from(self.iters));
        }
        Ok(posts)
    }

    /// [`Run::op_latency`] for `period` (`-D`): the operations done and
    /// the seconds they took.
    pub fn timed_latency(&self, period: Duration) -> Result<(u64, f64)> {
        let sges = self.outboxes()?;
        let start = Instant::now();
        let mut count = 0u64;
        while start.elapsed() < period {
            self.post_one(count, &sges[0])?;
            check(&self.send_cq.wait(STALL)?)?;
            count += 1;
        }
        Ok((count, start.elapsed().as_secs_f64()))
    }

    /// A SEND receiver (`run_iter_bw_server`): `posted` receives are up on
    /// each QP; keep reposting on the QP that got a message until every
    /// QP's `iters` came.
    pub fn receive_bandwidth(&self, posted: u64) -> Result<BwReport> {
        let (total, n) = (self.total(), u64::from(self.iters));
        let mut per_qp = vec![posted; self.nqps()];
        let mut poller = Poller::new();
        let mut progress = Progress::new();
        let start = Instant::now();
        let mut stamps = Vec::with_capacity(total as usize);
        while (stamps.len() as u64) < total {
            let k = poller.poll(self.recv_cq, &mut stamps)? as usize;
            for w in &poller.wc[..k] {
                let qp = w.wr_id as usize;
                let Some(p) = per_qp.get_mut(qp) else {
                    return Err(Error::Protocol(format!("a receive for no QP of ours: wr_id {}", w.wr_id)));
                };
                if *p < n {
                    self.post_recvs(qp, 1)?;
                    *p += 1;
                }
            }
            progress.tick(stamps.len() as u64, total);
        }
        Ok(self.figures(start, &stamps))
    }

    fn post_one(&self, i: u64, sge: &[Sge]) -> Result<()> {
        self.qp0()?.post_send(&[self.send_wr(0, i, sge, SendFlags::SIGNALED)?])
    }

    /// `run_iter_lat_send`: the client sends first; each side answers every
    /// message it gets. `posted` receives are up. Returns the post times.
    pub fn send_latency(&self, client: bool, mut posted: u64) -> Result<Vec<Instant>> {
        let n = u64::from(self.iters);
        let sges = self.outboxes()?;
        let mut posts = Vec::with_capacity(n as usize);
        let mut progress = Progress::new();
        let (mut sent, mut got) = (0u64, 0u64);
        while sent < n || got < n {
            if got < n && !(sent == 0 && client) {
                check(&self.recv_cq.wait(STALL)?)?;
                got += 1;
                if posted < n {
                    self.post_recvs(0, 1)?;
                    posted += 1;
                }
            }
            if sent < n {
                posts.push(Instant::now());
                self.post_one(sent, &sges[0])?;
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
    pub fn write_latency(&self, client: bool) -> Result<Vec<Instant>> {
        let n = self.iters;
        let sges = self.outboxes()?;
        let mark_at = self.layout.outbox(0) + self.size - 1;
        let poll_at = self.layout.inbox(0) + self.size - 1;
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
                self.post_one(u64::from(sent), &sges[0])?;
                check(&self.send_cq.wait(STALL)?)?;
            }
            progress.tick(u64::from(seen), u64::from(n));
        }
        Ok(posts)
    }

    fn wait_mark(&self, at: usize, mark: u8) -> Result<()> {
        let t = Instant::now();
        let mut b = [0u8];
        let mut round = 0;
        loop {
            self.mr.read(at, &mut b)?;
            if b[0] == mark {
                return Ok(());
            }
            if t.elapsed() > STALL {
                return Err(stalled("write_lat message"));
            }
            crate::context::backoff(&mut round);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// perftest's addresses for two QPs of 64 KiB messages (the fixture
    /// write_bw-qps: VAddrs 0x...d65000 and 0x...d75000 from one buffer).
    #[test]
    fn layout_is_perftests() {
        let l = Layout::new(65536, 4096, 64, 2, false);
        assert_eq!((l.slot, l.bytes()), (65536, 4 * 65536));
        assert_eq!((l.outbox(1), l.inbox(0), l.inbox(1)), (65536, 2 * 65536, 3 * 65536));
        assert_eq!(l.inbox(1) - l.inbox(0), 0x10000);
        // A slot is at least a page, in whole cache lines.
        assert_eq!(Layout::new(5000, 4096, 64, 1, false).slot, 5056);
        assert_eq!(Layout::new(2, 4096, 64, 1, false).slot, 4096);
        // UD: the GRH just before the slot's second cache line.
        let u = Layout::new(1024, 4096, 64, 1, true);
        assert_eq!((u.recv_at(0), u.bytes()), (4096 + 24, 2 * 4096 + 64));
        assert_eq!(u.recv_at(0) + GRH_LEN, u.inbox(0) + u.cache_line);
    }

    #[test]
    fn tags_round_trip() {
        assert_eq!(untag(tag(3, 77)), (3, 77));
        assert_eq!(untag(tag(0, 0)), (0, 0));
    }
}
