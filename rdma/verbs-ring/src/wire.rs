//! Encoding of the ABI's `#[repr(C)]` structures to and from little-endian
//! bytes, without `unsafe`.
//!
//! Every shared structure is declared through [`wire_struct!`](crate::wire_struct), which
//! 1. declares it `#[repr(C)]` with plain integer (or integer-array) fields;
//! 2. asserts at compile time that its size is the documented one and that the
//!    fields add up to that size, so there is no hidden padding and the byte
//!    image is exactly the C layout on a little-endian machine;
//! 3. implements [`Wire`] field by field at `offset_of!` offsets, so decoding
//!    never transmutes: any byte pattern is a valid value, and checking the
//!    value is the caller's next step.
//!
//! Decoding and encoding return `None` instead of panicking when the buffer is
//! short.

/// A fixed-size value with a little-endian byte image.
pub trait Wire: Sized + Copy {
    /// Size of the byte image (equal to `size_of::<Self>()`).
    const SIZE: usize;
    /// Decode from the first `SIZE` bytes of `b`; `None` if `b` is shorter.
    fn decode(b: &[u8]) -> Option<Self>;
    /// Encode into the first `SIZE` bytes of `b`; `None` if `b` is shorter.
    fn encode(&self, b: &mut [u8]) -> Option<()>;
}

macro_rules! wire_int {
    ($($t:ty),*) => {$(
        impl Wire for $t {
            const SIZE: usize = core::mem::size_of::<$t>();
            fn decode(b: &[u8]) -> Option<Self> {
                Some(<$t>::from_le_bytes(b.get(..Self::SIZE)?.try_into().ok()?))
            }
            fn encode(&self, b: &mut [u8]) -> Option<()> {
                b.get_mut(..Self::SIZE)?.copy_from_slice(&self.to_le_bytes());
                Some(())
            }
        }
    )*};
}

wire_int!(u8, u16, u32, u64);

impl<T: Wire + Default, const N: usize> Wire for [T; N] {
    const SIZE: usize = T::SIZE * N;
    fn decode(b: &[u8]) -> Option<Self> {
        let mut out = [T::default(); N];
        for (i, v) in out.iter_mut().enumerate() {
            *v = T::decode(b.get(i * T::SIZE..)?)?;
        }
        Some(out)
    }
    fn encode(&self, b: &mut [u8]) -> Option<()> {
        if b.len() < Self::SIZE {
            return None;
        }
        for (i, v) in self.iter().enumerate() {
            v.encode(b.get_mut(i * T::SIZE..)?)?;
        }
        Some(())
    }
}

/// Declare an ABI structure: `#[repr(C)]`, size checked at compile time, no
/// padding, [`Wire`] by field offsets. Every field is `pub` and documented at
/// the declaration.
#[macro_export]
macro_rules! wire_struct {
    (
        $(#[$meta:meta])*
        pub struct $name:ident, size $size:literal {
            $( $(#[$fmeta:meta])* pub $field:ident : $ty:ty ),* $(,)?
        }
    ) => {
        $(#[$meta])*
        #[repr(C)]
        #[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
        pub struct $name {
            $( $(#[$fmeta])* pub $field: $ty ),*
        }

        const _: () = assert!(core::mem::size_of::<$name>() == $size);
        // No hidden padding: the fields cover every byte.
        const _: () = assert!(0 $(+ core::mem::size_of::<$ty>())* == $size);

        impl $crate::wire::Wire for $name {
            const SIZE: usize = $size;
            #[allow(unused_variables)]
            fn decode(b: &[u8]) -> Option<Self> {
                let b = b.get(..$size)?;
                Some($name {
                    $( $field: <$ty as $crate::wire::Wire>::decode(b.get(core::mem::offset_of!($name, $field)..)?)? ),*
                })
            }
            #[allow(unused_variables)]
            fn encode(&self, b: &mut [u8]) -> Option<()> {
                let b = b.get_mut(..$size)?;
                $( <$ty as $crate::wire::Wire>::encode(&self.$field, b.get_mut(core::mem::offset_of!($name, $field)..)?)?; )*
                Some(())
            }
        }
    };
}

/// A fixed-size byte field longer than 32 bytes (private data): `[u8; N]`
/// has no `Default` past 32, which [`wire_struct!`](crate::wire_struct)
/// derives. Alignment 1, no padding: its image is the `N` bytes.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Bytes<const N: usize>(pub [u8; N]);

impl<const N: usize> Default for Bytes<N> {
    fn default() -> Self {
        Bytes([0; N])
    }
}

impl<const N: usize> core::fmt::Debug for Bytes<N> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        // Trailing zeros are room, not data.
        let used = self.0.iter().rposition(|&b| b != 0).map_or(0, |i| i + 1);
        write!(f, "Bytes<{N}>({:02x?})", &self.0[..used])
    }
}

impl<const N: usize> Bytes<N> {
    /// `data` at the start, zeros after; `None` when it does not fit.
    pub fn from_slice(data: &[u8]) -> Option<Self> {
        let mut b = [0u8; N];
        b.get_mut(..data.len())?.copy_from_slice(data);
        Some(Bytes(b))
    }
}

impl<const N: usize> Wire for Bytes<N> {
    const SIZE: usize = N;
    fn decode(b: &[u8]) -> Option<Self> {
        Some(Bytes(b.get(..N)?.try_into().ok()?))
    }
    fn encode(&self, b: &mut [u8]) -> Option<()> {
        b.get_mut(..N)?.copy_from_slice(&self.0);
        Some(())
    }
}

/// Encode `v` into a fresh array of `N` bytes (for tests and small messages).
pub fn to_bytes<T: Wire, const N: usize>(v: &T) -> Option<[u8; N]> {
    let mut b = [0u8; N];
    v.encode(&mut b)?;
    Some(b)
}

/// Why a name does not go into a fixed-size name field.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NameError {
    /// `len` bytes, but the field holds at most `max` (and its NUL).
    TooLong { len: usize, max: usize },
    /// A NUL inside the name would end it early on the other side.
    ContainsNul,
}

impl core::fmt::Display for NameError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            NameError::TooLong { len, max } => {
                write!(f, "name of {len} bytes is too long (the ring's name field holds at most {max})")
            }
            NameError::ContainsNul => f.write_str("name contains a NUL byte"),
        }
    }
}

/// Copy `s` into a NUL-padded fixed-size name field of `N` bytes. The one
/// rule for every name in the ABI: a name that does not fit with its NUL is
/// refused, never truncated (a cut name could be another device's name).
pub fn name_field<const N: usize>(s: &str) -> Result<[u8; N], NameError> {
    let bytes = s.as_bytes();
    if bytes.contains(&0) {
        return Err(NameError::ContainsNul);
    }
    let max = N.saturating_sub(1);
    if bytes.len() > max {
        return Err(NameError::TooLong { len: bytes.len(), max });
    }
    let mut out = [0u8; N];
    out[..bytes.len()].copy_from_slice(bytes);
    Ok(out)
}

/// The string in a NUL-padded name field: up to the first NUL, which must
/// exist, and valid UTF-8. `None` otherwise (a hostile peer's name).
pub fn name_str(field: &[u8]) -> Option<&str> {
    let end = field.iter().position(|&b| b == 0)?;
    core::str::from_utf8(&field[..end]).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    wire_struct! {
        /// A test structure.
        pub struct Sample, size 24 {
            pub a: u64,
            pub b: u32,
            pub c: u16,
            pub d: u8,
            pub e: u8,
            pub f: [u8; 8],
        }
    }

    #[test]
    fn round_trip_and_byte_image() {
        let s = Sample { a: 0x0102_0304_0506_0708, b: 0x1122_3344, c: 0x5566, d: 7, e: 8, f: *b"abcdefgh" };
        let b: [u8; 24] = to_bytes(&s).unwrap();
        assert_eq!(&b[..8], &[8, 7, 6, 5, 4, 3, 2, 1]);
        assert_eq!(&b[8..12], &[0x44, 0x33, 0x22, 0x11]);
        assert_eq!(&b[12..16], &[0x66, 0x55, 7, 8]);
        assert_eq!(&b[16..], b"abcdefgh");
        assert_eq!(Sample::decode(&b), Some(s));
        assert_eq!(Sample::decode(&b[..23]), None);
        assert_eq!(s.encode(&mut [0; 10]), None);
    }

    #[test]
    fn names_are_nul_padded_and_checked() {
        let f: [u8; 8] = name_field("rxe0").unwrap();
        assert_eq!(name_str(&f), Some("rxe0"));
        assert_eq!(name_field::<5>("rxe0").map(|f| f[3]), Ok(b'0'));
        assert_eq!(name_field::<4>("rxe0"), Err(NameError::TooLong { len: 4, max: 3 }));
        assert_eq!(name_field::<8>("rx\0e"), Err(NameError::ContainsNul));
        assert_eq!(
            alloc::format!("{}", NameError::TooLong { len: 17, max: 15 }),
            "name of 17 bytes is too long (the ring's name field holds at most 15)"
        );
        assert_eq!(name_str(b"no-nul"), None);
        assert_eq!(name_str(&[0xff, 0]), None);
    }
}
