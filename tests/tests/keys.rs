//! Unguessable memory keys (issue 17): the key byte of every lkey/rkey is
//! drawn from a random stream the appliance seeds at boot (RDRAND and TSC
//! jitter), as Linux rxe draws it, not counted. Two boots of the same image
//! with the same command line register MRs in the same order; with counted
//! keys (the old pools) both would hand out the very same rkeys.

#![deny(unsafe_code)]

use tests::Appliance;
use verbs::{AccessFlags, Context};

/// Registrations per boot, each deregistered before the next, so every one
/// reuses the same pool slot and only the key byte can differ.
const ROUNDS: usize = 24;

/// One boot's rkeys, in registration order.
fn rkeys_of_one_boot(tag: &str) -> Vec<u32> {
    let (_app, shm) = Appliance::with_ring(tag, 16 << 20).unwrap();
    let ctx = Context::open(&shm.path).unwrap();
    let dev = ctx.device(Some("rxe0")).unwrap();
    let pd = dev.alloc_pd().unwrap();
    (0..ROUNDS)
        .map(|_| {
            let mr = pd.reg_mr(4096, AccessFlags::ALL_REMOTE).unwrap();
            assert_eq!(mr.lkey(), mr.rkey(), "one key for both, as rxe");
            mr.rkey()
        })
        .collect()
}

#[test]
fn mr_keys_are_random_per_boot_and_per_registration() {
    let a = rkeys_of_one_boot("keys-a");
    let b = rkeys_of_one_boot("keys-b");
    let index = |k: u32| k >> 8;
    assert!(a.iter().chain(&b).all(|k| index(*k) == index(a[0])), "one slot reused throughout: {a:x?} {b:x?}");
    for w in a.windows(2).chain(b.windows(2)) {
        assert_ne!(w[0], w[1], "a freed key is never handed out again at once");
    }
    let same = a.iter().zip(&b).filter(|(x, y)| x == y).count();
    // Independent random bytes agree at a position 1 time in 256.
    assert!(same <= 3, "the two boots' keys agree at {same} of {ROUNDS} registrations:\n{a:x?}\n{b:x?}");
    let counted = a.windows(2).filter(|w| (w[1] as u8) == (w[0] as u8).wrapping_add(1)).count();
    assert!(counted <= 3, "the key bytes follow a count: {a:x?}");
}
