//! Clustering rows by a small integer key, as a reorganised copy (`MDBin`)
//! orders them: each row's key is the sum over its variables of a 1-D bin
//! number times a stride ([`add_bins`]), and the rows are put in ascending
//! key order, rows of one key keeping their order ([`group_rows`], then
//! [`stage`] and [`write_spans`] for each column, a span at a time), with the
//! table of where each key's run starts.
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
    /// This value as an `f64` (exactly).
    fn widen(self) -> f64;
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
                // The greatest value of this dtype not above `last`: `last
                // as f32` rounds to nearest, and rounded up it would give a
                // bin past the last (the NaN bin's, or 2^31). Loop-invariant.
                let rounded = last as $t;
                let top = if f64::from(rounded) > f64::from(last) {
                    <$t>::from_bits(rounded.to_bits() - 1)
                } else {
                    rounded
                };
                let clipped = scaled.max(0.0).min(top);
                // Whole and in range (`last` < 2^31): exact, and 32-bit
                // lanes vectorise where 64-bit ones do not. Unchecked: `as`
                // saturates (and maps NaN to 0), which LLVM cannot do in
                // vector lanes, so `as` made this loop scalar (a compare
                // and a branch per value).
                // SAFETY: `clipped` is never NaN (max returns the number
                // when one operand is NaN, and 0 is one) and lies in
                // [0, top], top <= last < 2^31: it fits i32.
                let bin = unsafe { clipped.to_int_unchecked::<i32>() } as u32;
                if scaled.is_nan() { nan } else { bin }
            }

            #[inline]
            #[allow(clippy::cast_possible_truncation)]
            fn from_f64(value: f64) -> Self {
                value as $t
            }

            #[inline]
            fn widen(self) -> f64 {
                f64::from(self)
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
pub struct FloatAxis<'a> {
    pub origin: f64,
    pub size: f64,
    pub count: u64,
    pub stride: u64,
    /// Edges the bins are corrected to (the size's decimal multiples, as a
    /// query types them: `quarry.reorg.binning`), `count + 2` values: NaN,
    /// the inner edges, NaN twice. A value's bin by the formula moves up one
    /// where the value is at or above the next edge, down one where it is
    /// below its own (NaN compares false: the end bins and the NaN bin
    /// stay). None: the formula's own edges.
    pub decimal: Option<&'a [f64]>,
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

/// A key as rows are clustered by it: 64 bits, or 32 where every key fits
/// them (half the memory a part's keys take, and half the traffic of each
/// pass over them).
pub trait Key: Copy + Default + Ord + Send + Sync + Into<u64> {
    /// The greatest key this type holds.
    const MAX: u64;
    /// `self + bin * stride`, which the caller makes sure fits.
    #[must_use]
    fn plus(self, bin: u32, stride: u64) -> Self;
}

impl Key for u64 {
    const MAX: u64 = u64::MAX;

    #[inline]
    fn plus(self, bin: u32, stride: u64) -> Self {
        self + u64::from(bin) * stride
    }
}

impl Key for u32 {
    const MAX: u64 = u32::MAX as u64;

    #[inline]
    #[allow(clippy::cast_possible_truncation)] // the caller makes sure it fits
    fn plus(self, bin: u32, stride: u64) -> Self {
        self + bin * stride as u32
    }
}

/// Rows binned at a time: every column's slice and the keys' stay in cache.
const CHUNK: usize = 4096;

/// Add to each row's key the sum over `columns` of its bin number times the
/// axis' stride, in one pass over the keys; returns the least and the
/// greatest key after it ((0, 0) for no rows: what [`group_rows_within`]
/// takes). The arithmetic is each values' own dtype's, step by step as
/// `NumPy`'s `floor((v - origin) / size)` rounds, so the bins agree with
/// the edges found from that formula.
///
/// # Panics
/// If a column's length is not the keys', or an axis has no bin or more
/// than 2^31.
pub fn add_bins<K: Key>(columns: &[(Floats<'_>, FloatAxis<'_>)], keys: &mut [K]) -> (u64, u64) {
    bin_rows(columns, keys, false)
}

/// Set each row's key to the sum over `columns` (at least one) of its bin
/// number times the axis' stride: [`add_bins`] to keys of zero, without
/// writing the zeros first.
///
/// # Panics
/// As [`add_bins`], or if `columns` is empty.
pub fn set_bins<K: Key>(columns: &[(Floats<'_>, FloatAxis<'_>)], keys: &mut [K]) -> (u64, u64) {
    assert!(!columns.is_empty(), "at least one column to bin");
    bin_rows(columns, keys, true)
}

/// The greatest key `columns` can give (NaN's bin included), if it fits 64 bits.
#[must_use]
pub fn greatest_key(columns: &[(Floats<'_>, FloatAxis<'_>)]) -> Option<u64> {
    columns.iter().try_fold(0u64, |sum, (_, axis)| {
        sum.checked_add(axis.count.checked_mul(axis.stride)?)
    })
}

fn bin_rows<K: Key>(
    columns: &[(Floats<'_>, FloatAxis<'_>)],
    keys: &mut [K],
    set: bool,
) -> (u64, u64) {
    if K::MAX < u64::MAX {
        let top = greatest_key(columns).filter(|&top| set && top <= K::MAX);
        assert!(top.is_some(), "narrow keys are set, and hold every key");
    }
    for (values, axis) in columns {
        assert_eq!(values.len(), keys.len(), "one key per value");
        assert!(
            axis.count > 0 && axis.count <= 1 << 31,
            "an axis has 1 to 2^31 bins"
        );
        assert!(
            axis.decimal
                .is_none_or(|t| t.len() as u64 == axis.count + 2),
            "count + 2 decimal edges"
        );
    }
    if keys.is_empty() {
        return (0, 0);
    }
    let (mut low, mut high) = (u64::MAX, 0);
    for (at, chunk) in (0..).step_by(CHUNK).zip(keys.chunks_mut(CHUNK)) {
        let rows = at..at + chunk.len();
        for (k, (values, axis)) in columns.iter().enumerate() {
            let set = set && k == 0;
            match values {
                Floats::F32(v) => add_axis(&v[rows.clone()], chunk, axis, set),
                Floats::F64(v) => add_axis(&v[rows.clone()], chunk, axis, set),
            }
        }
        // The bounds while the chunk's keys are in cache: a pass over all
        // of them would read them from memory once more.
        let first = chunk[0];
        let (l, h) = chunk
            .iter()
            .fold((first, first), |(l, h), &key| (l.min(key), h.max(key)));
        (low, high) = (low.min(l.into()), high.max(h.into()));
    }
    (low, high)
}

fn add_axis<T: BinFloat, K: Key>(values: &[T], keys: &mut [K], axis: &FloatAxis<'_>, set: bool) {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU has AVX2, checked just above.
        unsafe {
            if set {
                add_axis_avx2::<T, K, true>(values, keys, axis);
            } else {
                add_axis_avx2::<T, K, false>(values, keys, axis);
            }
        }
        return;
    }
    if set {
        add_axis_portable::<T, K, true>(values, keys, axis);
    } else {
        add_axis_portable::<T, K, false>(values, keys, axis);
    }
}

/// [`add_axis_portable`] compiled for AVX2: eight floats a step, some
/// four times faster than the baseline x86-64 build's scalar loop.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn add_axis_avx2<T: BinFloat, K: Key, const SET: bool>(
    values: &[T],
    keys: &mut [K],
    axis: &FloatAxis<'_>,
) {
    add_axis_portable::<T, K, SET>(values, keys, axis);
}

#[inline(always)]
#[allow(clippy::inline_always)] // inlined into the AVX2 copy, so it is compiled for AVX2
fn add_axis_portable<T: BinFloat, K: Key, const SET: bool>(
    values: &[T],
    keys: &mut [K],
    axis: &FloatAxis<'_>,
) {
    let (origin, size) = (T::from_f64(axis.origin), T::from_f64(axis.size));
    // Checked by add_bins: at most 2^31 bins.
    let (last, nan) = ((axis.count - 1) as u32, axis.count as u32);
    for (keys, values) in keys.chunks_mut(CHUNK).zip(values.chunks(CHUNK)) {
        // The bins first, in 32-bit lanes; then the keys, in 64-bit ones.
        let mut bins = [0u32; CHUNK];
        let line = 64 / std::mem::size_of::<T>();
        for (bins, values) in bins.chunks_mut(line).zip(values.chunks(line)) {
            prefetch_ahead(values);
            for (bin, &v) in bins.iter_mut().zip(values) {
                *bin = v.bin(origin, size, last, nan);
            }
        }
        if let Some(edges) = axis.decimal {
            for (bin, &v) in bins.iter_mut().zip(values) {
                let at = *bin as usize;
                // SAFETY: a bin is at most `count` (the NaN bin's) and the
                // table `count + 2` long (both checked by add_bins), so
                // `at + 1` is inside it. Unchecked, the loop vectorises (a
                // gather a lane); with a bounds check it stays scalar.
                let (own, next) =
                    unsafe { (*edges.get_unchecked(at), *edges.get_unchecked(at + 1)) };
                let x = v.widen();
                *bin = *bin + u32::from(x >= next) - u32::from(x < own);
            }
        }
        if let Ok(stride) = u32::try_from(axis.stride) {
            // 32 by 32 bits: one (widening) multiply a lane.
            let stride = u64::from(stride);
            for (key, &bin) in keys.iter_mut().zip(&bins) {
                *key = if SET { K::default() } else { *key }.plus(bin, stride);
            }
        } else {
            for (key, &bin) in keys.iter_mut().zip(&bins) {
                *key = if SET { K::default() } else { *key }.plus(bin, axis.stride);
            }
        }
    }
}

/// How far ahead of the values being read their memory is asked for: a
/// source lent by a memory map sits in 4 KiB pages, whose boundaries the
/// hardware's prefetcher does not cross.
const PREFETCH_AHEAD: usize = 4096;

/// Ask for the memory [`PREFETCH_AHEAD`] bytes past each cache line of
/// `values`, before they are read: called a line or a chunk at a time, it
/// keeps the next page of a memory map coming.
#[inline(always)]
#[allow(clippy::inline_always)]
pub(crate) fn prefetch_ahead<T>(values: &[T]) {
    let ahead = values.as_ptr().cast::<u8>().wrapping_add(PREFETCH_AHEAD);
    for line in (0..std::mem::size_of_val(values)).step_by(64) {
        prefetch(ahead.wrapping_add(line));
    }
}

#[inline(always)]
#[allow(clippy::inline_always)]
fn prefetch(at: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch is a hint: it never faults, wherever it points.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(at.cast::<i8>());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = at;
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
/// let table = stable_order(&[70000u64, 3, 70000, 65539, 3], &mut order, &mut spare);
/// assert_eq!(order, vec![1, 4, 3, 0, 2]);
/// assert_eq!((table.keys, table.starts), (vec![3, 65539, 70000], vec![0, 2, 3]));
/// ```
pub fn stable_order<K: Key>(keys: &[K], order: &mut [u64], spare: &mut [u64]) -> Table {
    assert!(
        order.len() == keys.len() && spare.len() == keys.len(),
        "one slot per key"
    );
    let top: u64 = keys.iter().copied().max().map_or(0, Into::into);
    if top > u64::from(u32::MAX) || u32::try_from(keys.len()).is_err() {
        for (slot, row) in order.iter_mut().zip(0u64..) {
            *slot = row;
        }
        order.sort_by_key(|&row| keys[row as usize]);
        let (keys, starts) = offset_table(order.iter().map(|&row| keys[row as usize].into()));
        return Table { keys, starts };
    }
    for ((word, &key), row) in order.iter_mut().zip(keys).zip(0u64..) {
        *word = (key.into() << 32) | row;
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

/// Rows of the grouped order written at a time: a span of a column (256 KiB
/// of 4-byte values) is assembled in cache, checksummed there and handed to
/// the kernel from there, so no column of a part is ever laid out whole in
/// its final order.
pub const SPAN_ROWS: usize = 1 << 16;
// A position within a span is kept in 16 bits (`Scratch::staged_position`).
const _: () = assert!(SPAN_ROWS <= 1 << 16);

/// Buffers a worker keeps between parts, and where the last part's rows go
/// ([`group_rows`]). Reused, so a worker touches fresh memory once, not once
/// per part (first touches of large buffers dominate otherwise).
#[derive(Default)]
pub struct Scratch {
    /// Counting by rank: a bit per key of the part's range, set where the
    /// key is present; the rank of each 64 bits' first; a counter per key present.
    present: Vec<u64>,
    rank: Vec<u32>,
    counts: Vec<u32>,
    /// Counting directly: a counter per key of the range, each zero between
    /// calls (unless `tally_in_use`: a call stopped half way); the keys
    /// present, as offsets from the least.
    tally: Vec<u32>,
    tally_in_use: bool,
    keys_present: Vec<u32>,
    /// Radix sort: the packed words and their spare.
    words: Vec<u64>,
    spare: Vec<u64>,
    /// Radix sort: each row's position in the grouped order.
    position: Vec<u32>,
    /// Each row's slot in the staged order: the next free one of the span
    /// of [`SPAN_ROWS`] its position falls in, when it was grouped. Noted
    /// then, so staging a column is a plain scatter, with no cursor to
    /// carry from row to row.
    slot: Vec<u32>,
    /// Each position within its span (spans are [`SPAN_ROWS`] = 2^16 rows,
    /// so 16 bits hold it), rows regrouped by span ([`stage`]'s order).
    staged_position: Vec<u16>,
    /// Where the next row of each span goes while grouping.
    cursor: Vec<usize>,
    /// How the large buffers of slots and of positions are allocated
    /// (None: as any `Vec`), given the buffer and the length it must reach.
    reserve: Option<(Reserve<u32>, Reserve<u16>)>,
}

/// Makes room in an empty buffer for the length it must reach.
pub type Reserve<T> = fn(&mut Vec<T>, usize);

impl Scratch {
    /// Scratch whose large buffers of slots and of positions are made room
    /// for by `reserve_slots` and `reserve_positions` (given an empty buffer
    /// and the length it must reach): huge pages, say, where writes spread
    /// over megabytes would miss the TLB on 4 KiB pages.
    #[must_use]
    pub fn reserving(reserve_slots: Reserve<u32>, reserve_positions: Reserve<u16>) -> Self {
        Scratch {
            reserve: Some((reserve_slots, reserve_positions)),
            ..Scratch::default()
        }
    }
}

/// Key ranges up to this many keys, or twice the rows, are grouped by a
/// counting sort; wider ones by [`stable_order`]'s radix sort.
const COUNTING_FLOOR: u64 = 1 << 16;

/// Key ranges up to this many keys are always counted with a counter per
/// key of the range: all of them (1 MiB) stay in cache.
const SMALL_RANGE: usize = 1 << 18;

/// Rows whose keys tell how a wider range is counted: a part whose first
/// rows' counters lie in at most [`LOCAL_LINES`] cache lines (64 bytes, 16
/// counters each) touches few of them at a time. Rows written domain by
/// domain, or cell by cell, as simulations write them, do: the benchmark's
/// particles' first 16,384 rows have about 1,150 keys in 155 lines. Keys in no
/// order touch a line per key, and by rank in a bitmap they are counted in
/// less time from about 1,000 keys on.
const PROBE_ROWS: usize = 1 << 14;
const LOCAL_LINES: usize = 512;

/// Whether the counters of the first [`PROBE_ROWS`] of `keys` (less `low`)
/// lie in at most [`LOCAL_LINES`] cache lines. Found without touching them:
/// a probe of counters scattered over megabytes costs a miss a row.
fn local_keys<K: Key>(keys: &[K], low: u64) -> bool {
    const PER_LINE: u64 = 16;
    let mut lines: Vec<u64> = keys
        .iter()
        .take(PROBE_ROWS)
        .map(|&key| (key.into() - low) / PER_LINE)
        .collect();
    lines.sort_unstable();
    lines.dedup();
    lines.len() <= LOCAL_LINES
}

/// Find where each row of `keys` goes when the rows are grouped in
/// ascending key order, rows of one key in ascending row order (a stable
/// sort's order), noting it in `scratch` for [`stage`] and [`write_spans`];
/// returns the offset table of the keys present. [`group_rows_within`],
/// with the keys' least and greatest found here.
///
/// # Panics
/// If there are more than `u32::MAX` rows.
pub fn group_rows<K: Key>(keys: &[K], scratch: &mut Scratch) -> Table {
    let first = keys.first().copied().unwrap_or_default();
    let (low, high) = keys.iter().fold((first, first), |(low, high), &key| {
        (low.min(key), high.max(key))
    });
    group_rows_within(keys, (low.into(), high.into()), scratch)
}

/// [`group_rows`] of `keys` whose least and greatest are `bounds` (as
/// [`set_bins`] returns them).
///
/// Keys spanning a range of at most twice the rows (an `MDBin` part's
/// usually do: its rows cover a few bins of its slowest variable) are
/// counted: a histogram pass, whose prefix sums are the offset table and
/// each key's first position, and one pass giving each row its key's next
/// position (regrouping the positions by span on the way, and noting each
/// row's slot in that order for [`stage`]). The counters are found one of
/// two ways:
/// - a counter per key of the range, where few of them are touched at a
///   time (a small range, or a part whose first rows hold few keys: see
///   [`PROBE_ROWS`]), the keys present listed as they are first counted;
/// - else by rank: the keys present are marked in a bitmap of the range
///   (which stays in cache: a part's range spans millions of keys, of which
///   some tens of thousands are present), and each row's counter is the
///   rank of its key's bit, noted in its slot for the last pass.
///
/// Wider ranges are radix sorted.
///
/// Columns are then placed in two streaming passes instead of one scatter
/// to a slot per key present (tens of thousands of them, scattered over a
/// part, nearly every write missing the cache and the TLB): [`stage`]
/// regroups a column's rows by the output span they fall in (a few dozen
/// sequential streams), and [`write_spans`] puts each span's rows in place
/// in a buffer that stays in cache.
///
/// # Panics
/// If there are more than `u32::MAX` rows, or (where the range is counted)
/// a key lies outside `bounds`, which must be the keys' least and greatest.
pub fn group_rows_within<K: Key>(keys: &[K], bounds: (u64, u64), scratch: &mut Scratch) -> Table {
    let n = keys.len();
    assert!(u32::try_from(n).is_ok(), "at most u32::MAX rows");
    let (slots, positions) = (&mut scratch.slot, &mut scratch.staged_position);
    if let Some((reserve_slots, reserve_positions)) = scratch.reserve {
        if slots.capacity() < n {
            *slots = Vec::new();
            reserve_slots(slots, n);
        }
        if positions.capacity() < n {
            *positions = Vec::new();
            reserve_positions(positions, n);
        }
    }
    // Zeros only where they grow: every one is set below.
    slots.resize(n, 0);
    positions.resize(n, 0);
    if keys.is_empty() {
        return Table {
            keys: Vec::new(),
            starts: Vec::new(),
        };
    }
    let (low, high) = bounds;
    assert!(low <= high, "the least key is at most the greatest");
    if high - low >= COUNTING_FLOOR.max(2 * n as u64) {
        let mut spans = Spans::new(&mut scratch.cursor, &mut scratch.staged_position);
        scratch.words.resize(n, 0);
        scratch.spare.resize(n, 0);
        scratch.position.resize(n, 0);
        let table = stable_order(keys, &mut scratch.words[..n], &mut scratch.spare[..n]);
        for (at, &row) in (0u32..).zip(&scratch.words[..n]) {
            scratch.position[row as usize] = at;
        }
        for (slot, &at) in scratch.slot.iter_mut().zip(&scratch.position) {
            *slot = spans.put(at);
        }
        return table;
    }
    let range = usize::try_from(high - low).expect("a range of at most 2^33 keys") + 1;
    if u32::try_from(range).is_ok() && (range <= SMALL_RANGE || local_keys(keys, low)) {
        scratch.count_directly(keys, low, range)
    } else {
        scratch.count_by_rank(keys, low, range)
    }
}

impl Scratch {
    /// [`group_rows_within`]'s counting with a counter per key of the
    /// range, `range` at most `u32::MAX` keys.
    fn count_directly<K: Key>(&mut self, keys: &[K], low: u64, range: usize) -> Table {
        let tally = &mut self.tally;
        if self.tally_in_use {
            tally.fill(0); // a call before stopped half way: its counts are stale
        }
        if tally.len() < range {
            // Zeroed pages from the system, each touched only where a key
            // lands: in 4 KiB pages a part of local rows touches about
            // 1 MiB of its 20 MiB of counters, where huge pages would have
            // all of it zeroed, for each call's new workers.
            *tally = Vec::new(); // the smaller one freed first
            *tally = vec![0; range];
        }
        self.tally_in_use = true;
        let tally = &mut tally[..range];
        let present = &mut self.keys_present;
        present.clear();
        for &key in keys {
            #[allow(clippy::cast_possible_truncation)] // below `range`, which fits u32
            let at = (key.into() - low) as u32;
            let counter = &mut tally[at as usize];
            if *counter == 0 {
                present.push(at); // listed when first counted
            }
            *counter += 1;
        }
        // Sorted, unless so many are present that a pass over the counters
        // is quicker.
        if present.len() <= range / 64 {
            present.sort_unstable();
        } else {
            present.clear();
            present.extend(
                (0u32..)
                    .zip(&*tally)
                    .filter(|&(_, &n)| n != 0)
                    .map(|(at, _)| at),
            );
        }
        // The offset table; each counter becomes its key's first position.
        let (mut keys_present, mut starts, mut at) = (
            Vec::with_capacity(present.len()),
            Vec::with_capacity(present.len()),
            0u32,
        );
        for &key in &*present {
            keys_present.push(low + u64::from(key));
            starts.push(i64::from(at));
            let counter = &mut tally[key as usize];
            (at, *counter) = (at + *counter, at);
        }
        let mut spans = Spans::new(&mut self.cursor, &mut self.staged_position);
        for (slot, &key) in self.slot.iter_mut().zip(keys) {
            #[allow(clippy::cast_possible_truncation)] // below `range`
            let next = &mut tally[(key.into() - low) as usize];
            *slot = spans.put(*next);
            *next += 1;
        }
        for &key in &*present {
            tally[key as usize] = 0;
        }
        self.tally_in_use = false;
        Table {
            keys: keys_present,
            starts,
        }
    }

    /// [`group_rows_within`]'s counting by rank in a bitmap of the keys present.
    fn count_by_rank<K: Key>(&mut self, keys: &[K], low: u64, range: usize) -> Table {
        // The keys present are marked in a bitmap of the range (a bit per
        // key: 1/32 of a counter per key, and it stays in cache where a
        // counter per key of a wide range would not); each present key's
        // counter is then found by its rank among them, so only as many
        // counters as keys present.
        self.present.clear();
        self.present.resize(range.div_ceil(64), 0);
        let present_bits = &mut self.present[..];
        for &key in keys {
            let at = (key.into() - low) as usize;
            present_bits[at / 64] |= 1 << (at % 64);
        }
        // Each word's rank: how many keys present lie in the words before it.
        self.rank.clear();
        let mut sum = 0u32;
        self.rank.extend(present_bits.iter().map(|&word| {
            let before = sum;
            sum += word.count_ones();
            before
        }));
        let (present_bits, rank) = (&*present_bits, &self.rank[..]);
        let dense = |key: K| -> usize {
            let at = (key.into() - low) as usize;
            let below = present_bits[at / 64] & ((1u64 << (at % 64)) - 1);
            (rank[at / 64] + below.count_ones()) as usize
        };
        self.counts.clear();
        self.counts.resize(sum as usize, 0);
        let counts = &mut self.counts[..];
        let slots = &mut self.slot[..];
        // Each row's counter is noted in its slot, so the last pass looks it
        // up once more from there, not from the bitmap and the ranks again.
        for (slot, &key) in slots.iter_mut().zip(keys) {
            let counter = dense(key);
            counts[counter] += 1;
            *slot = counter as u32;
        }
        // The offset table; each counter becomes its key's first position.
        let (mut present, mut starts, mut at) = (
            Vec::with_capacity(counts.len()),
            Vec::with_capacity(counts.len()),
            0u32,
        );
        let mut count = counts.iter_mut();
        for (base, &word) in (low..).step_by(64).zip(present_bits.iter()) {
            let mut bits = word;
            while bits != 0 {
                present.push(base + u64::from(bits.trailing_zeros()));
                starts.push(i64::from(at));
                let next = count.next().expect("a counter per key present");
                (at, *next) = (at + *next, at);
                bits &= bits - 1;
            }
        }
        let mut spans = Spans::new(&mut self.cursor, &mut self.staged_position);
        for slot in slots {
            let next = &mut counts[*slot as usize];
            *slot = spans.put(*next);
            *next += 1;
        }
        Table {
            keys: present,
            starts,
        }
    }
}

/// Where the next row of each span of [`SPAN_ROWS`] positions goes while
/// rows are regrouped by span, and the positions so regrouped.
struct Spans<'a> {
    cursor: &'a mut [usize],
    staged: &'a mut [u16],
}

impl<'a> Spans<'a> {
    /// The cursors of the spans of as many positions as `staged` holds,
    /// each at its span's start.
    fn new(cursor: &'a mut Vec<usize>, staged: &'a mut [u16]) -> Self {
        cursor.clear();
        cursor.extend((0..staged.len().div_ceil(SPAN_ROWS)).map(|span| span * SPAN_ROWS));
        Spans { cursor, staged }
    }

    /// Put position `at` at the next slot of its span (as its place within
    /// the span); returns that slot.
    #[inline]
    #[allow(clippy::cast_possible_truncation)] // at most 2^32 rows; SPAN_ROWS is 2^16
    fn put(&mut self, at: u32) -> u32 {
        let next = &mut self.cursor[at as usize / SPAN_ROWS];
        let slot = *next;
        self.staged[slot] = (at as usize % SPAN_ROWS) as u16;
        *next += 1;
        slot as u32
    }
}

/// Rows staged at a time by [`stage`]: a few pages of a column, still in
/// the first-level cache when `seen` reads them.
const STAGE_ROWS: usize = 4096;

/// Put in `staged` the `values` of the rows [`group_rows`] grouped,
/// regrouped by the span of [`SPAN_ROWS`] positions each falls in (spans in
/// order, rows in row order within a span): what [`write_spans`] takes.
/// `seen` is shown the values in row order, a few thousand at a time, each
/// batch just after it was staged (to checksum them while in cache).
///
/// Each value goes to the slot [`group_rows`] noted for its row: a plain
/// scatter to a few dozen sequential streams, with no cursor carried from
/// row to row (consecutive rows often share a span, and each would wait on
/// the load, increment and store of its cursor by the row before).
///
/// # Panics
/// If `values` and `staged` are not as long as the keys grouped.
pub fn stage<T: Plain>(
    values: &[T],
    scratch: &Scratch,
    staged: &mut [T],
    mut seen: impl FnMut(&[T]),
) {
    let slots = &scratch.slot[..];
    assert!(
        values.len() == slots.len() && staged.len() == slots.len(),
        "one value per key grouped"
    );
    let line = (64 / std::mem::size_of::<T>()).max(1);
    for (values, slots) in values.chunks(STAGE_ROWS).zip(slots.chunks(STAGE_ROWS)) {
        for (values, slots) in values.chunks(line).zip(slots.chunks(line)) {
            prefetch_ahead(values);
            for (&value, &slot) in values.iter().zip(slots) {
                staged[slot as usize] = value;
            }
        }
        seen(values);
    }
}

/// [`stage`] for the rows' own numbers: `first + row`, as `T`.
///
/// # Panics
/// If `staged` is not as long as the keys grouped, or a row does not fit
/// `T` (the caller picks a type that holds them all).
pub fn stage_rows<T: Plain + TryFrom<u64>>(first: u64, scratch: &Scratch, staged: &mut [T]) {
    assert_eq!(staged.len(), scratch.slot.len(), "one slot per key grouped");
    for (row, &slot) in (first..).zip(&scratch.slot) {
        staged[slot as usize] = T::try_from(row).ok().expect("rows fit T");
    }
}

/// Hand `write` each span of [`SPAN_ROWS`] values of `staged` (as
/// [`stage`] left them) in the grouped order, first to last, assembled in
/// `span` (a buffer kept in cache); stops at the first error `write` returns.
///
/// # Panics
/// If `staged` is not as long as the keys grouped.
pub fn write_spans<T: Plain, E>(
    staged: &[T],
    scratch: &Scratch,
    span: &mut Vec<T>,
    mut write: impl FnMut(&[T]) -> Result<(), E>,
) -> Result<(), E> {
    assert_eq!(
        staged.len(),
        scratch.staged_position.len(),
        "staged as grouped"
    );
    for (values, positions) in staged
        .chunks(SPAN_ROWS)
        .zip(scratch.staged_position.chunks(SPAN_ROWS))
    {
        span.resize(values.len(), T::default()); // zeros only where it grows: all are set
        for (&value, &at) in values.iter().zip(positions) {
            span[usize::from(at)] = value;
        }
        write(span)?;
    }
    Ok(())
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
/// let table = order_rows(&[9u64, 3, 9, 4, 3], &mut order, &mut Scratch::default());
/// assert_eq!(order, vec![1, 4, 3, 0, 2]);
/// assert_eq!((table.keys, table.starts), (vec![3, 4, 9], vec![0, 2, 3]));
/// ```
pub fn order_rows<K: Key>(keys: &[K], order: &mut [u32], scratch: &mut Scratch) -> Table {
    assert_eq!(order.len(), keys.len(), "one slot per key");
    let table = group_rows(keys, scratch);
    let mut staged = vec![0u32; keys.len()];
    stage_rows(0, scratch, &mut staged);
    let (mut span, mut at) = (Vec::new(), 0);
    write_spans(&staged, scratch, &mut span, |rows| {
        order[at..at + rows.len()].copy_from_slice(rows);
        at += rows.len();
        Ok::<(), ()>(())
    })
    .expect("writing to memory does not fail");
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

/// Rows of a column of a copy checked together: a query reading some rows
/// of a copy checks the CRC-32 of each block they fall in (16 KiB of 4-byte
/// values), not of the whole part.
pub const CHECK_ROWS: usize = 4096;

/// The CRC-32s of a column written in pieces: of each block of
/// [`CHECK_ROWS`] values from the first (the last one shorter), and of all
/// of it, in one pass over the bytes.
#[derive(Default)]
pub struct BlockCrcs {
    whole: crc32fast::Hasher,
    /// Each whole block's CRC-32, in order.
    blocks: Vec<u32>,
    open: Option<(crc32fast::Hasher, usize)>,
}

impl BlockCrcs {
    /// Add the next values (any number: blocks span the pieces). Each byte
    /// is read once: a block's CRC-32 joins the whole's when it is complete.
    pub fn update<T: Plain>(&mut self, mut values: &[T]) {
        while !values.is_empty() {
            let (mut block, rows) = self.open.take().unwrap_or_default();
            let take = (CHECK_ROWS - rows).min(values.len());
            block.update(as_bytes(&values[..take]));
            values = &values[take..];
            if rows + take == CHECK_ROWS {
                self.close(&block);
            } else {
                self.open = Some((block, rows + take));
            }
        }
    }

    fn close(&mut self, block: &crc32fast::Hasher) {
        self.whole.combine(block);
        self.blocks.push(block.clone().finalize());
    }

    /// The CRC-32 of all the values, and of each block (the last one as far
    /// as it goes).
    #[must_use]
    pub fn finish(mut self) -> (u32, Vec<u32>) {
        if let Some((block, _)) = self.open.take() {
            self.close(&block);
        }
        (self.whole.finalize(), self.blocks)
    }
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
            let axis = FloatAxis { origin, size, count, stride: 3, decimal: None };
            let added = add_bins(&[(Floats::F64(&values), axis)], &mut keys);
            let mut set = vec![u64::MAX; values.len()]; // whatever was there
            let bounds = set_bins(&[(Floats::F64(&values), axis), (Floats::F64(&values), axis)], &mut set);
            // Each returns its keys' least and greatest ((0, 0) for none).
            let least_greatest = |keys: &[u64]| {
                (keys.iter().copied().min().unwrap_or(0), keys.iter().copied().max().unwrap_or(0))
            };
            prop_assert_eq!(added, least_greatest(&keys));
            prop_assert_eq!(bounds, least_greatest(&set));
            let mut set32 = vec![u32::MAX; values.len()];
            set_bins(&[(Floats::F64(&values), axis), (Floats::F64(&values), axis)], &mut set32);
            prop_assert!(set.iter().zip(&set32).all(|(&a, &b)| a == u64::from(b)));
            for ((v, key), set) in values.iter().zip(&keys).zip(&set) {
                let scaled = ((v - origin) / size).floor().clamp(0.0, (count - 1) as f64);
                #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
                let want = 7 + 3 * scaled as u64;
                prop_assert_eq!(*key, want);
                prop_assert_eq!(*set, 2 * (want - 7));
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
                prop_assert_eq!(&order, &want_order);
                prop_assert_eq!((&got.keys, &got.starts), (&want.keys, &want.starts));
                // The same keys held in 32 bits, where they fit.
                if let Ok(narrow) = keys.iter().map(|&k| u32::try_from(k)).collect::<Result<Vec<u32>, _>>() {
                    let mut order32 = vec![0u32; keys.len()];
                    let got = order_rows(&narrow, &mut order32, &mut scratch);
                    let order32: Vec<u64> = order32.iter().map(|&r| u64::from(r)).collect();
                    prop_assert_eq!(order32, want_order);
                    prop_assert_eq!((got.keys, got.starts), (want.keys, want.starts));
                }
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
                let mut staged = vec![0u16; keys.len()];
                stage(&values, &scratch, &mut staged, |_| ());
                let wanted: Vec<u16> = want.iter().map(|&r| values[r as usize]).collect();
                prop_assert_eq!(spans_of(&staged, &scratch), wanted);
                let mut rows = vec![0i64; keys.len()];
                stage_rows(first, &scratch, &mut rows);
                let wanted: Vec<i64> = want.iter().map(|&r| (first + r) as i64).collect();
                prop_assert_eq!(spans_of(&rows, &scratch), wanted);
            }
        }
    }

    proptest! {
        #[test]
        fn block_crcs_are_each_blocks_and_the_wholes(pieces in prop::collection::vec(0usize..9000, 0..5)) {
            let values: Vec<u32> = (0..pieces.iter().sum::<usize>() as u32).map(|i| i.wrapping_mul(2_654_435_761)).collect();
            let mut crcs = BlockCrcs::default();
            let mut at = 0;
            for n in &pieces {
                crcs.update(&values[at..at + n]);
                at += n;
            }
            let (whole, blocks) = crcs.finish();
            prop_assert_eq!(whole, crc32(as_bytes(&values), 0));
            let want: Vec<u32> = values.chunks(CHECK_ROWS).map(|b| crc32(as_bytes(b), 0)).collect();
            prop_assert_eq!(blocks, want);
        }
    }

    /// What [`write_spans`] hands out, laid end to end.
    fn spans_of<T: Plain>(staged: &[T], scratch: &Scratch) -> Vec<T> {
        let mut out = Vec::new();
        write_spans(staged, scratch, &mut Vec::new(), |span| {
            assert!(span.len() <= SPAN_ROWS);
            out.extend_from_slice(span);
            Ok::<(), ()>(())
        })
        .unwrap();
        out
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(12))]
        #[test]
        fn parts_clustered_in_turn_keep_every_column_in_order(
            parts in prop::collection::vec((1usize..3 * SPAN_ROWS, prop_oneof![1u64..200_000, (1u64 << 20)..(1 << 34)], any::<u64>()), 1..4),
            first in 0u64..(1 << 20),
        ) {
            // Parts longer and shorter than the last (buffers grow and
            // shrink), of one span or several, the last one short; keys
            // counted (narrow spreads) and radix sorted (wide ones).
            let mut scratch = Scratch::reserving(Vec::reserve_exact, Vec::reserve_exact);
            for (n, spread, seed) in parts {
                let keys: Vec<u64> = (0..n as u64)
                    .map(|i| (i ^ seed).wrapping_mul(0x9E37_79B9_7F4A_7C15) % spread)
                    .collect();
                let mut want = vec![0; n];
                stable_order(&keys, &mut want, &mut vec![0; n]);
                let got = group_rows(&keys, &mut scratch);
                let (present, starts) = offset_table(want.iter().map(|&r| keys[r as usize]));
                prop_assert_eq!((got.keys, got.starts), (present, starts));
                let bytes: Vec<u8> = (0..n).map(|i| (i * 131) as u8).collect();
                let words: Vec<u32> = (0..n as u32).map(|i| i.wrapping_mul(2_654_435_761)).collect();
                let longs: Vec<u64> = (0..n as u64).map(|i| i << 40 | i).collect();
                prop_assert_eq!(staged_in_order(&bytes, &scratch), want.iter().map(|&r| bytes[r as usize]).collect::<Vec<_>>());
                prop_assert_eq!(staged_in_order(&words, &scratch), want.iter().map(|&r| words[r as usize]).collect::<Vec<_>>());
                prop_assert_eq!(staged_in_order(&longs, &scratch), want.iter().map(|&r| longs[r as usize]).collect::<Vec<_>>());
                let mut rows = vec![0u32; n];
                stage_rows(first, &scratch, &mut rows);
                let rows = spans_of(&rows, &scratch);
                prop_assert!(rows.iter().zip(&want).all(|(&got, &r)| u64::from(got) == first + r));
            }
        }
    }

    /// `values` staged (checking `seen` is shown them all, in row order)
    /// and written, laid end to end.
    fn staged_in_order<T: Plain + PartialEq + std::fmt::Debug>(
        values: &[T],
        scratch: &Scratch,
    ) -> Vec<T> {
        let mut staged = vec![T::default(); values.len()];
        let mut seen = Vec::new();
        stage(values, scratch, &mut staged, |batch| {
            seen.extend_from_slice(batch);
        });
        assert_eq!(seen, values);
        spans_of(&staged, scratch)
    }

    /// `n` keys: each row's `spread` of a pseudo-random number, added to
    /// `step` times its block of `block` rows.
    fn wide_keys(n: usize, block: usize, step: u64, spread: u64) -> Vec<u32> {
        let mut state = 0x9E37_79B9_7F4A_7C15_u64;
        (0..n)
            .map(|row| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                u32::try_from((row / block) as u64 * step + state % spread).unwrap()
            })
            .collect()
    }

    #[test]
    fn both_ways_of_counting_a_wide_range_give_the_stable_sort() {
        // Keys in no order (counted by rank) and keys in blocks (few lines
        // at a time: counted directly), over 360,000 and 300,000 keys; the
        // same scratch in turn, so each way follows the other.
        let scattered = wide_keys(200_000, 200_000, 0, 360_000);
        let local = wide_keys(200_000, 1_000, 1_500, 200);
        assert!(!local_keys(&scattered, 0) && local_keys(&local, 0));
        let mut scratch = Scratch::default();
        for keys in [&scattered, &local, &scattered, &local] {
            let low = u64::from(*keys.iter().min().unwrap());
            let high = u64::from(*keys.iter().max().unwrap());
            assert!(high - low > SMALL_RANGE as u64 && high - low < 2 * keys.len() as u64);
            let mut want = vec![0; keys.len()];
            let table = stable_order(keys, &mut want, &mut vec![0; keys.len()]);
            let mut order = vec![0u32; keys.len()];
            let got = order_rows(keys, &mut order, &mut scratch);
            assert!(order.iter().zip(&want).all(|(&a, &b)| u64::from(a) == b));
            assert_eq!((got.keys, got.starts), (table.keys, table.starts));
        }
    }

    #[test]
    fn counters_left_by_a_call_stopped_half_way_are_cleared() {
        let keys = wide_keys(5_000, 100, 10, 50);
        let mut want = vec![0; keys.len()];
        stable_order(&keys, &mut want, &mut vec![0; keys.len()]);
        let mut scratch = Scratch::default();
        let mut order = vec![0u32; keys.len()];
        order_rows(&keys, &mut order, &mut scratch);
        scratch.tally.fill(3); // as a panic between counting and clearing leaves them
        scratch.tally_in_use = true;
        order_rows(&keys, &mut order, &mut scratch);
        assert!(order.iter().zip(&want).all(|(&a, &b)| u64::from(a) == b));
    }

    #[test]
    fn parts_of_many_spans_that_do_not_divide_them_keep_the_order() {
        // Several spans, the last one short, keys both counted and radix sorted.
        let n = 3 * SPAN_ROWS + 1234;
        // Buffers made room for by the caller (as huge pages are) change nothing.
        let mut scratch = Scratch::reserving(Vec::reserve_exact, Vec::reserve_exact);
        for spread in [97u64, 1 << 40] {
            let keys: Vec<u64> = (0..n as u64)
                .map(|i| (i * 2_654_435_761) % spread)
                .collect();
            let mut want = vec![0; n];
            stable_order(&keys, &mut want, &mut vec![0; n]);
            let mut order = vec![0u32; n];
            order_rows(&keys, &mut order, &mut scratch);
            assert!(order.iter().zip(&want).all(|(&a, &b)| u64::from(a) == b));
            let values: Vec<u64> = (0..n as u64).map(|i| i * 31).collect();
            let mut staged = vec![0u64; n];
            stage(&values, &scratch, &mut staged, |_| ());
            let placed = spans_of(&staged, &scratch);
            assert!(placed.iter().zip(&want).all(|(&v, &r)| v == r * 31));
        }
    }

    #[test]
    fn a_last_bin_f32_cannot_hold_stays_below_the_nan_bin() {
        // 2^25 + 3 is not an f32: it rounds up to 2^25 + 4, past the last bin.
        let last = (1u32 << 25) + 3;
        assert_eq!(1e30f32.bin(0.0, 1.0, last, last + 1), 1 << 25);
        assert_eq!(
            f32::INFINITY.bin(0.0, 1.0, u32::MAX >> 1, 1 << 31),
            (1 << 31) - 128
        );
        assert_eq!(1e300f64.bin(0.0, 1.0, last, last + 1), last);
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
            decimal: None,
        };
        add_bins(&[(Floats::F32(&values), axis)], &mut keys);
        assert_eq!(keys, [4, 0, 3, 2]);
    }
}
