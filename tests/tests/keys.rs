//! Unguessable memory keys (issue 17): the key byte of every lkey/rkey is
//! drawn from a random stream the appliance seeds at boot (RDRAND and TSC
//! jitter), as Linux rxe draws it, not counted. Two boots of the same image
//! with the same command line register MRs in the same order; with counted
//! keys (the old pools) both would hand out the very same rkeys.

#![deny(unsafe_code)]

use tests::{Appliance, Ivshmem, Nic, Options, free_udp_port};
use verbs::{AccessFlags, Context};

/// Registrations per boot, each deregistered before the next, so every one
/// reuses the same pool slot and only the key byte can differ.
const ROUNDS: usize = 24;

/// One boot's rkeys, in registration order.
fn rkeys_of_one_boot(tag: &str) -> Vec<u32> {
    let shm = Ivshmem::temp(tag, 16 << 20);
    let (p1, p2) = (free_udp_port(), free_udp_port());
    let mut app = Appliance::boot(Options {
        nic: Some(Nic::new("52:54:00:00:00:01", p1, p2)),
        append: "ip=10.0.0.1/24".into(),
        ivshmem: Some(shm.clone()),
        ..Options::default()
    })
    .unwrap();
    assert!(app.cmd("rdma link add rxe0 type rxe netdev eth0").unwrap().contains("rxe0: set active"));
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
