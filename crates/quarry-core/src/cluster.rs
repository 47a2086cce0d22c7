//! Clustering rows by a small integer key, as a reorganised copy (`MDBin`)
//! orders them: each row's key is the sum over its variables of a 1-D bin
//! number times a stride ([`add_bins`]), and the rows are put in ascending
//! key order, rows of one key keeping their order ([`group_rows`], then
//! [`place`] for each column), with the table of where each key's run starts.
//!
//! Keys are bounded by the product of the variables' bin counts, so they are
//! ordered in linear passes, where a comparison sort would need `n log n`
//! steps: a counting sort when a part's keys span a range not much wider
//! than its rows (a histogram, its prefix sums, one scatter per column),
//! else a least significant digit radix sort ([`stable_order`]: a histogram
//! per digit, its prefix sums, a scatter). Everything here is plain arrays:
//! the copy's file is the caller's.

/// A float dtype whose values are binned in their own precision.
pub trait BinFloat: Copy + Send + Sync {
    /// `floor((self - origin) / size)` clipped to `[0, last]`, in the
    /// value's own dtype; `nan` where that is NaN (a NaN value).
    fn bin(self, origin: Self, size: Self, last: u32, nan: u32) -> u32;
    /// `value` rounded to this dtype, as `NumPy` converts a Python float.
    fn from_f64(value: f64) -> Self;
}

macro_rules! bin_float {
    ($($t:ty),*) => {$(
        impl BinFloat for $t {
            #[inline]
            fn bin(self, origin: Self, size: Self, last: u32, nan: u32) -> u32 {
                // Clipped to [0, last] first, floor is truncation; NaN is
                // lost by max and min (they return the number), so it is
                // picked apart at the end. Branch-free: the loop vectorises.
                let scaled = (self - origin) / size;
                let clipped = scaled.max(0.0).min(last as $t);
                // Whole and in range (`last` < 2^31): exact, and 32-bit
                // lanes vectorise where 64-bit ones do not.
                let bin = clipped as i32 as u32;
                if scaled.is_nan() { nan } else { bin }
            }

            #[inline]
            #[allow(clippy::cast_possible_truncation)]
            fn from_f64(value: f64) -> Self {
                value as $t
            }
        }
    )*};
}
bin_float!(f32, f64);

/// One float variable's 1-D bins: `count` bins of `size` from `origin`
/// (both rounded to the values' dtype), everything below the first in it,
/// everything above the last in it, NaN in bin `count` (the NaN bin); its
/// bin number is multiplied by `stride` in the key.
#[derive(Clone, Copy, Debug)]
pub struct FloatAxis {
    pub origin: f64,
    pub size: f64,
    pub count: u64,
    pub stride: u64,
}

/// A float variable's values.
#[derive(Clone, Copy)]
pub enum Floats<'a> {
    F32(&'a [f32]),
    F64(&'a [f64]),
}

impl Floats<'_> {
    fn len(&self) -> usize {
        match self {
            Floats::F32(v) => v.len(),
            Floats::F64(v) => v.len(),
        }
    }
}

/// Rows binned at a time: every column's slice and the keys' stay in cache.
const CHUNK: usize = 4096;

/// Add to each row's key the sum over `columns` of its bin number times the
/// axis' stride, in one pass over the keys. The arithmetic is each values'
/// own dtype's, step by step as `NumPy`'s `floor((v - origin) / size)`
/// rounds, so the bins agree with the edges found from that formula.
///
/// # Panics
/// If a column's length is not the keys', or an axis has no bin or more
/// than 2^31.
pub fn add_bins(columns: &[(Floats<'_>, FloatAxis)], keys: &mut [u64]) {
    for (values, axis) in columns {
        assert_eq!(values.len(), keys.len(), "one key per value");
        assert!(
            axis.count > 0 && axis.count <= 1 << 31,
            "an axis has 1 to 2^31 bins"
        );
    }
    for (at, chunk) in (0..).step_by(CHUNK).zip(keys.chunks_mut(CHUNK)) {
        let rows = at..at + chunk.len();
        for (values, axis) in columns {
            match values {
                Floats::F32(v) => add_axis(&v[rows.clone()], chunk, axis),
                Floats::F64(v) => add_axis(&v[rows.clone()], chunk, axis),
            }
        }
    }
}

fn add_axis<T: BinFloat>(values: &[T], keys: &mut [u64], axis: &FloatAxis) {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU has AVX2, checked just above.
        unsafe { add_axis_avx2(values, keys, axis) };
        return;
    }
    add_axis_portable(values, keys, axis);
}

/// [`add_axis_portable`] compiled for AVX2: eight floats a step, some
/// four times faster than the baseline x86-64 build's scalar loop.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn add_axis_avx2<T: BinFloat>(values: &[T], keys: &mut [u64], axis: &FloatAxis) {
    add_axis_portable(values, keys, axis);
}

#[inline(always)]
#[allow(clippy::inline_always)] // inlined into the AVX2 copy, so it is compiled for AVX2
fn add_axis_portable<T: BinFloat>(values: &[T], keys: &mut [u64], axis: &FloatAxis) {
    let (origin, size) = (T::from_f64(axis.origin), T::from_f64(axis.size));
    // Checked by add_bins: at most 2^31 bins.
    let (last, nan) = ((axis.count - 1) as u32, axis.count as u32);
    for (keys, values) in keys.chunks_mut(CHUNK).zip(values.chunks(CHUNK)) {
        // The bins first, in 32-bit lanes; then the keys, in 64-bit ones.
        let mut bins = [0u32; CHUNK];
        for (bin, &v) in bins.iter_mut().zip(values) {
            *bin = v.bin(origin, size, last, nan);
        }
        if let Ok(stride) = u32::try_from(axis.stride) {
            // 32 by 32 bits: one widening multiply a lane.
            for (key, &bin) in keys.iter_mut().zip(&bins) {
                *key += u64::from(bin) * u64::from(stride);
            }
        } else {
            for (key, &bin) in keys.iter_mut().zip(&bins) {
                *key += u64::from(bin) * axis.stride;
            }
        }
    }
}

/// The offset table of a stable order: the keys present, ascending, and
/// where each one's rows start in the order.
pub struct Table {
    /// The keys present, ascending.
    pub keys: Vec<u64>,
    /// Where each present key's rows start in the order.
    pub starts: Vec<i64>,
}

/// Most bits per radix digit: a histogram of 2^12 counters stays in L1.
const DIGIT_BITS: u32 = 12;

/// Put in `order` the rows in ascending key order, rows of one key in
/// ascending row order (what a stable sort gives), and return the offset
/// table of the keys present. `spare` is scratch memory of the same length:
/// the caller allocates both (huge pages, where its allocator asks for them,
/// make the first touch of large buffers far cheaper).
///
/// Keys and rows that fit 32 bits each (every `MDBin` copy's parts but the
/// largest) travel packed in one 64-bit word, key above row, through a
/// least significant digit radix sort: one histogram pass, then one scatter
/// per digit that is not the same for every row. Wider ones take a merge sort.
///
/// # Panics
/// If `order` or `spare` is not as long as `keys`.
///
/// # Examples
/// ```
/// use quarry_core::cluster::stable_order;
/// let (mut order, mut spare) = (vec![0; 5], vec![0; 5]);
/// let table = stable_order(&[70000, 3, 70000, 65539, 3], &mut order, &mut spare);
/// assert_eq!(order, vec![1, 4, 3, 0, 2]);
/// assert_eq!((table.keys, table.starts), (vec![3, 65539, 70000], vec![0, 2, 3]));
/// ```
pub fn stable_order(keys: &[u64], order: &mut [u64], spare: &mut [u64]) -> Table {
    assert!(
        order.len() == keys.len() && spare.len() == keys.len(),
        "one slot per key"
    );
    let top = keys.iter().copied().max().unwrap_or(0);
    if top > u64::from(u32::MAX) || u32::try_from(keys.len()).is_err() {
        for (slot, row) in order.iter_mut().zip(0u64..) {
            *slot = row;
        }
        order.sort_by_key(|&row| keys[row as usize]);
        let (keys, starts) = offset_table(order.iter().map(|&row| keys[row as usize]));
        return Table { keys, starts };
    }
    for ((word, &key), row) in order.iter_mut().zip(keys).zip(0u64..) {
        *word = (key << 32) | row;
    }
    if radix_sort(order, spare, 64 - top.leading_zeros()) {
        order.copy_from_slice(spare);
    }
    let (keys, starts) = offset_table(order.iter().map(|&word| word >> 32));
    for word in order.iter_mut() {
        *word &= u64::from(u32::MAX); // the row, where its packed word lay
    }
    Table { keys, starts }
}

/// Sort the packed `key << 32 | row` words stably by key, the keys being
/// `bits` wide, moving them between `words` and `spare`; returns whether
/// they ended in `spare`.
fn radix_sort(words: &mut [u64], spare: &mut [u64], bits: u32) -> bool {
    let n = words.len();
    let passes = bits.div_ceil(DIGIT_BITS).max(1);
    let width = bits.div_ceil(passes).max(1); // equal digits, as narrow as they can be
    let radix = 1usize << width;
    let mask = (1u64 << width) - 1;
    let digit = |word: u64, pass: u32| -> usize { ((word >> (32 + pass * width)) & mask) as usize };
    // Every digit's histogram in one pass.
    let mut counts = vec![vec![0usize; radix]; passes as usize];
    for &word in &*words {
        for (pass, hist) in (0..).zip(counts.iter_mut()) {
            hist[digit(word, pass)] += 1;
        }
    }
    let (mut from, mut to) = (words, spare);
    let mut in_spare = false;
    for (pass, hist) in (0..).zip(&counts) {
        if hist.contains(&n) {
            continue; // one digit value throughout: this pass moves nothing
        }
        let mut at = Vec::with_capacity(radix);
        let mut sum = 0;
        for &c in hist {
            at.push(sum);
            sum += c;
        }
        for &word in &*from {
            let d = digit(word, pass);
            to[at[d]] = word;
            at[d] += 1;
        }
        std::mem::swap(&mut from, &mut to);
        in_spare = !in_spare;
    }
    in_spare
}

/// Buffers a worker keeps between parts, and how the last part's rows were
/// grouped ([`group_rows`]). Reused, so a worker touches fresh memory once,
/// not once per part (first touches of large buffers dominate otherwise).
#[derive(Default)]
pub struct Scratch {
    /// Counted (else radix sorted): each row's key as its rank among the
    /// keys present, and where each present key's rows start.
    counted: bool,
    ids: Vec<u32>,
    starts: Vec<u32>,
    counts: Vec<u32>,
    cursor: Vec<u32>,
    /// Radix sort: the rows in key order.
    order: Vec<u32>,
    words: Vec<u64>,
    spare: Vec<u64>,
}

/// Key ranges up to this many counters, or twice the rows, are grouped by a
/// counting sort; wider ones by [`stable_order`]'s radix sort.
const COUNTING_FLOOR: u64 = 1 << 16;

/// Group the rows of `keys` in ascending key order, rows of one key in
/// ascending row order (a stable sort's order), noting in `scratch` how, for
/// [`place`] and [`place_rows`]; returns the offset table of the keys
/// present. Keys spanning a range of at most twice the rows (an `MDBin`
/// part's usually do: its rows cover a few bins of its slowest variable) are
/// counted: one histogram pass, whose prefix sums are the offset table and
/// where each key's rows start, and one pass giving each row its key's rank
/// among the keys present (so placing a column looks up a counter per key
/// present, which stays in cache, not one per key of the range). Wider ones
/// are radix sorted.
///
/// # Panics
/// If there are more than `u32::MAX` rows.
pub fn group_rows(keys: &[u64], scratch: &mut Scratch) -> Table {
    assert!(u32::try_from(keys.len()).is_ok(), "at most u32::MAX rows");
    let (Some(&low), Some(&high)) = (keys.iter().min(), keys.iter().max()) else {
        scratch.counted = true;
        scratch.ids.clear();
        scratch.starts.clear();
        return Table {
            keys: Vec::new(),
            starts: Vec::new(),
        };
    };
    if high - low >= COUNTING_FLOOR.max(2 * keys.len() as u64) {
        let n = keys.len();
        scratch.words.resize(n, 0);
        scratch.spare.resize(n, 0);
        let table = stable_order(keys, &mut scratch.words[..n], &mut scratch.spare[..n]);
        scratch.order.clear();
        scratch
            .order
            .extend(scratch.words[..n].iter().map(|&row| row as u32));
        scratch.counted = false;
        return table;
    }
    let counts = &mut scratch.counts;
    counts.clear();
    counts.resize((high - low) as usize + 1, 0);
    for &key in keys {
        counts[(key - low) as usize] += 1;
    }
    // The offset table; each counter of a key present becomes its rank.
    let (mut present, mut starts, mut at) = (Vec::new(), Vec::new(), 0u32);
    scratch.starts.clear();
    for (key, count) in (low..).zip(counts.iter_mut()) {
        if *count > 0 {
            present.push(key);
            starts.push(i64::from(at));
            scratch.starts.push(at);
            at += *count;
            *count = (present.len() - 1) as u32;
        }
    }
    scratch.ids.clear();
    scratch
        .ids
        .extend(keys.iter().map(|&key| counts[(key - low) as usize]));
    scratch.counted = true;
    Table {
        keys: present,
        starts,
    }
}

/// Put in `out` the `values` of the rows [`group_rows`] grouped (`keys` and
/// `scratch` as it left them) in their order. Counted rows are scattered:
/// the values are read in order and each written at its key's next slot,
/// so writes go to one cache line per key present, where gathering them
/// would read each from anywhere in the part.
///
/// # Panics
/// If `values`, `keys` and `out` differ in length.
pub fn place<T: Plain>(values: &[T], keys: &[u64], scratch: &mut Scratch, out: &mut [T]) {
    assert!(
        values.len() == keys.len() && out.len() == keys.len(),
        "one value per key"
    );
    if scratch.counted {
        let cursor = &mut scratch.cursor;
        cursor.clear();
        cursor.extend_from_slice(&scratch.starts);
        for (&value, &id) in values.iter().zip(&scratch.ids) {
            let slot = &mut cursor[id as usize];
            out[*slot as usize] = value;
            *slot += 1;
        }
    } else {
        for (slot, &row) in out.iter_mut().zip(&scratch.order) {
            *slot = values[row as usize];
        }
    }
}

/// Put in `out` the row numbers `first + row` of the rows [`group_rows`]
/// grouped, in their order (as [`place`] places values).
///
/// # Panics
/// If `keys` and `out` differ in length, or a row does not fit `T` (the
/// caller picks a type that holds them all).
pub fn place_rows<T: Plain + TryFrom<u64>>(
    first: u64,
    keys: &[u64],
    scratch: &mut Scratch,
    out: &mut [T],
) {
    assert_eq!(out.len(), keys.len(), "one row per key");
    let row = |r: u64| T::try_from(first + r).ok().expect("rows fit T");
    if scratch.counted {
        let cursor = &mut scratch.cursor;
        cursor.clear();
        cursor.extend_from_slice(&scratch.starts);
        for (r, &id) in (0u64..).zip(&scratch.ids) {
            let slot = &mut cursor[id as usize];
            out[*slot as usize] = row(r);
            *slot += 1;
        }
    } else {
        for (slot, &r) in out.iter_mut().zip(&scratch.order) {
            *slot = row(u64::from(r));
        }
    }
}

/// Put in `order` the rows in ascending key order, rows of one key in
/// ascending row order, and return the offset table of the keys present:
/// what [`stable_order`] gives, as 32-bit rows, by [`group_rows`].
///
/// # Panics
/// If `order` is not as long as `keys`, or holds more than `u32::MAX` rows.
///
/// # Examples
/// ```
/// use quarry_core::cluster::{order_rows, Scratch};
/// let mut order = vec![0; 5];
/// let table = order_rows(&[9, 3, 9, 4, 3], &mut order, &mut Scratch::default());
/// assert_eq!(order, vec![1, 4, 3, 0, 2]);
/// assert_eq!((table.keys, table.starts), (vec![3, 4, 9], vec![0, 2, 3]));
/// ```
pub fn order_rows(keys: &[u64], order: &mut [u32], scratch: &mut Scratch) -> Table {
    let table = group_rows(keys, scratch);
    place_rows(0, keys, scratch, order);
    table
}

/// Plain numbers whose memory is their bytes (no padding, every bit pattern
/// valid): what a column of a copy holds.
pub trait Plain: Copy + Default + Send + Sync {}
impl Plain for u8 {}
impl Plain for u16 {}
impl Plain for u32 {}
impl Plain for u64 {}
impl Plain for i64 {}

/// The bytes of `values`, in memory order.
pub fn as_bytes<T: Plain>(values: &[T]) -> &[u8] {
    // SAFETY: `Plain` is implemented only for primitive integers, which have
    // no padding and no invalid bit patterns, so their memory is
    // `size_of_val(values)` initialised bytes.
    unsafe {
        std::slice::from_raw_parts(values.as_ptr().cast::<u8>(), std::mem::size_of_val(values))
    }
}

/// The distinct keys of an ascending sequence and where each starts.
fn offset_table(sorted: impl Iterator<Item = u64>) -> (Vec<u64>, Vec<i64>) {
    let mut present: Vec<u64> = Vec::new();
    let mut starts = Vec::new();
    for (i, key) in (0i64..).zip(sorted) {
        if present.last() != Some(&key) || starts.is_empty() {
            present.push(key);
            starts.push(i);
        }
    }
    (present, starts)
}

/// The CRC-32 of `bytes` continuing from `start` (`zlib.crc32`'s).
#[must_use]
pub fn crc32(bytes: &[u8], start: u32) -> u32 {
    let mut hasher = crc32fast::Hasher::new_with_initial(start);
    hasher.update(bytes);
    hasher.finalize()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn order_is_a_stable_sort(keys in prop::collection::vec(0u64..(1 << 40), 0..400),
                                  small in 1u64..50) {
            let narrow: [Vec<u64>; 2] = [keys.iter().map(|k| k % small).collect(), keys.iter().map(|k| k >> 9).collect()];
            for keys in [keys.clone(), narrow[0].clone(), narrow[1].clone()] {
                let mut want: Vec<i64> = (0..keys.len() as i64).collect();
                want.sort_by_key(|&i| keys[i as usize]);
                let (mut order, mut spare) = (vec![0; keys.len()], vec![0; keys.len()]);
                let got = stable_order(&keys, &mut order, &mut spare);
                let order: Vec<i64> = order.iter().map(|&r| r as i64).collect();
                prop_assert_eq!(&order, &want);
                let mut present: Vec<u64> = keys.clone();
                present.sort_unstable();
                present.dedup();
                prop_assert_eq!(&got.keys, &present);
                for (key, start) in got.keys.iter().zip(&got.starts) {
                    prop_assert_eq!(keys[want[*start as usize] as usize], *key);
                }
            }
        }

        #[test]
        fn bins_follow_the_formula(values in prop::collection::vec(-1e3f64..1e3, 0..9000),
                                   origin in -10.0f64..10.0, size in 0.01f64..50.0,
                                   count in 1u64..40) {
            let mut keys = vec![7u64; values.len()];
            let axis = FloatAxis { origin, size, count, stride: 3 };
            add_bins(&[(Floats::F64(&values), axis)], &mut keys);
            for (v, key) in values.iter().zip(&keys) {
                let scaled = ((v - origin) / size).floor().clamp(0.0, (count - 1) as f64);
                #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
                let want = 7 + 3 * scaled as u64;
                prop_assert_eq!(*key, want);
            }
        }
    }

    proptest! {
        #[test]
        fn counting_order_is_the_stable_sort(keys in prop::collection::vec(0u64..(1 << 40), 0..400),
                                             small in 1u64..50, shift in 0u64..(1 << 40)) {
            // Narrow ranges (counting sort, from any base) and wide ones (radix).
            let narrow: Vec<u64> = keys.iter().map(|k| shift + k % small).collect();
            let mut scratch = Scratch::default();
            for keys in [keys.clone(), narrow] {
                let mut want_order = vec![0; keys.len()];
                let mut spare = vec![0; keys.len()];
                let want = stable_order(&keys, &mut want_order, &mut spare);
                let mut order = vec![0u32; keys.len()];
                let got = order_rows(&keys, &mut order, &mut scratch);
                let order: Vec<u64> = order.iter().map(|&r| u64::from(r)).collect();
                prop_assert_eq!(order, want_order);
                prop_assert_eq!((got.keys, got.starts), (want.keys, want.starts));
            }
        }

        #[test]
        fn placed_values_are_the_values_in_order(keys in prop::collection::vec(0u64..(1 << 30), 1..3000),
                                                 small in 1u64..50, first in 0u64..(1 << 33)) {
            let narrow: Vec<u64> = keys.iter().map(|k| k % small).collect();
            let mut scratch = Scratch::default();
            for keys in [keys.clone(), narrow] {
                let values: Vec<u16> = (0..keys.len()).map(|i| (i * 7919 % 65521) as u16).collect();
                let mut want = vec![0; keys.len()];
                stable_order(&keys, &mut want, &mut vec![0; keys.len()]);
                group_rows(&keys, &mut scratch);
                let mut out = vec![0u16; keys.len()];
                place(&values, &keys, &mut scratch, &mut out);
                let wanted: Vec<u16> = want.iter().map(|&r| values[r as usize]).collect();
                prop_assert_eq!(out, wanted);
                let mut rows = vec![0i64; keys.len()];
                place_rows(first, &keys, &mut scratch, &mut rows);
                let wanted: Vec<i64> = want.iter().map(|&r| (first + r) as i64).collect();
                prop_assert_eq!(rows, wanted);
            }
        }
    }

    #[test]
    fn nan_and_infinities_go_to_their_bins() {
        let values = [f32::NAN, f32::NEG_INFINITY, f32::INFINITY, 0.5];
        let mut keys = [0u64; 4];
        let axis = FloatAxis {
            origin: 0.0,
            size: 0.25,
            count: 4,
            stride: 1,
        };
        add_bins(&[(Floats::F32(&values), axis)], &mut keys);
        assert_eq!(keys, [4, 0, 3, 2]);
    }
}
