//! Unguessable key bytes for lkeys and rkeys.
//!
//! An rkey is the only thing standing between a remote peer and a memory
//! region: anyone who can put a frame on the wire with a live QPN and PSN
//! may WRITE wherever a guessed rkey points. The index half of a key is
//! small and reused; the key byte (IBA 10.6.3.1: the consumer-owned low
//! byte) is what makes a key hard to guess, so, as Linux rxe does, it is
//! drawn at random for every registration, never from a counter. A byte is
//! only 8 bits: randomness stops prediction from earlier keys, not brute
//! force over 256 values, which a RoCE fabric must stop by other means.
//!
//! The generator is ChaCha20 (RFC 8439) keyed with a 256-bit seed the
//! platform supplies (the kernel takes it from RDSEED/RDRAND, or from TSC
//! jitter where the CPU has neither); each device and each key space gets
//! its own stream. Tests use [`Config::default`]'s fixed seed, so runs
//! replay.
//!
//! [`Config::default`]: super::device::Config

/// A stream of random bytes: ChaCha20's keystream for one seed and stream id.
#[derive(Clone)]
pub struct KeyStream {
    state: [u32; 16],
    block: [u8; 64],
    used: usize,
}

impl KeyStream {
    /// The keystream of `seed` (the ChaCha key) for stream `id` (the nonce).
    pub fn new(seed: [u8; 32], id: u64) -> Self {
        let mut state = [0u32; 16];
        // "expand 32-byte k", the constant words of RFC 8439 2.3.
        state[..4].copy_from_slice(&[0x6170_7865, 0x3320_646e, 0x7962_2d32, 0x6b20_6574]);
        for (w, b) in state[4..12].iter_mut().zip(seed.chunks_exact(4)) {
            *w = u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
        }
        // Word 12 counts blocks; 13..16 are the nonce.
        state[14] = id as u32;
        state[15] = (id >> 32) as u32;
        KeyStream { state, block: [0; 64], used: 64 }
    }

    /// The next random byte.
    pub fn next_byte(&mut self) -> u8 {
        if self.used == self.block.len() {
            self.block = block(&self.state);
            self.state[12] = self.state[12].wrapping_add(1);
            if self.state[12] == 0 {
                // 2^32 blocks (256 GiB of key bytes) later: move to the next nonce.
                self.state[13] = self.state[13].wrapping_add(1);
            }
            self.used = 0;
        }
        let b = self.block[self.used];
        self.used += 1;
        b
    }

    /// A random key byte other than `previous`, so a handle to the object
    /// that last held a slot never names the next one (Linux draws again
    /// on the same value too).
    pub fn next_key(&mut self, previous: u8) -> u8 {
        loop {
            let k = self.next_byte();
            if k != previous {
                return k;
            }
        }
    }

    /// A fresh 256-bit seed from this stream, for a child stream.
    pub fn seed(&mut self) -> [u8; 32] {
        core::array::from_fn(|_| self.next_byte())
    }
}

fn quarter(s: &mut [u32; 16], a: usize, b: usize, c: usize, d: usize) {
    s[a] = s[a].wrapping_add(s[b]);
    s[d] = (s[d] ^ s[a]).rotate_left(16);
    s[c] = s[c].wrapping_add(s[d]);
    s[b] = (s[b] ^ s[c]).rotate_left(12);
    s[a] = s[a].wrapping_add(s[b]);
    s[d] = (s[d] ^ s[a]).rotate_left(8);
    s[c] = s[c].wrapping_add(s[d]);
    s[b] = (s[b] ^ s[c]).rotate_left(7);
}

/// The ChaCha20 block function (RFC 8439 2.3): 20 rounds, then the input
/// added back, serialized little-endian.
fn block(input: &[u32; 16]) -> [u8; 64] {
    let mut s = *input;
    for _ in 0..10 {
        quarter(&mut s, 0, 4, 8, 12);
        quarter(&mut s, 1, 5, 9, 13);
        quarter(&mut s, 2, 6, 10, 14);
        quarter(&mut s, 3, 7, 11, 15);
        quarter(&mut s, 0, 5, 10, 15);
        quarter(&mut s, 1, 6, 11, 12);
        quarter(&mut s, 2, 7, 8, 13);
        quarter(&mut s, 3, 4, 9, 14);
    }
    let mut out = [0u8; 64];
    for (i, chunk) in out.chunks_exact_mut(4).enumerate() {
        chunk.copy_from_slice(&s[i].wrapping_add(input[i]).to_le_bytes());
    }
    out
}

#[cfg(test)]
mod test {
    use super::*;

    #[test]
    fn block_function_matches_rfc_8439_test_vector() {
        // RFC 8439 2.3.2: key 00..1f, nonce 00000009 0000004a 00000000, counter 1.
        let mut s = KeyStream::new(core::array::from_fn(|i| i as u8), 0);
        s.state[12] = 1;
        s.state[13] = 0x0900_0000;
        s.state[14] = 0x4a00_0000;
        s.state[15] = 0;
        let out = block(&s.state);
        let head = [0x10, 0xf1, 0xe7, 0xe4, 0xd1, 0x3b, 0x59, 0x15, 0x50, 0x0f, 0xdd, 0x1f, 0xa3, 0x20, 0x71, 0xc4];
        assert_eq!(out[..16], head);
        let tail = [0xb5, 0x12, 0x9c, 0xd1, 0xde, 0x16, 0x4e, 0xb9, 0xcb, 0xd0, 0x83, 0xe8, 0xa2, 0x50, 0x3c, 0x4e];
        assert_eq!(out[48..], tail);
    }

    #[test]
    fn keys_avoid_the_previous_one_and_cover_the_byte() {
        let mut s = KeyStream::new([7; 32], 1);
        let mut seen = [false; 256];
        let mut prev = 0;
        for _ in 0..4096 {
            let k = s.next_key(prev);
            assert_ne!(k, prev);
            seen[k as usize] = true;
            prev = k;
        }
        assert!(seen.iter().filter(|s| **s).count() > 250, "a random byte reaches (nearly) every value");
    }

    #[test]
    fn streams_differ_by_seed_and_id() {
        let take = |seed, id| {
            let mut s = KeyStream::new(seed, id);
            core::array::from_fn::<u8, 16, _>(|_| s.next_byte())
        };
        assert_ne!(take([1; 32], 1), take([1; 32], 2));
        assert_ne!(take([1; 32], 1), take([2; 32], 1));
        assert_eq!(take([1; 32], 1), take([1; 32], 1));
    }
}
