//! Boot entropy: the 256-bit seed of the rxe key bytes (`rdma::rxe::keys`).
//! RDRAND where CPUID has it (most CPUs since 2012; QEMU's TCG with
//! `-cpu max`), always mixed with TSC jitter: the time a loop of cache-missing
//! reads takes varies with what the machine (or, under QEMU, the host) is
//! doing, and the low bits of many such timings are not predictable from
//! outside. Neither source alone is trusted blindly; both go through the
//! same ChaCha20 chain, so the seed is as strong as the better of them.

use rdma::rxe::keys::KeyStream;
use x86_64::instructions::random::RdRand;

use crate::time::cycles as rdtsc;

/// Jitter samples taken: each contributes a few bits at best.
const JITTER_SAMPLES: usize = 1024;
/// RDRAND words taken when the CPU has it (256 bits are enough; more costs nothing).
const RDRAND_WORDS: usize = 16;

/// Where a seed's entropy came from, for the boot log.
#[derive(Clone, Copy, Debug)]
pub enum Source {
    RdrandAndJitter,
    JitterOnly,
}

/// A fresh seed, and what it came from.
pub fn seed() -> ([u8; 32], Source) {
    let mut acc = [0u8; 32];
    // Each word rekeys the chain: acc = ChaCha20(key = acc, nonce = word).
    let mut mix = |word: u64| acc = KeyStream::new(acc, word).seed();
    let mut source = Source::JitterOnly;
    if let Some(rng) = RdRand::new() {
        let words = (0..RDRAND_WORDS).filter_map(|_| rng.get_u64());
        let mut got = 0;
        for w in words {
            mix(w);
            got += 1;
        }
        if got > 0 {
            source = Source::RdrandAndJitter;
        }
    }
    let mut scratch = [0u64; 512];
    let mut prev = rdtsc();
    for i in 0..JITTER_SAMPLES {
        // A stride through the scratch buffer, so the timing depends on the cache.
        let mut x = prev;
        for j in 0..16 {
            let k = (i * 61 + j * 127) % scratch.len();
            scratch[k] = scratch[k].wrapping_add(x) ^ (x >> 7);
            x = scratch[k];
        }
        let now = rdtsc();
        mix(now.wrapping_sub(prev) ^ (x << 32));
        prev = now;
    }
    (acc, source)
}
