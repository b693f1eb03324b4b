//! Object pools indexed by small integers, like Linux rxe's `rxe_pool.c`, with handles
//! that cannot be forged or reused by mistake: a handle is `index << 8 | key`, and the
//! slot's key byte is bumped every time the slot is freed, so a handle kept past its
//! object's destruction no longer matches whatever takes the slot next. This is the
//! format of IB lkeys and rkeys (IBA vol. 1 10.6.3.1: the low byte is the "key" the
//! consumer owns), so MR handles *are* their keys.
//!
//! Counted keys suit handles only the local consumer holds (PDs, CQs, QPs, whose
//! QPN follows the count). Keys a remote peer presents (MRs, MWs) must not be
//! guessable from earlier ones: their pools draw every key byte from a
//! [`KeyStream`] ([`Pool::with_random_keys`]).

use alloc::vec::Vec;

use super::keys::KeyStream;

/// Why an object could not be stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PoolFull;

struct Slot<T> {
    key: u8,
    value: Option<T>,
}

/// A pool of at most `limit` objects. Indices are reused (most recently freed first);
/// keys make each reuse distinguishable.
pub struct Pool<T> {
    slots: Vec<Slot<T>>,
    free: Vec<u32>,
    limit: u32,
    len: u32,
    /// Where key bytes come from: `None` counts them.
    keys: Option<KeyStream>,
}

/// Splits a raw handle into index and key.
pub const fn split(handle: u32) -> (u32, u8) {
    (handle >> 8, handle as u8)
}

/// The key a slot starts with: derived from the index so that the first
/// handles of different pools are not all `n << 8`.
const fn first_key(index: u32) -> u8 {
    (index as u8).wrapping_mul(37) ^ 0x5A
}

/// How many times the slot of `handle` was freed before it was given out:
/// 0 for a slot's first object, counting up and wrapping at 256.
pub const fn generation(handle: u32) -> u8 {
    let (index, key) = split(handle);
    key.wrapping_sub(first_key(index))
}

/// Joins an index (24 bits) and a key into a raw handle.
pub const fn join(index: u32, key: u8) -> u32 {
    (index << 8) | key as u32
}

impl<T> Pool<T> {
    /// The largest index a handle can carry.
    pub const MAX_LIMIT: u32 = 1 << 24;

    /// An empty pool for at most `limit` objects (at most 2^24).
    pub fn new(limit: u32) -> Pool<T> {
        Pool { slots: Vec::new(), free: Vec::new(), limit: limit.min(Self::MAX_LIMIT), len: 0, keys: None }
    }

    /// An empty pool whose every handle takes a fresh random key byte from
    /// `keys` (never the byte of the slot's previous object). [`generation`]
    /// means nothing for its handles.
    pub fn with_random_keys(limit: u32, keys: KeyStream) -> Pool<T> {
        Pool { keys: Some(keys), ..Pool::new(limit) }
    }

    /// Stores `value`; returns its handle.
    pub fn insert(&mut self, value: T) -> Result<u32, PoolFull> {
        self.insert_with(|_| value)
    }

    /// Stores the value `make` builds from the new handle (objects that know their own
    /// key, like an MR its lkey).
    pub fn insert_with(&mut self, make: impl FnOnce(u32) -> T) -> Result<u32, PoolFull> {
        let index = match self.free.pop() {
            Some(index) => index,
            None => {
                let index = u32::try_from(self.slots.len()).map_err(|_| PoolFull)?;
                if index >= self.limit {
                    return Err(PoolFull);
                }
                self.slots.push(Slot { key: first_key(index), value: None });
                index
            }
        };
        let slot = &mut self.slots[index as usize];
        if let Some(keys) = &mut self.keys {
            // `remove` moved the key on by one: the previous object's is one below.
            slot.key = keys.next_key(slot.key.wrapping_sub(1));
        }
        // Handle 0 is never given out, as Linux rxe's pools start at index 1:
        // programs take an lkey of 0 for "no key" (Debian's ib_send_bw -R
        // stalled when its MR drew lkey 0).
        while join(index, slot.key) == 0 {
            slot.key = match &mut self.keys {
                Some(keys) => keys.next_key(0),
                None => 1,
            };
        }
        let handle = join(index, slot.key);
        slot.value = Some(make(handle));
        self.len += 1;
        Ok(handle)
    }

    fn slot(&self, handle: u32) -> Option<&Slot<T>> {
        let (index, key) = split(handle);
        self.slots.get(index as usize).filter(|s| s.key == key)
    }

    /// The object a handle names, if the handle is current.
    pub fn get(&self, handle: u32) -> Option<&T> {
        self.slot(handle)?.value.as_ref()
    }

    pub fn get_mut(&mut self, handle: u32) -> Option<&mut T> {
        let (index, key) = split(handle);
        self.slots.get_mut(index as usize).filter(|s| s.key == key)?.value.as_mut()
    }

    /// The object at `index` and its current handle, whatever the key.
    pub fn get_by_index(&self, index: u32) -> Option<(u32, &T)> {
        let slot = self.slots.get(index as usize)?;
        Some((join(index, slot.key), slot.value.as_ref()?))
    }

    pub fn get_by_index_mut(&mut self, index: u32) -> Option<(u32, &mut T)> {
        let slot = self.slots.get_mut(index as usize)?;
        Some((join(index, slot.key), slot.value.as_mut()?))
    }

    /// Removes and returns the object; the slot's key moves on, so `handle` is dead.
    pub fn remove(&mut self, handle: u32) -> Option<T> {
        let (index, key) = split(handle);
        let slot = self.slots.get_mut(index as usize).filter(|s| s.key == key)?;
        let value = slot.value.take()?;
        slot.key = slot.key.wrapping_add(1);
        self.free.push(index);
        self.len -= 1;
        Some(value)
    }

    /// Number of live objects.
    pub fn len(&self) -> usize {
        self.len as usize
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// One past the highest index ever used: the range to scan for every object.
    pub fn index_bound(&self) -> u32 {
        self.slots.len() as u32
    }

    /// Every live object with its handle.
    pub fn iter(&self) -> impl Iterator<Item = (u32, &T)> {
        self.slots.iter().enumerate().filter_map(|(i, s)| s.value.as_ref().map(|v| (join(i as u32, s.key), v)))
    }
}

/// Declares a typed handle: a newtype over the raw `index << 8 | key` so a CQ handle
/// cannot be passed where a PD handle is expected.
macro_rules! handle_type {
    ($(#[$attr:meta])* $name:ident) => {
        $(#[$attr])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub struct $name(pub(crate) u32);

        impl $name {
            /// The raw handle, as the verbs ABI carries it.
            pub const fn raw(self) -> u32 {
                self.0
            }

            /// A handle from its raw value; pools refuse it unless it is current.
            pub const fn from_raw(raw: u32) -> Self {
                $name(raw)
            }
        }
    };
}
pub(crate) use handle_type;

#[cfg(test)]
mod test {
    use super::*;

    #[test]
    fn stale_handles_are_refused() {
        let mut pool = Pool::new(4);
        let a = pool.insert("a").expect("room");
        assert_eq!(pool.get(a), Some(&"a"));
        assert_eq!(pool.remove(a), Some("a"));
        assert_eq!(pool.get(a), None);
        let b = pool.insert("b").expect("room");
        assert_eq!(split(a).0, split(b).0, "the slot is reused");
        assert_ne!(a, b, "with a new key");
        assert_eq!(pool.get(a), None);
        assert_eq!(pool.remove(a), None);
        assert_eq!(pool.get(b), Some(&"b"));
    }

    #[test]
    fn random_keys_are_not_a_count_and_stale_handles_still_fail() {
        let mut pool = Pool::with_random_keys(4, KeyStream::new([3; 32], 9));
        let mut keys = Vec::new();
        let mut last = pool.insert(0).expect("room");
        for i in 1..64 {
            assert_eq!(pool.remove(last), Some(i - 1));
            let next = pool.insert(i).expect("room");
            assert_eq!(split(next).0, split(last).0, "the slot is reused");
            assert_ne!(next, last, "with another key");
            assert_eq!(pool.get(last), None);
            keys.push(split(next).1);
            last = next;
        }
        let counted = keys.windows(2).filter(|w| w[1] == w[0].wrapping_add(1)).count();
        assert!(counted < 8, "keys follow a count: {keys:?}");
    }

    #[test]
    fn handle_zero_is_never_given_out() {
        for mut pool in [Pool::new(1), Pool::with_random_keys(1, KeyStream::new([5; 32], 1))] {
            for i in 0..2000 {
                let h = pool.insert(i).expect("room");
                assert_ne!(h, 0, "after {i} reuses");
                pool.remove(h);
            }
        }
    }

    #[test]
    fn forged_keys_are_refused() {
        let mut pool = Pool::new(4);
        let a = pool.insert(1).expect("room");
        for key in 0..=u8::MAX {
            let forged = join(split(a).0, key);
            assert_eq!(pool.get(forged).is_some(), forged == a);
        }
        assert_eq!(pool.get(join(3, 0)), None);
    }

    #[test]
    fn limit_is_enforced() {
        let mut pool = Pool::new(2);
        let a = pool.insert(1).expect("room");
        pool.insert(2).expect("room");
        assert_eq!(pool.insert(3), Err(PoolFull));
        pool.remove(a);
        assert!(pool.insert(3).is_ok());
        assert_eq!(pool.len(), 2);
        assert_eq!(pool.iter().count(), 2);
    }

    #[test]
    fn insert_with_sees_its_handle() {
        let mut pool = Pool::new(2);
        let h = pool.insert_with(|h| h).expect("room");
        assert_eq!(pool.get(h), Some(&h));
    }
}
