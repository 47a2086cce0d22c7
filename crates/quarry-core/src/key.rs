//! The three key domains values are indexed in.
//!
//! Floating-point data (float32 and float64) is indexed as `f64`, which is the
//! exact widening of a float32, so comparisons are exact on the stored value.
//! Signed integers are indexed as `i64` and unsigned ones as `u64`, so integer
//! comparisons never round through a float.

/// A value type the index is built over.
pub trait Key: Copy + PartialOrd + Send + Sync + std::fmt::Debug + 'static {
    /// Tag stored in every block so a block is never read with the wrong type.
    const KIND: KeyKind;
    /// The least value of the domain (used for unbounded intervals).
    const LOWEST: Self;
    /// The greatest value of the domain.
    const HIGHEST: Self;
    fn to_le_bytes8(self) -> [u8; 8];
    fn from_le_bytes8(bytes: [u8; 8]) -> Self;
    fn to_f64(self) -> f64;
    /// Missing values are left out of every bin (NaN for floats; integers have none).
    fn is_missing(self) -> bool;
    /// Total order for sorting samples that contain no missing values.
    fn cmp_total(&self, other: &Self) -> std::cmp::Ordering;
    /// The key equal to float `v`, if there is one (integers: a whole number in range).
    fn from_f64_exact(v: f64) -> Option<Self>;
    /// An unsigned image of the key that orders like the key itself
    /// (`a <= b` iff `a.ordered() <= b.ordered()` for non-missing keys).
    fn ordered(self) -> u64;
}

/// A stored value type that widens exactly to key type `K`.
pub trait Widen<K: Key>: Copy + Send + Sync {
    fn widen(self) -> K;
}

macro_rules! widen {
    ($k:ty: $($t:ty),*) => {$(
        impl Widen<$k> for $t {
            #[inline]
            fn widen(self) -> $k {
                <$k>::from(self)
            }
        }
    )*};
}
widen!(f64: f32, f64);
widen!(i64: i8, i16, i32, i64);
widen!(u64: u8, u16, u32, u64);

/// Which key domain a block was built over.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum KeyKind {
    F64 = 0,
    I64 = 1,
    U64 = 2,
}

impl KeyKind {
    /// Every kind, in tag order.
    pub const ALL: [KeyKind; 3] = [Self::F64, Self::I64, Self::U64];

    /// The kind named `name` (`"f64"`, `"i64"` or `"u64"`; see [`Self::name`]).
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.name() == name)
    }

    pub fn from_u8(tag: u8) -> Option<Self> {
        match tag {
            0 => Some(Self::F64),
            1 => Some(Self::I64),
            2 => Some(Self::U64),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Self::F64 => "f64",
            Self::I64 => "i64",
            Self::U64 => "u64",
        }
    }
}

impl Key for f64 {
    const KIND: KeyKind = KeyKind::F64;
    const LOWEST: Self = f64::NEG_INFINITY;
    const HIGHEST: Self = f64::INFINITY;
    fn to_le_bytes8(self) -> [u8; 8] {
        self.to_le_bytes()
    }
    fn from_le_bytes8(bytes: [u8; 8]) -> Self {
        f64::from_le_bytes(bytes)
    }
    fn to_f64(self) -> f64 {
        self
    }
    fn from_f64_exact(v: f64) -> Option<Self> {
        Some(v)
    }
    fn is_missing(self) -> bool {
        self.is_nan()
    }
    fn cmp_total(&self, other: &Self) -> std::cmp::Ordering {
        self.total_cmp(other)
    }
    #[inline]
    fn ordered(self) -> u64 {
        // -0.0 == 0.0 as floats, so they must map to the same image.
        let bits = self.to_bits() & u64::from(self != 0.0).wrapping_neg();
        // Negative: all bits flipped; positive: the sign bit set. Without a
        // branch, as data of either sign mispredicts one.
        let negative = ((bits as i64) >> 63) as u64;
        bits ^ (negative | (1 << 63))
    }
}

macro_rules! int_key {
    ($t:ty, $kind:expr, $ordered:expr) => {
        impl Key for $t {
            const KIND: KeyKind = $kind;
            const LOWEST: Self = <$t>::MIN;
            const HIGHEST: Self = <$t>::MAX;
            fn to_le_bytes8(self) -> [u8; 8] {
                self.to_le_bytes()
            }
            fn from_le_bytes8(bytes: [u8; 8]) -> Self {
                <$t>::from_le_bytes(bytes)
            }
            fn to_f64(self) -> f64 {
                self as f64
            }
            fn from_f64_exact(v: f64) -> Option<Self> {
                // 2^63 and 2^64 are exact floats; the range test is exact too.
                let fits = v.fract() == 0.0 && v >= <$t>::MIN as f64 && v < <$t>::MAX as f64;
                fits.then(|| v as $t)
            }
            fn is_missing(self) -> bool {
                false
            }
            fn cmp_total(&self, other: &Self) -> std::cmp::Ordering {
                self.cmp(other)
            }
            #[inline]
            fn ordered(self) -> u64 {
                $ordered(self)
            }
        }
    };
}

int_key!(i64, KeyKind::I64, |v: i64| (v as u64) ^ (1 << 63));
int_key!(u64, KeyKind::U64, |v: u64| v);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ordered_images_preserve_order() {
        let floats = [
            f64::NEG_INFINITY,
            -1e300,
            -1.0,
            -0.0,
            0.0,
            1e-300,
            1.0,
            f64::INFINITY,
        ];
        for w in floats.windows(2) {
            assert!(w[0].ordered() <= w[1].ordered(), "{w:?}");
        }
        assert_eq!((-0.0f64).ordered(), 0.0f64.ordered());
        let ints = [i64::MIN, -1, 0, 1, i64::MAX];
        assert!(ints.windows(2).all(|w| w[0].ordered() < w[1].ordered()));
    }

    #[test]
    fn kinds_round_trip_through_tags_and_names() {
        for (tag, kind) in KeyKind::ALL.into_iter().enumerate() {
            assert_eq!(KeyKind::from_u8(tag as u8), Some(kind));
            assert_eq!(kind as u8, tag as u8);
            assert_eq!(KeyKind::from_name(kind.name()), Some(kind));
        }
        assert_eq!(KeyKind::from_u8(3), None);
        assert_eq!(KeyKind::from_name("f32"), None);
    }
}
