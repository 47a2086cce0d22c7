//! Evaluating conditions on values instead of an index: arithmetic
//! comparisons (in float64) and exact ranges on unindexed columns.
//!
//! Work is cut by blocks (parallel) and, inside a block, into chunks of
//! [`CHUNK`] rows evaluated op by op over small buffers, so the loops
//! vectorise and nothing the size of a column is allocated. Only rows of the
//! domain are read, so a scan under an AND touches just the surviving rows.

use std::cmp::Ordering;

use rayon::prelude::*;
use roaring::RoaringBitmap;

use crate::binning::BinLookup;
use crate::cluster::prefetch_ahead;
use crate::error::{CoreError, Result};
use crate::eval::Interval;
use crate::key::{Key, Widen};
use crate::pieces;
use crate::rowset::{block_count, check_shape, list_rows, RowSet};

const CHUNK: usize = 1024;

/// A column of stored values, any supported dtype.
#[derive(Clone, Copy, Debug)]
pub enum Values<'a> {
    F32(&'a [f32]),
    F64(&'a [f64]),
    I8(&'a [i8]),
    I16(&'a [i16]),
    I32(&'a [i32]),
    I64(&'a [i64]),
    U8(&'a [u8]),
    U16(&'a [u16]),
    U32(&'a [u32]),
    U64(&'a [u64]),
}

macro_rules! each_values {
    ($v:expr, $s:ident => $body:expr) => {
        match $v {
            Values::F32($s) => $body,
            Values::F64($s) => $body,
            Values::I8($s) => $body,
            Values::I16($s) => $body,
            Values::I32($s) => $body,
            Values::I64($s) => $body,
            Values::U8($s) => $body,
            Values::U16($s) => $body,
            Values::U32($s) => $body,
            Values::U64($s) => $body,
        }
    };
}

impl Values<'_> {
    pub fn len(&self) -> usize {
        each_values!(self, s => s.len())
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Rows `base + rows[i]` as float64 (integers above 2^53 round, as
    /// arithmetic in float64 does).
    // One `as f64` serves every dtype in the macro: exact for the narrow
    // ones, the documented float64 rounding for int64/uint64.
    #[allow(clippy::cast_lossless, clippy::unnecessary_cast, clippy::inline_always)]
    #[inline(always)] // into Program::run's AVX2 copy
    fn fill_f64(&self, base: usize, rows: Rows<'_>, out: &mut [f64]) {
        each_values!(self, s => match rows {
            Rows::Range(start, n) => {
                let values = &s[base + start..base + start + n];
                prefetch_ahead(values);
                for (o, v) in out.iter_mut().zip(values) {
                    *o = *v as f64;
                }
            }
            Rows::List(list) => {
                for (o, &r) in out.iter_mut().zip(list) {
                    *o = s[base + r as usize] as f64;
                }
            }
        });
    }
}

#[derive(Clone, Copy)]
enum Rows<'a> {
    /// `n` consecutive rows from `start` (block-local).
    Range(usize, usize),
    List(&'a [u32]),
}

impl Rows<'_> {
    fn len(&self) -> usize {
        match self {
            Rows::Range(_, n) => *n,
            Rows::List(l) => l.len(),
        }
    }
    fn row(&self, i: usize) -> u32 {
        match self {
            Rows::Range(start, _) => (start + i) as u32,
            Rows::List(l) => l[i],
        }
    }
}

/// One step of a postfix arithmetic program.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Op {
    /// Push column `i` of the scan's inputs.
    Load(usize),
    Const(f64),
    Neg,
    Add,
    Sub,
    Mul,
    Div,
    Pow,
    Sqrt,
    Abs,
    Exp,
    Ln,
    Log10,
    /// Minimum, NaN if either side is NaN (`NumPy`'s `minimum`): a
    /// comparison that reads NaN stays unknown through `min`.
    Min,
    /// Maximum, NaN if either side is NaN (`NumPy`'s `maximum`).
    Max,
}

/// Comparison operators.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cmp {
    Lt,
    Le,
    Gt,
    Ge,
    Eq,
    Ne,
}

impl Cmp {
    /// Whether values in the order `order` satisfy this comparison.
    #[inline]
    fn holds(self, order: Ordering) -> bool {
        match self {
            Cmp::Lt => order == Ordering::Less,
            Cmp::Le => order != Ordering::Greater,
            Cmp::Gt => order == Ordering::Greater,
            Cmp::Ge => order != Ordering::Less,
            Cmp::Eq => order == Ordering::Equal,
            Cmp::Ne => order != Ordering::Equal,
        }
    }
}

/// A validated postfix program: it never pops an empty stack and leaves one value.
#[derive(Clone, Debug)]
pub struct Program {
    ops: Vec<Op>,
    depth: usize,
}

impl Program {
    /// Validate `ops` against `n_columns` inputs.
    ///
    /// # Examples
    /// ```
    /// use quarry_core::scan::{Op, Program};
    /// assert!(Program::new(vec![Op::Load(0), Op::Load(0), Op::Mul], 1).is_ok());
    /// assert!(Program::new(vec![Op::Add], 1).is_err());
    /// ```
    pub fn new(ops: Vec<Op>, n_columns: usize) -> Result<Self> {
        let (mut depth, mut max_depth) = (0usize, 0usize);
        for op in &ops {
            let (pops, pushes) = match op {
                Op::Load(i) if *i >= n_columns => {
                    return Err(CoreError::Invalid(format!(
                        "program loads column {i} of {n_columns}"
                    )));
                }
                Op::Load(_) | Op::Const(_) => (0, 1),
                Op::Neg | Op::Sqrt | Op::Abs | Op::Exp | Op::Ln | Op::Log10 => (1, 1),
                _ => (2, 1),
            };
            depth = depth
                .checked_sub(pops)
                .ok_or_else(|| CoreError::Invalid("program pops an empty stack".into()))?
                + pushes;
            max_depth = max_depth.max(depth);
        }
        if depth != 1 {
            return Err(CoreError::Invalid(format!(
                "program leaves {depth} values, not 1"
            )));
        }
        Ok(Self {
            ops,
            depth: max_depth,
        })
    }

    /// The value of a program that is a single constant.
    fn constant(&self) -> Option<f64> {
        match self.ops[..] {
            [Op::Const(c)] => Some(c),
            _ => None,
        }
    }

    /// The column this program only loads, if that is all it does.
    fn loaded(&self) -> Option<usize> {
        match self.ops[..] {
            [Op::Load(i)] => Some(i),
            _ => None,
        }
    }

    /// Evaluate over `n` rows into `stack[0]`.
    fn run(&self, columns: &[Values<'_>], base: usize, rows: Rows<'_>, stack: &mut [Vec<f64>]) {
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU has AVX2, checked just above.
            unsafe { self.run_avx2(columns, base, rows, stack) };
            return;
        }
        self.run_portable(columns, base, rows, stack);
    }

    /// [`Program::run_portable`] compiled for AVX2: its conversions and
    /// arithmetic take four float64 lanes where the baseline build takes two.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    unsafe fn run_avx2(
        &self,
        columns: &[Values<'_>],
        base: usize,
        rows: Rows<'_>,
        stack: &mut [Vec<f64>],
    ) {
        self.run_portable(columns, base, rows, stack);
    }

    #[inline(always)]
    #[allow(clippy::inline_always)] // inlined into the AVX2 copy, so it is compiled for AVX2
    fn run_portable(
        &self,
        columns: &[Values<'_>],
        base: usize,
        rows: Rows<'_>,
        stack: &mut [Vec<f64>],
    ) {
        let n = rows.len();
        let mut top = 0usize;
        for op in &self.ops {
            match *op {
                Op::Load(i) => {
                    columns[i].fill_f64(base, rows, &mut stack[top][..n]);
                    top += 1;
                }
                Op::Const(c) => {
                    stack[top][..n].fill(c);
                    top += 1;
                }
                Op::Neg | Op::Sqrt | Op::Abs | Op::Exp | Op::Ln | Op::Log10 => {
                    let f: fn(f64) -> f64 = match op {
                        Op::Neg => |x| -x,
                        Op::Sqrt => f64::sqrt,
                        Op::Abs => f64::abs,
                        Op::Exp => f64::exp,
                        Op::Ln => f64::ln,
                        _ => f64::log10,
                    };
                    for x in &mut stack[top - 1][..n] {
                        *x = f(*x);
                    }
                }
                _ => {
                    let (lower, upper) = stack.split_at_mut(top - 1);
                    let (a, b) = (&mut lower[top - 2][..n], &upper[0][..n]);
                    match op {
                        Op::Add => a.iter_mut().zip(b).for_each(|(x, y)| *x += y),
                        Op::Sub => a.iter_mut().zip(b).for_each(|(x, y)| *x -= y),
                        Op::Mul => a.iter_mut().zip(b).for_each(|(x, y)| *x *= y),
                        Op::Div => a.iter_mut().zip(b).for_each(|(x, y)| *x /= y),
                        Op::Pow => a.iter_mut().zip(b).for_each(|(x, y)| *x = x.powf(*y)),
                        Op::Min => a.iter_mut().zip(b).for_each(|(x, y)| *x = nan_min(*x, *y)),
                        _ => a.iter_mut().zip(b).for_each(|(x, y)| *x = nan_max(*x, *y)),
                    }
                    top -= 1;
                }
            }
        }
    }
}

/// The smaller of `a` and `b`, NaN if either is: `f64::min` would drop the
/// NaN and turn an unknown comparison into a true one.
#[inline]
fn nan_min(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() {
        f64::NAN
    } else {
        a.min(b)
    }
}

/// The larger of `a` and `b`, NaN if either is (see [`nan_min`]).
#[inline]
fn nan_max(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() {
        f64::NAN
    } else {
        a.max(b)
    }
}

/// `left cmp right`, both sides float64 programs over the same inputs.
#[derive(Clone, Debug)]
pub struct Comparison {
    pub left: Program,
    pub cmp: Cmp,
    pub right: Program,
}

fn check_inputs(
    columns: &[Values<'_>],
    n_rows: u64,
    domain: Option<&RowSet>,
    block_len: u64,
) -> Result<()> {
    check_shape(n_rows, block_len)?;
    for c in columns {
        if c.len() as u64 != n_rows {
            return Err(CoreError::Invalid(format!(
                "a column holds {} values, the table {n_rows} rows",
                c.len()
            )));
        }
    }
    if let Some(d) = domain {
        if d.n_rows() != n_rows || d.block_len() != block_len {
            return Err(CoreError::Invalid(
                "domain is a row set of another table".into(),
            ));
        }
    }
    Ok(())
}

/// Words of a chunk's masks: a bit per row of a [`CHUNK`].
const CHUNK_WORDS: usize = CHUNK / 64;

/// A block whose domain holds at least one row in this many is scanned
/// whole, then cut to the domain.
const DENSE_DOMAIN: u64 = 8;

/// Per block, the rows to look at and then a (true, unknown) classification
/// of each, collected into two row sets. `classify` sets bit `i` of its two
/// masks (bit `i % 64` of word `i / 64`, every word of them written) where
/// the chunk's `i`-th row is true, and where it is unknown; a row unknown is
/// never true. `scratch` makes what each block's calls of `classify`
/// share (its buffers, made once a block rather than once a chunk).
///
/// Masks rather than lists of rows: a row's verdict is a compare and a
/// shift, with no branch on it (half the rows true at random mispredicts
/// every other branch), and a block scanned whole becomes its bitmap from
/// its words, not row by row.
fn per_block<S, F>(
    n_rows: u64,
    block_len: u64,
    domain: Option<&RowSet>,
    scratch: impl Fn() -> S + Sync,
    classify: F,
) -> Result<(RowSet, RowSet)>
where
    F: Fn(&mut S, usize, Rows<'_>, &mut [u64], &mut [u64]) + Sync,
{
    let blocks: Vec<(RoaringBitmap, RoaringBitmap)> =
        pieces::map(block_count(n_rows, block_len), |b| {
            let mut scratch = scratch();
            let base = b * block_len as usize;
            let len = (n_rows as usize - base).min(block_len as usize);
            let mut whole = || {
                // The whole block: its masks in place (chunks start on a
                // word, CHUNK being a multiple of 64).
                let (mut t, mut u) = (vec![0u64; len.div_ceil(64)], vec![0u64; len.div_ceil(64)]);
                for start in (0..len).step_by(CHUNK) {
                    let n = CHUNK.min(len - start);
                    let words = start / 64..(start + n).div_ceil(64);
                    let (t, u) = (&mut t[words.clone()], &mut u[words]);
                    classify(&mut scratch, base, Rows::Range(start, n), t, u);
                    t.iter_mut().zip(&*u).for_each(|(t, u)| *t &= !u);
                }
                (bitmap_of_words(&mut t), bitmap_of_words(&mut u))
            };
            let Some(domain) = domain.map(|d| &d.blocks()[b]) else {
                return whole();
            };
            if domain.is_empty() {
                return (RoaringBitmap::new(), RoaringBitmap::new());
            }
            if domain.len() * DENSE_DOMAIN >= len as u64 {
                // Rows picked one by one cost several times a row of a
                // whole block's scan: a dense domain is scanned whole and
                // its rows kept.
                let (t, u) = whole();
                return (t & domain, u & domain);
            }
            let mut rows = vec![0u32; domain.len() as usize];
            list_rows(domain, &mut rows, |row| row);
            let (mut t, mut u) = (Vec::new(), Vec::new());
            let (mut t_mask, mut u_mask) = ([0u64; CHUNK_WORDS], [0u64; CHUNK_WORDS]);
            for chunk in rows.chunks(CHUNK) {
                let words = chunk.len().div_ceil(64);
                let (tm, um) = (&mut t_mask[..words], &mut u_mask[..words]);
                classify(&mut scratch, base, Rows::List(chunk), tm, um);
                for (w, (&tw, &uw)) in tm.iter().zip(&*um).enumerate() {
                    push_set_bits(tw & !uw, &chunk[w * 64..], &mut t);
                    push_set_bits(uw, &chunk[w * 64..], &mut u);
                }
            }
            let bitmap = |v: Vec<u32>| RoaringBitmap::from_sorted_iter(v).expect("rows ascend");
            (bitmap(t), bitmap(u))
        });
    let (t, u): (Vec<_>, Vec<_>) = blocks.into_iter().unzip();
    Ok((
        RowSet::from_blocks(n_rows, block_len, t)?,
        RowSet::from_blocks(n_rows, block_len, u)?,
    ))
}

/// The rows of a block whose bits `words` sets (bit `r % 64` of word `r / 64`).
fn bitmap_of_words(words: &mut [u64]) -> RoaringBitmap {
    for word in words.iter_mut() {
        *word = word.to_le(); // the bytes least significant first, as roaring reads them
    }
    RoaringBitmap::from_lsb0_bytes(0, crate::cluster::as_bytes(words))
}

/// Push `rows[j]` for each bit `j` set in `bits`.
fn push_set_bits(mut bits: u64, rows: &[u32], out: &mut Vec<u32>) {
    while bits != 0 {
        out.push(rows[bits.trailing_zeros() as usize]);
        bits &= bits - 1;
    }
}

/// Set bit `i` of `words` (bit `i % 64` of word `i / 64`) where `holds(i)`,
/// for `i` in `0..n`, and clear the rest: every word is written. Branch-free,
/// so a verdict that flips at random costs no misprediction: 64 verdicts as
/// bytes first (a loop that vectorises), then each 8 bytes of 0 or 1 packed
/// into 8 bits by one multiply (byte `j`'s bit lands at bit `56 + j`).
#[inline(always)]
#[allow(clippy::inline_always)] // inlined into each classifier, whose compare it packs
fn pack(n: usize, words: &mut [u64], holds: impl Fn(usize) -> bool) {
    pack_with(n, words, holds, bits_of_flags);
}

/// [`pack`] with each word's flags made bits by `gather`.
#[inline(always)]
#[allow(clippy::inline_always)]
fn pack_with(
    n: usize,
    words: &mut [u64],
    holds: impl Fn(usize) -> bool,
    gather: impl Fn(&[u8; 64]) -> u64,
) {
    for (w, word) in words.iter_mut().enumerate() {
        let first = w * 64;
        let mut flags = [0u8; 64];
        let len = 64.min(n.saturating_sub(first));
        for (j, flag) in flags[..len].iter_mut().enumerate() {
            *flag = u8::from(holds(first + j));
        }
        *word = gather(&flags);
    }
}

/// The word whose bit `j` is `flags[j]` (each 0 or 1): eight flags at a
/// time gathered into a byte by one multiply.
#[inline(always)]
#[allow(clippy::inline_always)]
fn bits_of_flags(flags: &[u8; 64]) -> u64 {
    const GATHER: u64 = 0x0102_0408_1020_4080;
    let mut bits = 0u64;
    for (k, eight) in (0..).zip(flags.chunks_exact(8)) {
        let bytes = u64::from_le_bytes(eight.try_into().expect("8 bytes"));
        bits |= (bytes.wrapping_mul(GATHER) >> 56) << (8 * k);
    }
    bits
}

/// [`bits_of_flags`] by AVX2's byte mask: each flag moved to its byte's top
/// bit and the 32 top bits of a register taken at once (where a multiply
/// per eight flags was most of a scan compiled for AVX2).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
#[inline]
unsafe fn bits_of_flags_avx2(flags: &[u8; 64]) -> u64 {
    use std::arch::x86_64::{_mm256_loadu_si256, _mm256_movemask_epi8, _mm256_slli_epi16};
    let half = |at: usize| {
        // SAFETY: 32 bytes from `at` (0 or 32) lie inside the 64 flags; the
        // load takes any alignment. A flag's bit 0 shifted by 7 within its
        // 16-bit lane lands on its own byte's top bit, the flags being 0 or 1.
        let lanes = unsafe { _mm256_loadu_si256(flags.as_ptr().add(at).cast()) };
        u64::from(_mm256_movemask_epi8(_mm256_slli_epi16::<7>(lanes)).cast_unsigned())
    };
    half(0) | (half(32) << 32)
}

/// [`pack`] of `left(i) cmp right(i)`, the operator chosen once, outside the loop.
#[inline(always)]
#[allow(clippy::inline_always)]
fn pack_comparison(
    cmp: Cmp,
    n: usize,
    words: &mut [u64],
    left: impl Fn(usize) -> f64,
    right: impl Fn(usize) -> f64,
    gather: impl Fn(&[u8; 64]) -> u64,
) {
    match cmp {
        Cmp::Lt => pack_with(n, words, |i| left(i) < right(i), gather),
        Cmp::Le => pack_with(n, words, |i| left(i) <= right(i), gather),
        Cmp::Gt => pack_with(n, words, |i| left(i) > right(i), gather),
        Cmp::Ge => pack_with(n, words, |i| left(i) >= right(i), gather),
        Cmp::Eq => pack_with(n, words, |i| left(i) == right(i), gather),
        Cmp::Ne => pack_with(n, words, |i| left(i) != right(i), gather),
    }
}

/// Rows (of `domain`, or all) where the comparison is true, and where it is
/// unknown (a side is NaN). Two variables compared as they are (`a == b`)
/// compare their stored values exactly, whatever their dtypes (an int64
/// beyond 2^53 against another, or against a float64); any arithmetic is
/// float64's.
///
/// # Examples
/// ```
/// use quarry_core::scan::{scan_compare, Cmp, Comparison, Op, Program, Values};
/// let (a, b) = ([(1i64 << 53) + 1, 5], [9_007_199_254_740_992.0f64, 5.0]);
/// let load = |k| Program::new(vec![Op::Load(k)], 2).unwrap();
/// let equal = Comparison { left: load(0), cmp: Cmp::Eq, right: load(1) };
/// let (sure, _) = scan_compare(&[Values::I64(&a), Values::F64(&b)], &equal, 2, 2, None).unwrap();
/// assert_eq!(sure.to_ids(), vec![1]);
/// ```
pub fn scan_compare(
    columns: &[Values<'_>],
    comparison: &Comparison,
    n_rows: u64,
    block_len: u64,
    domain: Option<&RowSet>,
) -> Result<(RowSet, RowSet)> {
    check_inputs(columns, n_rows, domain, block_len)?;
    // Only a 64-bit integer rounds in float64: any other pair of columns
    // compares exactly in the float64 scan, which vectorises.
    let wide = |k: usize| matches!(columns[k], Values::I64(_) | Values::U64(_));
    match (comparison.left.loaded(), comparison.right.loaded()) {
        (Some(l), Some(r)) if wide(l) || wide(r) => {
            let (a, b, cmp) = (&columns[l], &columns[r], comparison.cmp);
            per_block(
                n_rows,
                block_len,
                domain,
                || (),
                |(), base, rows, t, u| {
                    each_values!(a, x => each_values!(b, y => compare_exactly(x, y, cmp, base, rows, t, u)));
                },
            )
        }
        _ => scan_compare_f64(columns, comparison, n_rows, block_len, domain),
    }
}

/// [`scan_compare`] with both sides evaluated in float64.
fn scan_compare_f64(
    columns: &[Values<'_>],
    comparison: &Comparison,
    n_rows: u64,
    block_len: u64,
    domain: Option<&RowSet>,
) -> Result<(RowSet, RowSet)> {
    let depth = comparison.left.depth.max(comparison.right.depth);
    // Each side's stack of a chunk's values, made once a block.
    let stacks = || {
        (
            vec![vec![0.0f64; CHUNK]; depth],
            vec![vec![0.0f64; CHUNK]; depth],
        )
    };
    per_block(
        n_rows,
        block_len,
        domain,
        stacks,
        |(left, right), base, rows, t, u| {
            comparison.left.run(columns, base, rows, left);
            // A constant side (the usual `expr > 1.0`) is compared as a scalar.
            let right_const = comparison.right.constant();
            if right_const.is_none() {
                comparison.right.run(columns, base, rows, right);
            }
            let (n, a) = (rows.len(), &left[0][..rows.len()]);
            let b = match right_const {
                Some(c) => Side::Constant(c),
                None => Side::Values(&right[0][..n]),
            };
            pack_outcome(comparison.cmp, a, b, t, u);
        },
    )
}

/// The right side of a comparison evaluated in float64.
#[derive(Clone, Copy)]
enum Side<'a> {
    Constant(f64),
    Values(&'a [f64]),
}

/// [`scan_compare_f64`]'s masks of a chunk: where `left cmp right` holds in
/// `t`, where a side is NaN in `u`; compiled for AVX2 where the CPU has it
/// (four float64 lanes to a compare, and 32 flags to a byte mask).
fn pack_outcome(cmp: Cmp, left: &[f64], right: Side<'_>, t: &mut [u64], u: &mut [u64]) {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU has AVX2, checked just above.
        unsafe { pack_outcome_avx2(cmp, left, right, t, u) };
        return;
    }
    pack_outcome_portable(cmp, left, right, t, u, bits_of_flags);
}

/// [`pack_outcome_portable`] compiled for AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn pack_outcome_avx2(cmp: Cmp, left: &[f64], right: Side<'_>, t: &mut [u64], u: &mut [u64]) {
    // SAFETY (of the gather): this copy runs only where the CPU has AVX2.
    pack_outcome_portable(cmp, left, right, t, u, |flags| unsafe {
        bits_of_flags_avx2(flags)
    });
}

#[inline(always)]
#[allow(clippy::inline_always)] // inlined into the AVX2 copy, so it is compiled for AVX2
fn pack_outcome_portable(
    cmp: Cmp,
    left: &[f64],
    right: Side<'_>,
    t: &mut [u64],
    u: &mut [u64],
    gather: impl Fn(&[u8; 64]) -> u64 + Copy,
) {
    let rows = left.len();
    match right {
        Side::Constant(c) => {
            pack_with(rows, u, |i| left[i].is_nan() || c.is_nan(), gather);
            pack_comparison(cmp, rows, t, |i| left[i], |_| c, gather);
        }
        Side::Values(values) => {
            let values = &values[..rows];
            pack_with(rows, u, |i| left[i].is_nan() || values[i].is_nan(), gather);
            pack_comparison(cmp, rows, t, |i| left[i], |i| values[i], gather);
        }
    }
}

/// A stored value as it compares exactly: any integer dtype's, or a float's.
#[derive(Clone, Copy, Debug)]
enum Exact {
    Int(i128),
    Float(f64),
}

/// A stored value of one dtype, as it compares exactly.
trait ToExact: Copy + Sync {
    fn exact(self) -> Exact;
}

macro_rules! to_exact {
    ($variant:ident: $($t:ty),*) => {$(
        impl ToExact for $t {
            #[inline]
            fn exact(self) -> Exact {
                Exact::$variant(self.into())
            }
        }
    )*};
}
to_exact!(Int: i8, i16, i32, i64, u8, u16, u32, u64);
to_exact!(Float: f32, f64);

impl Exact {
    /// The order of two stored values (None where either is NaN).
    fn order(self, other: Exact) -> Option<Ordering> {
        match (self, other) {
            (Exact::Int(a), Exact::Int(b)) => Some(a.cmp(&b)),
            (Exact::Float(a), Exact::Float(b)) => a.partial_cmp(&b),
            (Exact::Int(a), Exact::Float(b)) => int_against_float(a, b),
            (Exact::Float(a), Exact::Int(b)) => int_against_float(b, a).map(Ordering::reverse),
        }
    }
}

/// The order of the integer `int` (of at most 64 bits) and the float
/// `float`, exactly: neither rounded to the other's type.
fn int_against_float(int: i128, float: f64) -> Option<Ordering> {
    const BEYOND: f64 = 18_446_744_073_709_551_616.0; // 2^64: past every 64-bit integer
    if float.is_nan() {
        return None;
    }
    if float >= BEYOND {
        return Some(Ordering::Less);
    }
    if float <= -BEYOND {
        return Some(Ordering::Greater);
    }
    let whole = float.trunc();
    // Whole and below 2^64 in size: exact in i128.
    #[allow(clippy::cast_possible_truncation)]
    let truncated = whole as i128;
    // Equal whole parts: the float's fraction (of its sign) decides.
    Some(int.cmp(&truncated).then(0.0f64.total_cmp(&(float - whole))))
}

/// [`scan_compare`] of two columns as they are: each row's stored values
/// ordered exactly.
fn compare_exactly<A: ToExact, B: ToExact>(
    a: &[A],
    b: &[B],
    cmp: Cmp,
    base: usize,
    rows: Rows<'_>,
    t: &mut [u64],
    u: &mut [u64],
) {
    let at = |i: usize| base + rows.row(i) as usize;
    let order = |i: usize| a[at(i)].exact().order(b[at(i)].exact());
    pack(rows.len(), u, |i| order(i).is_none());
    pack(rows.len(), t, |i| order(i).is_some_and(|o| cmp.holds(o)));
}

/// Rows one worker evaluates at a time (a [`CHUNK`] at a time): a few
/// thousand rows take less than waking another worker would.
const EVALUATE_PIECE: usize = 1 << 16;

/// The pieces [`evaluate`] cuts `n_rows` into (see [`pieces`]).
#[must_use]
pub fn evaluate_pieces(n_rows: u64) -> usize {
    (n_rows as usize).div_ceil(EVALUATE_PIECE)
}

/// The program's value on every row, in float64: what a scan compares, for
/// callers that keep the values (derived variables, aggregates of
/// expressions). Pieces of 65,536 rows run in parallel.
///
/// # Examples
/// ```
/// use quarry_core::scan::{evaluate, Op, Program, Values};
/// let x = [3.0f32, 4.0];
/// let p = Program::new(vec![Op::Load(0), Op::Load(0), Op::Mul], 1).unwrap();
/// assert_eq!(evaluate(&[Values::F32(&x)], &p, 2).unwrap(), vec![9.0, 16.0]);
/// ```
pub fn evaluate(columns: &[Values<'_>], program: &Program, n_rows: u64) -> Result<Vec<f64>> {
    check_inputs(columns, n_rows, None, 1)?;
    let mut out = vec![0.0f64; n_rows as usize];
    pieces::for_each_mut(&mut out, EVALUATE_PIECE, |k, piece| {
        let mut stack = vec![vec![0.0f64; CHUNK]; program.depth];
        for (c, chunk) in piece.chunks_mut(CHUNK).enumerate() {
            let first = k * EVALUATE_PIECE + c * CHUNK;
            program.run(columns, first, Rows::Range(0, chunk.len()), &mut stack);
            chunk.copy_from_slice(&stack[0][..chunk.len()]);
        }
    });
    Ok(out)
}

/// Rows (of `domain`, or all) whose stored value lies in `iv`, compared
/// exactly in key domain `K`, and rows whose value is missing.
pub fn scan_range<K: Key, T: Widen<K>>(
    values: &[T],
    iv: &Interval<K>,
    block_len: u64,
    domain: Option<&RowSet>,
) -> Result<(RowSet, RowSet)> {
    check_inputs(&[], values.len() as u64, domain, block_len)?;
    per_block(
        values.len() as u64,
        block_len,
        domain,
        || (),
        |(), base, rows, t, u| {
            if let Rows::Range(start, n) = rows {
                return pack_in_interval(&values[base + start..base + start + n], iv, t, Some(u));
            }
            let value = |i: usize| values[base + rows.row(i) as usize];
            pack(rows.len(), u, |i| value(i).widen().is_missing());
            match T::narrow(iv.lo, iv.lo_incl, iv.hi, iv.hi_incl) {
                Some((lo, hi)) => pack(rows.len(), t, |i| (lo..=hi).contains(&value(i))),
                None => pack(rows.len(), t, |_| false),
            }
        },
    )
}

/// [`scan_range`]'s masks of consecutive `values`: missing ones in `u` (where
/// given), those inside `iv` in `t`. The interval's ends are chosen once, outside the loop,
/// and the values walked as a slice, so each word's compares run with no
/// branch and no bounds check (half the time of a row looked up by its
/// number with the ends tested per row); compiled for AVX2 where the CPU
/// has it (twice the lanes).
fn pack_in_interval<K: Key, T: Widen<K>>(
    values: &[T],
    iv: &Interval<K>,
    t: &mut [u64],
    u: Option<&mut [u64]>,
) {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU has AVX2, checked just above.
        unsafe { pack_in_interval_avx2(values, iv, t, u) };
        return;
    }
    pack_in_interval_portable(values, iv, t, u, bits_of_flags);
}

/// [`pack_in_interval_portable`] compiled for AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn pack_in_interval_avx2<K: Key, T: Widen<K>>(
    values: &[T],
    iv: &Interval<K>,
    t: &mut [u64],
    u: Option<&mut [u64]>,
) {
    // SAFETY (of the gather): this copy runs only where the CPU has AVX2.
    pack_in_interval_portable(values, iv, t, u, |flags| unsafe {
        bits_of_flags_avx2(flags)
    });
}

#[inline(always)]
#[allow(clippy::inline_always)] // inlined into the AVX2 copy, so it is compiled for AVX2
fn pack_in_interval_portable<K: Key, T: Widen<K>>(
    values: &[T],
    iv: &Interval<K>,
    t: &mut [u64],
    u: Option<&mut [u64]>,
    gather: impl Fn(&[u8; 64]) -> u64 + Copy,
) {
    // Without `u` (a box's columns), `t` alone: a missing value lies in no
    // interval, and the mask of the missing ones would cost as much again.
    match (T::narrow(iv.lo, iv.lo_incl, iv.hi, iv.hi_incl), u) {
        (Some((lo, hi)), Some(u)) => pack_both(values, t, u, |v| lo <= v && v <= hi, gather),
        (Some((lo, hi)), None) => pack_slice(values, t, |v| lo <= v && v <= hi, gather),
        (None, Some(u)) => pack_both(values, t, u, |_| false, gather),
        (None, None) => t.fill(0),
    }
}

/// Values packed at a time by [`pack_both`]: 32 KiB of 4-byte values, read
/// from memory by the first pass and from cache by the second.
const PACK_CHUNK: usize = 8192;

/// [`pack_slice`] of the rows whose key `holds` into `t`, and of those
/// missing into `u`, a chunk of [`PACK_CHUNK`] values at a time: the column is
/// read from memory once, not once per pass.
#[inline(always)]
#[allow(clippy::inline_always)]
fn pack_both<K: Key, T: Widen<K>>(
    values: &[T],
    t: &mut [u64],
    u: &mut [u64],
    holds: impl Fn(T) -> bool + Copy,
    gather: impl Fn(&[u8; 64]) -> u64 + Copy,
) {
    const WORDS: usize = PACK_CHUNK / 64;
    for ((values, t), u) in values
        .chunks(PACK_CHUNK)
        .zip(t.chunks_mut(WORDS))
        .zip(u.chunks_mut(WORDS))
    {
        pack_slice(values, u, |v| v.widen().is_missing(), gather);
        pack_slice(values, t, holds, gather);
    }
}

/// [`pack`] of `holds(value)` over a slice, one word per 64 values, each
/// word's flags made bits by `gather`.
#[inline(always)]
#[allow(clippy::inline_always)]
fn pack_slice<T: Copy>(
    values: &[T],
    words: &mut [u64],
    holds: impl Fn(T) -> bool,
    gather: impl Fn(&[u8; 64]) -> u64,
) {
    debug_assert_eq!(words.len(), values.len().div_ceil(64));
    for (word, chunk) in words.iter_mut().zip(values.chunks(64)) {
        // The values usually come from a memory map of the source.
        prefetch_ahead(chunk);
        let mut flags = [0u8; 64];
        for (flag, &value) in flags.iter_mut().zip(chunk) {
            *flag = u8::from(holds(value));
        }
        *word = gather(&flags);
    }
}

/// One condition of a box ([`scan_box`]): a column's stored values and the
/// interval they must lie in, compared exactly in key domain `K`.
pub struct RangeOf<'a, K, T> {
    pub values: &'a [T],
    pub interval: Interval<K>,
}

/// A condition of a box, whatever its column's dtype and key domain.
pub trait InRange: Send + Sync {
    /// Rows of the column.
    fn rows(&self) -> usize;
    /// Clear bit `i` of `words` where row `first + i` (`i` below `n`) is
    /// missing or outside the interval.
    fn keep_inside(&self, first: usize, n: usize, words: &mut [u64]);
}

impl<K: Key, T: Widen<K> + Sync> InRange for RangeOf<'_, K, T> {
    fn rows(&self) -> usize {
        self.values.len()
    }

    fn keep_inside(&self, first: usize, n: usize, words: &mut [u64]) {
        let mut inside = [0u64; CHUNK_WORDS];
        let inside = &mut inside[..words.len()];
        pack_in_interval(&self.values[first..first + n], &self.interval, inside, None);
        words.iter_mut().zip(&*inside).for_each(|(w, m)| *w &= m);
    }
}

/// Rows where every condition holds (each column's value present and in
/// its interval): a box over several columns in one pass over them, each
/// chunk's rows marked in a mask that every column narrows. On a small
/// table an AND of ranges costs less this way than as an index lookup per
/// range with their row sets combined.
///
/// # Errors
/// If there is no condition, or the columns differ in length.
///
/// # Examples
/// ```
/// use quarry_core::eval::Interval;
/// use quarry_core::scan::{scan_box, InRange, RangeOf};
/// let (e, x) = ([1.25f32, 1.25, f32::NAN, 0.5], [145i32, 160, 145, 145]);
/// let energy = RangeOf { values: &e[..], interval: Interval { lo: 1.2, lo_incl: false, hi: 1.3, hi_incl: false } };
/// let near = RangeOf { values: &x[..], interval: Interval { lo: 140i64, lo_incl: true, hi: 150, hi_incl: true } };
/// let rows = scan_box(&[&energy as &dyn InRange, &near], 2).unwrap();
/// assert_eq!(rows.to_ids(), vec![0]);
/// ```
pub fn scan_box(conditions: &[&dyn InRange], block_len: u64) -> Result<RowSet> {
    let n_rows = box_rows(conditions)?;
    check_inputs(&[], n_rows as u64, None, block_len)?;
    let (inside, _) = per_block(
        n_rows as u64,
        block_len,
        None,
        || (),
        |(), base, rows, t, u| {
            let Rows::Range(start, n) = rows else {
                unreachable!("a box is scanned whole")
            };
            mark_box(conditions, base + start, n, t);
            u.fill(0);
        },
    )?;
    Ok(inside)
}

/// Rows of a box's table: every condition's column holds that many values.
fn box_rows(conditions: &[&dyn InRange]) -> Result<usize> {
    let Some(first) = conditions.first() else {
        return Err(CoreError::Invalid(
            "a box has at least one condition".into(),
        ));
    };
    let n_rows = first.rows();
    if let Some(other) = conditions.iter().find(|c| c.rows() != n_rows) {
        return Err(CoreError::Invalid(format!(
            "a column holds {} values, the table {n_rows} rows",
            other.rows()
        )));
    }
    Ok(n_rows)
}

/// Set bit `i` of `words` (`n.div_ceil(64)` of them) where row `first + i`
/// (`i` below `n`) lies in the box, and clear the rest.
fn mark_box(conditions: &[&dyn InRange], first: usize, n: usize, words: &mut [u64]) {
    words.fill(u64::MAX);
    if !n.is_multiple_of(64) {
        words[n / 64] = (1u64 << (n % 64)) - 1;
    }
    for condition in conditions {
        condition.keep_inside(first, n, words);
    }
}

/// How many rows of each box lie in it ([`scan_box`] of each, counted
/// without making its rows), in one call: the small steps of a long series
/// counted together, where a call per step costs more than its scan. The
/// boxes are shared among the pool's threads where they hold more values
/// than one piece of a count ([`count_pieces`]).
///
/// # Errors
/// If a box has no condition, or its columns differ in length.
///
/// # Examples
/// ```
/// use quarry_core::eval::Interval;
/// use quarry_core::scan::{count_boxes, InRange, RangeOf};
/// let (e, x) = ([1.25f32, 1.25, f32::NAN, 0.5], [145i32, 160, 145, 145]);
/// let energy = RangeOf { values: &e[..], interval: Interval { lo: 1.2, lo_incl: false, hi: 1.3, hi_incl: false } };
/// let near = RangeOf { values: &x[..], interval: Interval { lo: 140i64, lo_incl: true, hi: 150, hi_incl: true } };
/// let boxes = [vec![&energy as &dyn InRange, &near], vec![&energy as &dyn InRange]];
/// assert_eq!(count_boxes(&boxes).unwrap(), vec![1, 2]);
/// ```
pub fn count_boxes(boxes: &[Vec<&dyn InRange>]) -> Result<Vec<u64>> {
    let rows = boxes
        .iter()
        .map(|conditions| box_rows(conditions))
        .collect::<Result<Vec<_>>>()?;
    let count = |(conditions, &n_rows): (&Vec<&dyn InRange>, &usize)| {
        let mut words = [0u64; CHUNK_WORDS];
        let mut inside = 0u64;
        for start in (0..n_rows).step_by(CHUNK) {
            let n = CHUNK.min(n_rows - start);
            let words = &mut words[..n.div_ceil(64)];
            mark_box(conditions, start, n, words);
            inside += words.iter().map(|w| u64::from(w.count_ones())).sum::<u64>();
        }
        inside
    };
    let values: usize = boxes.iter().zip(&rows).map(|(c, n)| c.len() * n).sum();
    Ok(if pieces::one(count_pieces(values)) {
        boxes.iter().zip(&rows).map(count).collect()
    } else {
        boxes.par_iter().zip(&rows).map(count).collect()
    })
}

/// Values counted per worker before the partial counts are added up.
const COUNT_CHUNK: usize = 1 << 16;

/// Up to this many intervals, [`count_ranges`] compares each value with
/// each interval's ends as stored ([`Widen::narrow`]), a chunk at a time:
/// eight float32 lanes to a compare, where finding a value's place among
/// the cuts costs some nanoseconds (a count of one range took 9 times
/// `np.count_nonzero` of its mask).
const FEW_INTERVALS: usize = 4;

/// [`count_ranges`] of a few intervals.
fn count_each<K: Key, T: Widen<K>>(values: &[T], intervals: &[Interval<K>]) -> Vec<u64> {
    let ends: Vec<Option<(T, T)>> = intervals
        .iter()
        .map(|iv| T::narrow(iv.lo, iv.lo_incl, iv.hi, iv.hi_incl))
        .collect();
    let count = |chunk: &[T]| count_between(chunk, &ends);
    if pieces::one(count_pieces(values.len())) {
        count(values)
    } else {
        values.par_chunks(COUNT_CHUNK).map(count).reduce(
            || vec![0u64; ends.len()],
            |mut a, b| {
                a.iter_mut().zip(b).for_each(|(x, y)| *x += y);
                a
            },
        )
    }
}

/// How many `values` lie between each pair of `ends` (inclusive; None: no
/// value does); compiled for AVX2 where the CPU has it.
fn count_between<T: PartialOrd + Copy>(values: &[T], ends: &[Option<(T, T)>]) -> Vec<u64> {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU has AVX2, checked just above.
        return unsafe { count_between_avx2(values, ends) };
    }
    count_between_portable(values, ends)
}

/// [`count_between_portable`] compiled for AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn count_between_avx2<T: PartialOrd + Copy>(
    values: &[T],
    ends: &[Option<(T, T)>],
) -> Vec<u64> {
    count_between_portable(values, ends)
}

#[inline(always)]
#[allow(clippy::inline_always)] // inlined into the AVX2 copy, so it is compiled for AVX2
fn count_between_portable<T: PartialOrd + Copy>(values: &[T], ends: &[Option<(T, T)>]) -> Vec<u64> {
    // 4,096 values at a time: read from memory for the first interval, from
    // cache for the others, and counted in 32 bits, which vectorise.
    let mut counts = vec![0u64; ends.len()];
    for chunk in values.chunks(4096) {
        prefetch_ahead(chunk);
        for (count, end) in counts.iter_mut().zip(ends) {
            if let &Some((lo, hi)) = end {
                let inside: u32 = chunk.iter().map(|&v| u32::from(lo <= v && v <= hi)).sum();
                *count += u64::from(inside);
            }
        }
    }
    counts
}

/// The pieces [`count_ranges`] cuts `n_values` into (see [`pieces`]).
#[must_use]
pub fn count_pieces(n_values: usize) -> usize {
    n_values.div_ceil(COUNT_CHUNK)
}

/// How many values lie in each interval (compared exactly in key domain
/// `K`; missing values in none), in one pass over the values however many
/// intervals there are: a batch of 400 slices of one column costs one pass,
/// not 400.
///
/// Each interval becomes a half-open range of the keys' ordered images (an
/// exclusive bound is the next image), the ranges' ends are sorted into
/// cuts, every value's position among the cuts is counted (a constant-time
/// [`BinLookup`]), and each interval adds up the positions it spans.
///
/// # Examples
/// ```
/// use quarry_core::eval::Interval;
/// use quarry_core::scan::count_ranges;
/// let x = [0.5f32, 1.0, 1.5, f32::NAN, 2.0];
/// let half = Interval { lo: 1.0, lo_incl: true, hi: 2.0, hi_incl: false };
/// let closed = Interval { hi_incl: true, ..half };
/// assert_eq!(count_ranges(&x, &[half, closed]), vec![2, 3]);
/// ```
pub fn count_ranges<K: Key, T: Widen<K>>(values: &[T], intervals: &[Interval<K>]) -> Vec<u64> {
    if intervals.len() <= FEW_INTERVALS {
        return count_each(values, intervals);
    }
    // [start, end) of each interval's images; None: no start (nothing lies
    // above an exclusive bound at the top image) or no end (unbounded above).
    let ends: Vec<(Option<u64>, Option<u64>)> = intervals
        .iter()
        .map(|iv| {
            let lo = iv.lo.ordered();
            let hi = iv.hi.ordered();
            let start = if iv.lo_incl {
                Some(lo)
            } else {
                lo.checked_add(1)
            };
            let end = if iv.hi_incl {
                hi.checked_add(1)
            } else {
                Some(hi)
            };
            (start, end)
        })
        .collect();
    let mut cuts: Vec<u64> = ends.iter().flat_map(|&(s, e)| [s, e]).flatten().collect();
    cuts.sort_unstable();
    cuts.dedup();
    // at[p]: values with exactly p cuts at or below their image.
    let lookup = BinLookup::new(&cuts);
    let tally = |chunk: &[T]| {
        // Four tallies taken in turn, so runs of values in one position
        // do not wait on each other's increments.
        let width = cuts.len() + 1;
        let mut at = vec![0u64; 4 * width];
        let mut quads = chunk.chunks_exact(4);
        for quad in &mut quads {
            for (lane, &v) in quad.iter().enumerate() {
                let key: K = v.widen();
                if !key.is_missing() {
                    at[lane * width + lookup.bin(key.ordered())] += 1;
                }
            }
        }
        for &v in quads.remainder() {
            let key: K = v.widen();
            if !key.is_missing() {
                at[lookup.bin(key.ordered())] += 1;
            }
        }
        let (first, rest) = at.split_at_mut(width);
        for lane in rest.chunks_exact(width) {
            first.iter_mut().zip(lane).for_each(|(x, y)| *x += y);
        }
        at.truncate(width);
        at
    };
    let at = if pieces::one(count_pieces(values.len())) {
        tally(values)
    } else {
        values.par_chunks(COUNT_CHUNK).map(tally).reduce(
            || vec![0u64; cuts.len() + 1],
            |mut a, b| {
                a.iter_mut().zip(b).for_each(|(x, y)| *x += y);
                a
            },
        )
    };
    // below[k]: values with fewer than k cuts at or below their image.
    let mut below = Vec::with_capacity(at.len() + 1);
    below.push(0u64);
    for n in &at {
        below.push(below[below.len() - 1] + n);
    }
    let position = |cut: u64| cuts.partition_point(|&c| c < cut);
    ends.iter()
        .map(|&(start, end)| {
            let Some(start) = start else { return 0 };
            // A value is at or above `start` when `start` is among its cuts,
            // below `end` when `end` is not.
            let first = position(start) + 1;
            let last = end.map_or(cuts.len(), position);
            if last < first {
                0
            } else {
                below[last + 1] - below[first]
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Values near 2^53, 2^63 and 2^64, where float64 cannot tell integers apart.
    fn awkward() -> impl Strategy<Value = (i64, u64, f64)> {
        // Whole floats around 2^53 (proptest's float ranges cannot sample
        // one a few units wide there, where floats lie 2 apart).
        #[allow(clippy::cast_precision_loss)]
        let near_2_53 = (-3i64..4).prop_map(|d| ((1i64 << 53) + d) as f64);
        (
            prop_oneof![
                any::<i64>(),
                (1i64 << 53) - 3..(1i64 << 53) + 3,
                i64::MAX - 3..=i64::MAX
            ],
            prop_oneof![
                any::<u64>(),
                (1u64 << 53) - 3..(1u64 << 53) + 3,
                u64::MAX - 3..=u64::MAX
            ],
            prop_oneof![
                any::<f64>(),
                near_2_53,
                Just(9_223_372_036_854_775_808.0),
                Just(18_446_744_073_709_551_616.0),
                Just(-9_223_372_036_854_775_808.0),
                Just(f64::NAN),
                Just(0.5),
                Just(-0.5),
                Just(0.0),
                Just(5e-324),
                Just(-5e-324),
            ],
        )
    }

    proptest! {
        #[test]
        fn two_columns_compare_exactly(rows in prop::collection::vec(awkward(), 1..60)) {
            let ints: Vec<i64> = rows.iter().map(|r| r.0).collect();
            let unsigned: Vec<u64> = rows.iter().map(|r| r.1).collect();
            let floats: Vec<f64> = rows.iter().map(|r| r.2).collect();
            let columns = [Values::I64(&ints), Values::U64(&unsigned), Values::F64(&floats)];
            let n = rows.len() as u64;
            // The oracle: integers as i128, and a float against an integer through
            // an exact rational comparison (a float is m * 2^e).
            let exact = |k: usize, i: usize| -> Option<(i128, i128, i32)> {
                match k {
                    0 => Some((i128::from(ints[i]), 1, 0)),
                    1 => Some((i128::from(unsigned[i]), 1, 0)),
                    _ => {
                        let f = floats[i];
                        if f.is_nan() { return None; }
                        if f.is_infinite() { return Some((if f > 0.0 { 1 } else { -1 }, 0, 0)); }
                        // f = mantissa * 2^exp exactly.
                        let bits = f.to_bits();
                        let exp = ((bits >> 52) & 0x7ff) as i32;
                        let frac = i128::from(bits & ((1 << 52) - 1));
                        let (m, e) = if exp == 0 { (frac, -1074) } else { (frac | (1 << 52), exp - 1075) };
                        Some((if f < 0.0 { -m } else { m }, 1, e))
                    }
                }
            };
            let order = |x: (i128, i128, i32), y: (i128, i128, i32)| -> Ordering {
                // (m, finite, e): infinities have finite == 0 and m the sign.
                match (x.1, y.1) {
                    (0, 0) => x.0.cmp(&y.0),
                    (0, _) => x.0.cmp(&0),
                    (_, 0) => 0.cmp(&y.0),
                    _ => {
                        let e = x.2.min(y.2);
                        let scale = |m: i128, at: i32| -> Option<i128> {
                            let shift = u32::try_from(at - e).ok()?;
                            if shift >= 126 { None } else { m.checked_mul(1i128 << shift) }
                        };
                        match (scale(x.0, x.2), scale(y.0, y.2)) {
                            (Some(a), Some(b)) => a.cmp(&b),
                            // Too large to scale: that side, unless 0, outweighs the other.
                            (None, _) if x.0 != 0 => x.0.cmp(&0),
                            (_, None) if y.0 != 0 => 0.cmp(&y.0),
                            _ => x.0.signum().cmp(&y.0.signum()),
                        }
                    }
                }
            };
            for (l, r) in [(0, 1), (1, 0), (0, 2), (2, 0), (1, 2), (2, 1), (0, 0), (2, 2)] {
                for cmp in [Cmp::Lt, Cmp::Le, Cmp::Gt, Cmp::Ge, Cmp::Eq, Cmp::Ne] {
                    let load = |k| Program::new(vec![Op::Load(k)], 3).unwrap();
                    let comparison = Comparison { left: load(l), cmp, right: load(r) };
                    let (t, u) = scan_compare(&columns, &comparison, n, 7, None).unwrap();
                    let (mut want_t, mut want_u) = (Vec::new(), Vec::new());
                    for i in 0..rows.len() {
                        match (exact(l, i), exact(r, i)) {
                            (Some(x), Some(y)) => if cmp.holds(order(x, y)) { want_t.push(i as u64) },
                            _ => want_u.push(i as u64),
                        }
                    }
                    prop_assert_eq!(t.to_ids(), want_t, "{:?} {} {}", cmp, l, r);
                    prop_assert_eq!(u.to_ids(), want_u);
                }
            }
        }
    }

    /// Values from a few dozen (so rows tie), NaN among them.
    fn column(n: usize) -> impl Strategy<Value = Vec<f64>> {
        prop::collection::vec(
            prop_oneof![1 => Just(f64::NAN), 8 => (0u8..40).prop_map(|v| f64::from(v) / 4.0)],
            n,
        )
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(48))]
        /// Scans as masks, whole blocks and domains of every density
        /// (picked one by one, or scanned whole and cut), on blocks longer
        /// than a chunk and of lengths no multiple of 64, against a loop.
        #[test]
        fn scans_equal_a_loop(
            (x, y) in (1usize..2600).prop_flat_map(|n| (column(n), column(n))),
            block_len in prop_oneof![1u64..70, 900u64..2200],
            density in prop_oneof![Just(0.0), 0.0f64..0.05, 0.0f64..1.0, Just(1.0)],
            seed in any::<u64>(),
            cmp in prop::sample::select(vec![Cmp::Lt, Cmp::Le, Cmp::Gt, Cmp::Ge, Cmp::Eq, Cmp::Ne]),
        ) {
            let n = x.len() as u64;
            // A domain: each row in it with the chance `density`.
            let mut state = seed | 1;
            let picked: Vec<u64> = (0..n).filter(|_| {
                state ^= state << 13; state ^= state >> 7; state ^= state << 17;
                #[allow(clippy::cast_precision_loss)]
                let u = (state >> 11) as f64 / (1u64 << 53) as f64;
                u < density
            }).collect();
            let domain = RowSet::from_sorted_ids(n, block_len, &picked).unwrap();
            let columns = [Values::F64(&x), Values::F64(&y)];
            let load = |k| Program::new(vec![Op::Load(k)], 2).unwrap();
            let twice = Program::new(vec![Op::Load(0), Op::Const(2.0), Op::Mul], 2).unwrap();
            let sides = [(load(0), load(1)), (twice, load(1)), (load(0), Program::new(vec![Op::Const(4.5)], 2).unwrap())];
            let holds = |a: f64, b: f64| match cmp {
                Cmp::Lt => a < b, Cmp::Le => a <= b, Cmp::Gt => a > b,
                Cmp::Ge => a >= b, Cmp::Eq => a == b, Cmp::Ne => a != b,
            };
            for (k, (left, right)) in sides.into_iter().enumerate() {
                let comparison = Comparison { left, cmp, right };
                let value = |i: usize| match k { 0 => (x[i], y[i]), 1 => (x[i] * 2.0, y[i]), _ => (x[i], 4.5) };
                for dom in [None, Some(&domain)] {
                    let rows: Vec<u64> = dom.map_or_else(|| (0..n).collect(), |_| picked.clone());
                    let want_u: Vec<u64> = rows.iter().copied().filter(|&i| { let (a, b) = value(i as usize); a.is_nan() || b.is_nan() }).collect();
                    let want_t: Vec<u64> = rows.iter().copied().filter(|&i| { let (a, b) = value(i as usize); !a.is_nan() && !b.is_nan() && holds(a, b) }).collect();
                    let (t, u) = scan_compare(&columns, &comparison, n, block_len, dom).unwrap();
                    prop_assert_eq!(t.to_ids(), want_t);
                    prop_assert_eq!(u.to_ids(), want_u);
                }
            }
            // A range of one column, exact in its key domain.
            let iv = Interval { lo: 2.0f64, lo_incl: cmp == Cmp::Ge, hi: 7.25, hi_incl: cmp == Cmp::Le };
            // A box over both columns (x in iv, y in another), in one pass.
            let other = Interval { lo: 1.0f64, lo_incl: true, hi: 5.0, hi_incl: cmp == Cmp::Lt };
            let (on_x, on_y) = (RangeOf { values: &x[..], interval: iv }, RangeOf { values: &y[..], interval: other });
            let inside = scan_box(&[&on_x as &dyn InRange, &on_y], block_len).unwrap();
            let want: Vec<u64> = (0..n).filter(|&i| iv.contains(x[i as usize]) && other.contains(y[i as usize])).collect();
            prop_assert_eq!(inside.to_ids(), want.clone());
            // Counted as one of several boxes, without its rows.
            let only = |iv: &Interval<f64>, v: &[f64]| v.iter().filter(|&&a| iv.contains(a)).count() as u64;
            let boxes = [vec![&on_x as &dyn InRange, &on_y], vec![&on_y as &dyn InRange], vec![&on_x as &dyn InRange]];
            prop_assert_eq!(count_boxes(&boxes).unwrap(), vec![want.len() as u64, only(&other, &y), only(&iv, &x)]);
            for dom in [None, Some(&domain)] {
                let rows: Vec<u64> = dom.map_or_else(|| (0..n).collect(), |_| picked.clone());
                let (t, u) = scan_range::<f64, f64>(&x, &iv, block_len, dom).unwrap();
                let want_t: Vec<u64> = rows.iter().copied().filter(|&i| iv.contains(x[i as usize])).collect();
                let want_u: Vec<u64> = rows.iter().copied().filter(|&i| x[i as usize].is_nan()).collect();
                prop_assert_eq!(t.to_ids(), want_t);
                prop_assert_eq!(u.to_ids(), want_u);
            }
        }
    }

    proptest! {
        /// A range scanned over whole blocks (compiled for AVX2 where the CPU
        /// has it) equals a loop, for every choice of ends, float32 widened
        /// and int64 alike; and the baseline build gives the same words.
        #[test]
        fn ranges_scanned_whole_equal_a_loop_on_every_build(
            x in prop::collection::vec(prop_oneof![
                4 => -3.0f32..3.0, 1 => Just(f32::NAN), 1 => Just(-0.0f32),
                1 => Just(0.5f32), 1 => any::<f32>()], 0..700),
            ints in prop::collection::vec(-5i64..5, 0..700),
            lo in -3.0f64..3.0, width in 0.0f64..4.0, lo_incl: bool, hi_incl: bool,
            on_value: bool,
            block_len in prop::sample::select(vec![1u64, 63, 64, 65, 700, 5000]),
        ) {
            let lo = if on_value { 0.5 } else { lo };
            let iv = Interval { lo, lo_incl, hi: lo + width, hi_incl };
            let (t, u) = scan_range::<f64, f32>(&x, &iv, block_len, None).unwrap();
            let inside = |v: f64| {
                let above = if lo_incl { v >= iv.lo } else { v > iv.lo };
                let below = if hi_incl { v <= iv.hi } else { v < iv.hi };
                above && below
            };
            let want_t: Vec<u64> = (0u64..).zip(&x).filter(|(_, &v)| inside(f64::from(v))).map(|(i, _)| i).collect();
            let want_u: Vec<u64> = (0u64..).zip(&x).filter(|(_, v)| v.is_nan()).map(|(i, _)| i).collect();
            prop_assert_eq!(t.to_ids(), want_t);
            prop_assert_eq!(u.to_ids(), want_u);
            #[allow(clippy::cast_possible_truncation)]
            let int_iv = Interval { lo: lo as i64, lo_incl, hi: (lo + width) as i64, hi_incl };
            let (t, u) = scan_range::<i64, i64>(&ints, &int_iv, block_len, None).unwrap();
            let want: Vec<u64> = (0u64..).zip(&ints).filter(|(_, &v)| int_iv.contains(v)).map(|(i, _)| i).collect();
            prop_assert_eq!(t.to_ids(), want);
            prop_assert!(u.is_empty());
            let words = x.len().div_ceil(64);
            let (mut t0, mut u0) = (vec![0u64; words], vec![0u64; words]);
            pack_in_interval_portable(&x, &iv, &mut t0, Some(&mut u0), bits_of_flags);
            let (mut t1, mut u1) = (vec![0u64; words], vec![0u64; words]);
            pack_in_interval(&x, &iv, &mut t1, Some(&mut u1));
            prop_assert_eq!((t0, u0), (t1, u1));
        }

        /// The copy compiled for AVX2 (where this CPU has it) and the
        /// baseline one give the same bits, NaN and infinities included.
        #[test]
        fn programs_give_the_same_bits_on_every_build(
            x in prop::collection::vec(any::<f32>(), 1..300),
            op in prop::sample::select(vec![Op::Add, Op::Sub, Op::Mul, Op::Div, Op::Pow, Op::Min, Op::Max]),
            unary in prop::sample::select(vec![Op::Neg, Op::Sqrt, Op::Abs, Op::Exp, Op::Ln, Op::Log10]),
        ) {
            let y: Vec<i64> = (0i64..).zip(&x).map(|(i, v)| i - i64::from(v.to_bits().count_ones())).collect();
            let columns = [Values::F32(&x), Values::I64(&y)];
            let program = Program::new(vec![Op::Load(0), unary, Op::Load(1), Op::Const(0.5), Op::Mul, op], 2).unwrap();
            let n = x.len();
            let (mut fast, mut plain) = (vec![vec![0.0; n]; program.depth], vec![vec![0.0; n]; program.depth]);
            program.run(&columns, 0, Rows::Range(0, n), &mut fast);
            program.run_portable(&columns, 0, Rows::Range(0, n), &mut plain);
            let bits = |v: &[f64]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
            prop_assert_eq!(bits(&fast[0]), bits(&plain[0]));
        }

        /// The masks of an arithmetic comparison, packed by the copy
        /// compiled for AVX2 (where this CPU has it) and by the baseline one,
        /// are equal, and each is the comparison row by row.
        #[test]
        fn comparisons_pack_the_same_bits_on_every_build(
            a in prop::collection::vec(prop_oneof![4 => -2.0f64..2.0, 1 => Just(f64::NAN), 1 => Just(0.5)], 0..300),
            c in prop_oneof![Just(0.5), Just(f64::NAN), -2.0f64..2.0],
            cmp in prop::sample::select(vec![Cmp::Lt, Cmp::Le, Cmp::Gt, Cmp::Ge, Cmp::Eq, Cmp::Ne]),
        ) {
            let b: Vec<f64> = a.iter().rev().copied().collect();
            let words = a.len().div_ceil(64);
            for side in [Side::Constant(c), Side::Values(&b)] {
                let (mut t0, mut u0) = (vec![0u64; words], vec![0u64; words]);
                pack_outcome_portable(cmp, &a, side, &mut t0, &mut u0, bits_of_flags);
                let (mut t1, mut u1) = (vec![0u64; words], vec![0u64; words]);
                pack_outcome(cmp, &a, side, &mut t1, &mut u1);
                prop_assert_eq!((&t0, &u0), (&t1, &u1));
                for (i, &x) in a.iter().enumerate() {
                    let y = match side { Side::Constant(c) => c, Side::Values(b) => b[i] };
                    let bit = |w: &[u64]| w[i / 64] >> (i % 64) & 1 == 1;
                    prop_assert_eq!(bit(&u1), x.is_nan() || y.is_nan());
                    let holds = match cmp {
                        Cmp::Lt => x < y, Cmp::Le => x <= y, Cmp::Gt => x > y,
                        Cmp::Ge => x >= y, Cmp::Eq => x == y, Cmp::Ne => x != y,
                    };
                    prop_assert_eq!(bit(&t1), holds);
                }
            }
        }
    }

    #[test]
    fn a_box_needs_conditions_over_columns_of_one_length() {
        let (a, b) = ([1.0f64, 2.0], [1.0f64]);
        let all = Interval {
            lo: f64::NEG_INFINITY,
            lo_incl: true,
            hi: f64::INFINITY,
            hi_incl: true,
        };
        let (a, b) = (
            RangeOf {
                values: &a[..],
                interval: all,
            },
            RangeOf {
                values: &b[..],
                interval: all,
            },
        );
        assert!(scan_box(&[], 4).is_err());
        assert!(scan_box(&[&a as &dyn InRange, &b], 4).is_err());
        assert_eq!(scan_box(&[&a as &dyn InRange], 4).unwrap().len(), 2);
        assert!(count_boxes(&[vec![&a as &dyn InRange], vec![]]).is_err());
        assert!(count_boxes(&[vec![&a as &dyn InRange, &b]]).is_err());
        assert_eq!(count_boxes(&[]).unwrap(), Vec::<u64>::new());
    }

    /// Boxes holding more values than one piece of a count are counted on
    /// the pool's threads, each as alone.
    #[test]
    fn many_boxes_count_as_each_alone() {
        let columns: Vec<Vec<f32>> = (0..40u16)
            .map(|k| {
                (0..3001u16)
                    .map(|i| f32::from(i.wrapping_mul(k + 7) % 997))
                    .collect()
            })
            .collect();
        let interval = Interval {
            lo: 100.0f64,
            lo_incl: true,
            hi: 500.0,
            hi_incl: false,
        };
        let conditions: Vec<RangeOf<'_, f64, f32>> = columns
            .iter()
            .map(|values| RangeOf { values, interval })
            .collect();
        let boxes: Vec<Vec<&dyn InRange>> = conditions
            .iter()
            .zip(conditions.iter().rev())
            .map(|(a, b)| vec![a as &dyn InRange, b])
            .collect();
        let alone: Vec<u64> = boxes
            .iter()
            .map(|b| scan_box(b, 1024).unwrap().len())
            .collect();
        assert!(count_pieces(40 * 2 * 3001) > 1);
        assert_eq!(count_boxes(&boxes).unwrap(), alone);
    }

    #[test]
    fn compare_with_nan_and_domain() {
        let x = [1.0f32, f32::NAN, 3.0, 4.0, 0.5];
        let y = [1i16, 2, 3, 4, 5];
        let cols = [Values::F32(&x), Values::I16(&y)];
        // x*x + y > 5
        let left = Program::new(
            vec![Op::Load(0), Op::Load(0), Op::Mul, Op::Load(1), Op::Add],
            2,
        )
        .unwrap();
        let right = Program::new(vec![Op::Const(5.0)], 2).unwrap();
        let cmp = Comparison {
            left,
            cmp: Cmp::Gt,
            right,
        };
        let (t, u) = scan_compare(&cols, &cmp, 5, 2, None).unwrap();
        assert_eq!(t.to_ids(), vec![2, 3, 4]);
        assert_eq!(u.to_ids(), vec![1]);
        let domain = RowSet::from_sorted_ids(5, 2, &[1, 3]).unwrap();
        let (t, u) = scan_compare(&cols, &cmp, 5, 2, Some(&domain)).unwrap();
        assert_eq!((t.to_ids(), u.to_ids()), (vec![3], vec![1]));
    }

    #[test]
    fn min_and_max_propagate_nan() {
        // max(a, b) > 1 on a row where b is NaN is unknown, never true.
        let a = [2.0f64, 0.5, 3.0, f64::NAN];
        let b = [f64::NAN, 0.2, 0.1, 5.0];
        let cols = [Values::F64(&a), Values::F64(&b)];
        let one = Program::new(vec![Op::Const(1.0)], 2).unwrap();
        for (op, want_true) in [(Op::Max, vec![2]), (Op::Min, vec![])] {
            let cmp = Comparison {
                left: Program::new(vec![Op::Load(0), Op::Load(1), op], 2).unwrap(),
                cmp: Cmp::Gt,
                right: one.clone(),
            };
            let (t, u) = scan_compare(&cols, &cmp, 4, 3, None).unwrap();
            assert_eq!((t.to_ids(), u.to_ids()), (want_true, vec![0, 3]));
        }
        let p = Program::new(vec![Op::Load(0), Op::Load(1), Op::Min], 2).unwrap();
        let v = evaluate(&cols, &p, 4).unwrap();
        assert!(v[0].is_nan() && v[3].is_nan());
        assert_eq!((v[1], v[2]), (0.2, 0.1));
    }

    #[test]
    fn range_is_exact_for_big_integers() {
        let v = [i64::MAX, i64::MAX - 1, 0];
        let iv = Interval {
            lo: i64::MAX,
            lo_incl: true,
            hi: i64::MAX,
            hi_incl: true,
        };
        let (t, u) = scan_range::<i64, i64>(&v, &iv, 2, None).unwrap();
        assert_eq!((t.to_ids(), u.len()), (vec![0], 0));
    }

    #[test]
    fn bad_programs_and_inputs_are_errors() {
        assert!(Program::new(vec![Op::Load(2)], 2).is_err());
        assert!(Program::new(vec![Op::Const(1.0), Op::Const(2.0)], 0).is_err());
        let x = [1.0f64; 3];
        let p = Program::new(vec![Op::Load(0)], 1).unwrap();
        let cmp = Comparison {
            left: p.clone(),
            cmp: Cmp::Eq,
            right: p,
        };
        assert!(scan_compare(&[Values::F64(&x)], &cmp, 4, 2, None).is_err());
        // A block length of 0 (or past 2^32) is an error, not a division by zero.
        for block_len in [0, 1 << 32] {
            let err = scan_compare(&[Values::F64(&x)], &cmp, 3, block_len, None).unwrap_err();
            assert!(matches!(err, CoreError::Invalid(_)), "{err}");
            let all = Interval {
                lo: f64::NEG_INFINITY,
                lo_incl: true,
                hi: f64::INFINITY,
                hi_incl: true,
            };
            let err = scan_range(&x, &all, block_len, None).unwrap_err();
            assert!(matches!(err, CoreError::Invalid(_)), "{err}");
        }
    }

    #[test]
    fn count_ranges_equals_one_scan_per_interval() {
        let x: Vec<f64> = (0..2000)
            .map(|i| match i % 97 {
                0 => f64::NAN,
                1 => f64::INFINITY,
                2 => -0.0,
                _ => f64::from((i * 7919) % 1013) / 10.0 - 50.0,
            })
            .collect();
        let mut intervals = vec![Interval::<f64>::everything()];
        for k in 0..300 {
            let lo = f64::from(k % 101) - 50.0 + f64::from(k % 3) * 0.05;
            for (lo_incl, hi_incl) in [(true, false), (false, true), (true, true), (false, false)] {
                let hi = lo + f64::from(k % 7) * 0.5;
                intervals.push(Interval {
                    lo,
                    lo_incl,
                    hi,
                    hi_incl,
                });
            }
        }
        intervals.push(Interval {
            lo: 0.0,
            lo_incl: true,
            hi: 0.0,
            hi_incl: true,
        });
        intervals.push(Interval {
            lo: f64::INFINITY,
            lo_incl: true,
            hi: f64::INFINITY,
            hi_incl: true,
        });
        intervals.push(Interval {
            lo: f64::INFINITY,
            lo_incl: false,
            hi: f64::INFINITY,
            hi_incl: true,
        });
        intervals.push(Interval {
            lo: 3.0,
            lo_incl: true,
            hi: -3.0,
            hi_incl: true,
        });
        let counts = count_ranges(&x, &intervals);
        for (iv, n) in intervals.iter().zip(counts) {
            let expected = x.iter().filter(|&&v| iv.contains(v)).count() as u64;
            assert_eq!(n, expected, "{iv:?}");
        }
    }

    proptest! {
        /// A few intervals (each compared with the values) and many (placed
        /// among the cuts) give the counts of a loop, float32 widened and
        /// int16 alike, over sizes around the chunks.
        #[test]
        fn ranges_counted_either_way_equal_a_loop(
            x in prop::collection::vec(prop_oneof![
                4 => -3.0f32..3.0, 1 => Just(f32::NAN), 1 => Just(0.5f32),
                1 => Just(f32::INFINITY), 1 => any::<f32>()], 0..9000),
            ints in prop::collection::vec(any::<i16>(), 0..300),
            bounds in prop::collection::vec((prop_oneof![-3.0f64..3.0, Just(0.5), Just(f64::INFINITY)],
                0.0f64..4.0, any::<bool>(), any::<bool>()), 1..8),
        ) {
            let intervals: Vec<Interval<f64>> = bounds.iter()
                .map(|&(lo, width, lo_incl, hi_incl)| Interval { lo, lo_incl, hi: lo + width, hi_incl })
                .collect();
            let want: Vec<u64> = intervals.iter()
                .map(|iv| x.iter().filter(|&&v| iv.contains(f64::from(v))).count() as u64)
                .collect();
            prop_assert_eq!(count_ranges(&x, &intervals), want);
            #[allow(clippy::cast_possible_truncation)]
            let int_intervals: Vec<Interval<i64>> = intervals.iter()
                .map(|iv| Interval { lo: (iv.lo * 1e4) as i64, lo_incl: iv.lo_incl, hi: (iv.hi * 1e4) as i64, hi_incl: iv.hi_incl })
                .collect();
            let want: Vec<u64> = int_intervals.iter()
                .map(|iv| ints.iter().filter(|&&v| iv.contains(i64::from(v))).count() as u64)
                .collect();
            prop_assert_eq!(count_ranges(&ints, &int_intervals), want);
        }
    }

    #[test]
    fn count_ranges_integers_at_the_domain_ends() {
        let x = [i64::MIN, -1, 0, 1, i64::MAX, i64::MAX];
        let intervals = [
            Interval::<i64>::everything(),
            Interval {
                lo: i64::MAX,
                lo_incl: false,
                hi: i64::MAX,
                hi_incl: true,
            },
            Interval {
                lo: 0,
                lo_incl: false,
                hi: i64::MAX,
                hi_incl: true,
            },
            Interval {
                lo: i64::MIN,
                lo_incl: true,
                hi: 0,
                hi_incl: false,
            },
        ];
        assert_eq!(count_ranges(&x, &intervals), vec![6, 0, 3, 2]);
        let u = [0u16, 7, u16::MAX];
        let all = Interval::<u64>::everything();
        assert_eq!(count_ranges(&u, &[all]), vec![3]);
        assert_eq!(
            count_ranges::<f64, f32>(&[], &[Interval::everything()]),
            vec![0]
        );
    }
}
