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
pub trait Widen<K: Key>: Copy + Send + Sync + PartialOrd {
    fn widen(self) -> K;
    /// The least and greatest values of this type inside the interval from
    /// `lo` to `hi` of the key domain (each end included where its flag
    /// says), None where none is: `a <= v && v <= b` then holds exactly
    /// where the widened `v` lies in the interval, so a scan compares values
    /// as stored (eight float32 lanes to a register, not four float64).
    fn narrow(lo: K, lo_incl: bool, hi: K, hi_incl: bool) -> Option<(Self, Self)>;
}

macro_rules! widen_float {
    ($($t:ty),*) => {$(
        impl Widen<f64> for $t {
            #[inline]
            fn widen(self) -> f64 {
                f64::from(self)
            }
            #[allow(clippy::cast_possible_truncation)] // rounded, then stepped onto the bound
            fn narrow(lo: f64, lo_incl: bool, hi: f64, hi_incl: bool) -> Option<(Self, Self)> {
                let above = |v: Self| if lo_incl { f64::from(v) >= lo } else { f64::from(v) > lo };
                let below = |v: Self| if hi_incl { f64::from(v) <= hi } else { f64::from(v) < hi };
                // Rounded to the nearest, an end is at most one step from the
                // least (greatest) value of this type inside it.
                let mut a = lo as Self;
                if !above(a) {
                    a = a.next_up();
                }
                let mut b = hi as Self;
                if !below(b) {
                    b = b.next_down();
                }
                (above(a) && below(b) && a <= b).then_some((a, b))
            }
        }
    )*};
}
widen_float!(f32, f64);

macro_rules! widen_int {
    ($k:ty: $($t:ty),*) => {$(
        impl Widen<$k> for $t {
            #[inline]
            fn widen(self) -> $k {
                <$k>::from(self)
            }
            fn narrow(lo: $k, lo_incl: bool, hi: $k, hi_incl: bool) -> Option<(Self, Self)> {
                let lo = if lo_incl { lo } else { lo.checked_add(1)? };
                let hi = if hi_incl { hi } else { hi.checked_sub(1)? };
                let (lo, hi) = (lo.max(<$k>::from(<$t>::MIN)), hi.min(<$k>::from(<$t>::MAX)));
                (lo <= hi).then(|| {
                    let fits = |v: $k| <$t>::try_from(v).expect("clamped to the type's range");
                    (fits(lo), fits(hi))
                })
            }
        }
    )*};
}
widen_int!(i64: i8, i16, i32, i64);
widen_int!(u64: u8, u16, u32, u64);

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
    use proptest::prelude::*;

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

    /// A value of the stored type, or an end near one: on it, a step of
    /// float64 beside it, between float32s, huge, tiny, signed zeros.
    fn near_f32() -> impl Strategy<Value = f64> {
        prop_oneof![
            any::<f32>().prop_map(f64::from),
            (any::<f32>(), -2i32..=2).prop_map(|(v, k)| {
                let mut w = f64::from(v);
                for _ in 0..k.unsigned_abs() {
                    w = if k > 0 { w.next_up() } else { w.next_down() };
                }
                w
            }),
            prop::sample::select(vec![
                0.0,
                -0.0,
                1e-46,
                -1e-46,
                1e39,
                -1e39,
                f64::MAX,
                f64::MIN,
                f64::INFINITY,
                f64::NEG_INFINITY,
                f64::from(f32::MAX),
                0.1,
            ]),
            -3.0f64..3.0,
        ]
    }

    proptest! {
        /// A value of the stored type is between the narrowed ends exactly
        /// where, widened, it lies in the interval.
        #[test]
        fn narrowed_ends_hold_what_the_interval_holds(
            lo in near_f32(), hi in near_f32(), lo_incl: bool, hi_incl: bool,
            values in prop::collection::vec(prop_oneof![
                any::<f32>(), Just(f32::NAN), Just(-0.0f32), Just(0.0f32),
                Just(f32::INFINITY), Just(f32::NEG_INFINITY), -3.0f32..3.0], 1..64),
            more in prop::collection::vec(near_f32(), 1..16),
            ilo in prop_oneof![any::<i64>(), -300i64..300], ihi in prop_oneof![any::<i64>(), -300i64..300],
            ints in prop::collection::vec(any::<i8>(), 1..64),
            uints in prop::collection::vec(any::<u16>(), 1..64),
        ) {
            let inside = |v: f64| (if lo_incl { v >= lo } else { v > lo }) && (if hi_incl { v <= hi } else { v < hi });
            let narrowed = <f32 as Widen<f64>>::narrow(lo, lo_incl, hi, hi_incl);
            for v in values.iter().copied().chain(more.iter().map(|&m| m as f32)) {
                let held = narrowed.is_some_and(|(a, b)| a <= v && v <= b);
                prop_assert_eq!(held, inside(f64::from(v)), "{} in {:?}", v, narrowed);
            }
            let narrowed = <f64 as Widen<f64>>::narrow(lo, lo_incl, hi, hi_incl);
            for v in more.iter().copied().chain([lo, hi, lo.next_up(), hi.next_down()]) {
                let held = narrowed.is_some_and(|(a, b)| a <= v && v <= b);
                prop_assert_eq!(held, inside(v), "{} in {:?}", v, narrowed);
            }
            let (lo, hi) = (ilo, ihi);
            let inside = |v: i64| (if lo_incl { v >= lo } else { v > lo }) && (if hi_incl { v <= hi } else { v < hi });
            let narrowed = <i8 as Widen<i64>>::narrow(lo, lo_incl, hi, hi_incl);
            for v in ints.iter().copied().chain([i8::MIN, i8::MAX]) {
                let held = narrowed.is_some_and(|(a, b)| a <= v && v <= b);
                prop_assert_eq!(held, inside(i64::from(v)));
            }
            let (lo, hi) = (lo.unsigned_abs(), hi.unsigned_abs());
            let inside = |v: u64| (if lo_incl { v >= lo } else { v > lo }) && (if hi_incl { v <= hi } else { v < hi });
            let narrowed = <u16 as Widen<u64>>::narrow(lo, lo_incl, hi, hi_incl);
            for v in uints.iter().copied().chain([0, u16::MAX]) {
                let held = narrowed.is_some_and(|(a, b)| a <= v && v <= b);
                prop_assert_eq!(held, inside(u64::from(v)));
            }
        }
    }
}
