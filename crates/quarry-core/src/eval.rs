//! Range predicates over keys.

use crate::key::Key;

/// `lo (<|<=) x (<|<=) hi` over one key domain. Unbounded sides use the
/// domain's extremes with the inclusive flag set.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Interval<K> {
    pub lo: K,
    pub lo_incl: bool,
    pub hi: K,
    pub hi_incl: bool,
}

impl<K: Key> Interval<K> {
    /// Every value of the domain (missing values still excluded).
    pub fn everything() -> Self {
        Self {
            lo: K::LOWEST,
            lo_incl: true,
            hi: K::HIGHEST,
            hi_incl: true,
        }
    }

    /// Whether `v` satisfies the predicate (false for missing values).
    ///
    /// # Examples
    /// ```
    /// use quarry_core::eval::Interval;
    /// let iv = Interval { lo: 1.0, lo_incl: false, hi: 2.0, hi_incl: true };
    /// assert!(!iv.contains(1.0) && iv.contains(2.0) && !iv.contains(f64::NAN));
    /// ```
    #[inline]
    pub fn contains(&self, v: K) -> bool {
        let above = if self.lo_incl {
            v >= self.lo
        } else {
            v > self.lo
        };
        let below = if self.hi_incl {
            v <= self.hi
        } else {
            v < self.hi
        };
        above && below
    }

    /// Whether all values in `[min, max]` lie below the interval.
    #[inline]
    pub fn is_above(&self, max: K) -> bool {
        if self.lo_incl {
            max < self.lo
        } else {
            max <= self.lo
        }
    }

    /// Whether all values in `[min, max]` lie above the interval.
    #[inline]
    pub fn is_below(&self, min: K) -> bool {
        if self.hi_incl {
            min > self.hi
        } else {
            min >= self.hi
        }
    }

    /// Whether the whole range `[min, max]` satisfies the predicate.
    #[inline]
    pub fn covers(&self, min: K, max: K) -> bool {
        self.contains(min) && self.contains(max)
    }
}
