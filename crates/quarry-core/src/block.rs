//! One block's index: build, serialise, and parse (checked) from bytes.
//!
//! Layout (little-endian), all offsets relative to the start of the block:
//!
//! ```text
//! 0   magic "QBLK"            4   u16 version, u8 key kind, u8 0
//! 8   u32 rows in block       12  u32 bins of the variable
//! 16  u32 non-empty bins (E)  20  u32 0
//! 24  stats: u64 valid count, f64 sum, f64 M2, key min, key max
//! 64  missing bitmap: u64 count, u64 offset, u32 length, u32 crc32
//! 88  E entries of 48 bytes: u32 bin, u32 length, u64 count, key min,
//!     key max, u64 offset, u32 crc32, u32 0
//! ..  u32 crc32 of everything above
//! ..  payload: Roaring bitmaps in the portable serialisation
//! ```
//!
//! The header checksum covers every number a count or a plan reads; each
//! bitmap has its own checksum, verified when (and only when) it is read.

use roaring::RoaringBitmap;

use crate::binning::BinLookup;
use crate::error::{corrupt, CoreError, Result};
use crate::key::{Key, KeyKind, Widen};

const MAGIC: &[u8; 4] = b"QBLK";
const VERSION: u16 = 2;
const FIXED_HEADER: usize = 88;
const ENTRY_LEN: usize = 48;

/// Where a bitmap lies in a block: (offset, length, CRC-32).
type Span = (u64, u32, u32);

/// Summary statistics of a block's non-missing values.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Stats<K> {
    pub count: u64,
    pub sum: f64,
    /// Sum of squared deviations from the block's mean: stable, and blocks
    /// combine exactly (Chan et al.) for a variable's variance.
    pub m2: f64,
    /// Zone map; meaningless when `count == 0`.
    pub min: K,
    pub max: K,
}

/// One non-empty bin of a block: its rows' count and in-block value range.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Entry<K> {
    pub bin: u32,
    pub count: u64,
    pub min: K,
    pub max: K,
    offset: u64,
    len: u32,
    crc: u32,
}

/// A block index as built in memory: entries and the serialised bitmaps.
#[derive(Clone, Debug)]
pub struct BlockIndex<K> {
    pub n_rows: u32,
    pub n_bins: u32,
    pub stats: Stats<K>,
    pub n_missing: u64,
    /// Non-empty bins; offsets are relative to `payload`.
    pub entries: Vec<Entry<K>>,
    missing: Span,
    payload: Vec<u8>,
}

impl<K: Key> BlockIndex<K> {
    /// Index `values` (one block) with the variable's `edges`. Values may be
    /// any stored type that widens exactly to the key type.
    ///
    /// # Examples
    /// ```
    /// use quarry_core::block::BlockIndex;
    /// let block = BlockIndex::<f64>::build(&[0.5f32, 1.5, f32::NAN, 1.7], &[1.0]).unwrap();
    /// assert_eq!(block.n_missing, 1);
    /// assert_eq!(block.entries.len(), 2);
    /// assert_eq!(block.entries[1].count, 2);
    /// ```
    pub fn build<T: Widen<K>>(values: &[T], edges: &[K]) -> Result<Self> {
        check_edges(edges)?;
        Self::build_with(
            values,
            &BinLookup::new(edges),
            &mut BinScratch::new(edges.len() + 1),
        )
    }

    /// [`BlockIndex::build`] with the variable's bin `lookup` (its edges
    /// checked by [`check_edges`]) and `scratch` made for its bins, both
    /// kept from block to block: a block's cost is then its rows' and its
    /// non-empty bins', not the variable's bins' (`--precision 5` makes 1.7
    /// million of them over normal values, which may be cut in blocks of 16).
    ///
    /// # Errors
    /// If the block holds more than `u32::MAX` rows.
    pub fn build_with<T: Widen<K>>(
        values: &[T],
        lookup: &BinLookup<'_, K>,
        scratch: &mut BinScratch<K>,
    ) -> Result<Self> {
        let n_rows = u32::try_from(values.len())
            .map_err(|_| CoreError::Invalid("a block holds at most 2^32-1 rows".into()))?;
        let n_bins = scratch.counts.len();
        scratch.present.clear();
        let mut bin_ids: Vec<u32> = Vec::with_capacity(values.len());
        let mut missing = Vec::new();
        // Sums of deviations from a shift (the first value) instead of raw
        // sums of squares, which cancel catastrophically for data far from 0.
        let mut shift: Option<f64> = None;
        let (mut dev_sum, mut dev_sq) = (0.0f64, 0.0f64);
        // A plain sum too, for a block whose shift is +-inf (shifting by it
        // would give NaN instead of the infinite sum).
        let mut plain_sum = 0.0f64;
        let BinScratch {
            counts,
            min: bin_min,
            max: bin_max,
            present,
            ..
        } = scratch;
        for (row, raw) in values.iter().enumerate() {
            let value = raw.widen();
            if value.is_missing() {
                missing.push(row as u32);
                bin_ids.push(u32::MAX);
                continue;
            }
            let bin = lookup.bin(value);
            bin_ids.push(bin as u32);
            if counts[bin] == 0 {
                // A bin's first value sets its range: a bin of only +inf keeps min +inf.
                present.push(bin as u32);
                (bin_min[bin], bin_max[bin]) = (value, value);
            } else {
                if value < bin_min[bin] {
                    bin_min[bin] = value;
                }
                if value > bin_max[bin] {
                    bin_max[bin] = value;
                }
            }
            counts[bin] += 1;
            let v = value.to_f64();
            plain_sum += v;
            let d = v - *shift.get_or_insert(v);
            dev_sum += d;
            dev_sq += d * d;
        }
        let acc = n_rows - missing.len() as u32;
        let (payload, missing_span, entries) = scratch.serialize_bins(&bin_ids, &missing);
        let valid = u64::from(acc);
        let min = entries.first().map_or(K::LOWEST, |e| e.min);
        let max = entries.last().map_or(K::HIGHEST, |e| e.max);
        let n = f64::from(acc);
        let base = shift.unwrap_or(0.0);
        let sum = if base.is_finite() {
            dev_sum + n * base
        } else {
            plain_sum
        };
        // Clamp rounding below zero, but keep NaN (infinite values): no std then.
        let raw = if acc == 0 {
            0.0
        } else {
            dev_sq - dev_sum * dev_sum / n
        };
        let m2 = if raw < 0.0 { 0.0 } else { raw };
        Ok(Self {
            n_rows,
            n_bins: n_bins as u32,
            stats: Stats {
                count: valid,
                sum,
                m2,
                min,
                max,
            },
            n_missing: missing.len() as u64,
            entries,
            missing: missing_span,
            payload,
        })
    }

    /// Serialise to the checked block layout described in the module docs.
    pub fn to_bytes(&self) -> Vec<u8> {
        let header_len = FIXED_HEADER + ENTRY_LEN * self.entries.len() + 4;
        let at = |offset: u64| offset + header_len as u64;
        let mut out = Vec::with_capacity(header_len + self.payload.len());
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&VERSION.to_le_bytes());
        out.push(K::KIND as u8);
        out.push(0);
        out.extend_from_slice(&self.n_rows.to_le_bytes());
        out.extend_from_slice(&self.n_bins.to_le_bytes());
        out.extend_from_slice(&(self.entries.len() as u32).to_le_bytes());
        out.extend_from_slice(&0u32.to_le_bytes());
        out.extend_from_slice(&self.stats.count.to_le_bytes());
        out.extend_from_slice(&self.stats.sum.to_le_bytes());
        out.extend_from_slice(&self.stats.m2.to_le_bytes());
        out.extend_from_slice(&self.stats.min.to_le_bytes8());
        out.extend_from_slice(&self.stats.max.to_le_bytes8());
        out.extend_from_slice(&self.n_missing.to_le_bytes());
        out.extend_from_slice(&at(self.missing.0).to_le_bytes());
        out.extend_from_slice(&self.missing.1.to_le_bytes());
        out.extend_from_slice(&self.missing.2.to_le_bytes());
        for e in &self.entries {
            out.extend_from_slice(&e.bin.to_le_bytes());
            out.extend_from_slice(&e.len.to_le_bytes());
            out.extend_from_slice(&e.count.to_le_bytes());
            out.extend_from_slice(&e.min.to_le_bytes8());
            out.extend_from_slice(&e.max.to_le_bytes8());
            out.extend_from_slice(&at(e.offset).to_le_bytes());
            out.extend_from_slice(&e.crc.to_le_bytes());
            out.extend_from_slice(&0u32.to_le_bytes());
        }
        let crc = crc32fast::hash(&out);
        out.extend_from_slice(&crc.to_le_bytes());
        debug_assert_eq!(out.len(), header_len);
        out.extend_from_slice(&self.payload);
        out
    }
}

/// The variable's bin edges must be strictly increasing.
///
/// # Errors
/// If they are not.
pub fn check_edges<K: Key>(edges: &[K]) -> Result<()> {
    if edges.windows(2).all(|w| w[0] < w[1]) {
        Ok(())
    } else {
        Err(CoreError::Invalid(
            "bin edges must be strictly increasing".into(),
        ))
    }
}

/// What building a block keeps per bin of its variable, made once for many
/// blocks ([`BlockIndex::build_with`]): each bin's count (zero between
/// blocks), value range and next row's place, and the bins a block filled.
#[derive(Clone, Debug)]
pub struct BinScratch<K> {
    counts: Vec<u32>,
    min: Vec<K>,
    max: Vec<K>,
    cursor: Vec<u32>,
    present: Vec<u32>,
}

impl<K: Key> BinScratch<K> {
    /// Scratch for a variable of `n_bins` bins (its edges and one).
    #[must_use]
    pub fn new(n_bins: usize) -> Self {
        Self {
            counts: vec![0; n_bins],
            min: vec![K::HIGHEST; n_bins],
            max: vec![K::LOWEST; n_bins],
            cursor: vec![0; n_bins],
            present: Vec::new(),
        }
    }

    /// Counting-sort the rows by bin (rows stay ascending within a bin) and
    /// write each non-empty bin's rows, and the missing rows, as portable
    /// Roaring bitmaps; the counts are left zero for the next block.
    fn serialize_bins(
        &mut self,
        bin_ids: &[u32],
        missing: &[u32],
    ) -> (Vec<u8>, Span, Vec<Entry<K>>) {
        self.present.sort_unstable();
        let mut acc = 0u32;
        for &bin in &self.present {
            self.cursor[bin as usize] = acc;
            acc += self.counts[bin as usize];
        }
        let mut rows_by_bin = vec![0u32; acc as usize];
        for (row, &bin) in bin_ids.iter().enumerate() {
            if bin != u32::MAX {
                let slot = &mut self.cursor[bin as usize];
                rows_by_bin[*slot as usize] = row as u32;
                *slot += 1;
            }
        }
        let mut payload = Vec::with_capacity(2 * bin_ids.len() + 64 * self.present.len());
        let mut put = |rows: &[u32]| -> Span {
            let start = payload.len();
            crate::portable::serialize_sorted(rows, &mut payload);
            let bytes = &payload[start..];
            (start as u64, bytes.len() as u32, crc32fast::hash(bytes))
        };
        let missing_span = put(missing);
        let mut entries = Vec::with_capacity(self.present.len());
        let mut start = 0usize;
        for &bin in &self.present {
            let bin = bin as usize;
            let count = std::mem::take(&mut self.counts[bin]);
            let (offset, len, crc) = put(&rows_by_bin[start..start + count as usize]);
            start += count as usize;
            entries.push(Entry {
                bin: bin as u32,
                count: u64::from(count),
                min: self.min[bin],
                max: self.max[bin],
                offset,
                len,
                crc,
            });
        }
        (payload, missing_span, entries)
    }
}

/// A parsed, checksum-verified block header. Bitmaps stay in the caller's
/// bytes and are decoded on demand with [`BlockHeader::bitmap`].
#[derive(Clone, Debug)]
pub struct BlockHeader<K> {
    pub n_rows: u32,
    pub n_bins: u32,
    pub stats: Stats<K>,
    pub n_missing: u64,
    missing: Span,
    pub entries: Vec<Entry<K>>,
}

struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Reader<'_> {
    fn take<const N: usize>(&mut self) -> [u8; N] {
        let out: [u8; N] = self.bytes[self.at..self.at + N]
            .try_into()
            .expect("length checked");
        self.at += N;
        out
    }
    fn u32(&mut self) -> u32 {
        u32::from_le_bytes(self.take())
    }
    fn u64(&mut self) -> u64 {
        u64::from_le_bytes(self.take())
    }
    fn f64(&mut self) -> f64 {
        f64::from_le_bytes(self.take())
    }
    fn key<K: Key>(&mut self) -> K {
        K::from_le_bytes8(self.take())
    }
}

impl<K: Key> BlockHeader<K> {
    /// Parse and verify a block's header. Never panics on bad bytes.
    pub fn parse(bytes: &[u8]) -> Result<Self> {
        if bytes.len() < FIXED_HEADER + 4 {
            return corrupt(format!(
                "block is {} bytes, shorter than a header",
                bytes.len()
            ));
        }
        if &bytes[0..4] != MAGIC {
            return corrupt("block does not start with QBLK");
        }
        let version = u16::from_le_bytes([bytes[4], bytes[5]]);
        if version != VERSION {
            return corrupt(format!(
                "block format version {version}, this build reads {VERSION}"
            ));
        }
        match KeyKind::from_u8(bytes[6]) {
            Some(kind) if kind == K::KIND => {}
            Some(kind) => {
                return corrupt(format!(
                    "block holds {} keys, read as {}",
                    kind.name(),
                    K::KIND.name()
                ))
            }
            None => return corrupt(format!("unknown key kind {}", bytes[6])),
        }
        let mut r = Reader { bytes, at: 8 };
        let n_rows = r.u32();
        let n_bins = r.u32();
        let n_entries = r.u32() as usize;
        let _ = r.u32();
        let header_len = n_entries
            .checked_mul(ENTRY_LEN)
            .and_then(|x| x.checked_add(FIXED_HEADER + 4))
            .filter(|&len| len <= bytes.len());
        let Some(header_len) = header_len else {
            return corrupt(format!(
                "{n_entries} bin entries do not fit in {} bytes",
                bytes.len()
            ));
        };
        let stored_crc =
            u32::from_le_bytes(bytes[header_len - 4..header_len].try_into().expect("4"));
        if crc32fast::hash(&bytes[..header_len - 4]) != stored_crc {
            return corrupt("block header checksum mismatch");
        }
        let stats = Stats {
            count: r.u64(),
            sum: r.f64(),
            m2: r.f64(),
            min: r.key(),
            max: r.key(),
        };
        let n_missing = r.u64();
        let missing = (r.u64(), r.u32(), r.u32());
        let entries = parse_entries::<K>(&bytes[r.at..header_len - 4], n_bins)?;
        // One pass over the parsed entries for both checks (a 1,024-bin
        // header is parsed at every column open).
        let mut total = n_missing;
        let mut inside = true;
        let within = |offset: u64, len: u32| {
            offset >= header_len as u64
                && offset.saturating_add(u64::from(len)) <= bytes.len() as u64
        };
        for e in &entries {
            total = total.saturating_add(e.count);
            inside &= within(e.offset, e.len);
        }
        if total != u64::from(n_rows) || stats.count + n_missing != u64::from(n_rows) {
            return corrupt("bin counts do not add up to the block's rows");
        }
        if !inside || !within(missing.0, missing.1) {
            return corrupt("bitmap lies outside the block");
        }
        Ok(Self {
            n_rows,
            n_bins,
            stats,
            n_missing,
            missing,
            entries,
        })
    }

    /// Decode entry `i`'s bitmap from the block's bytes, verifying it.
    pub fn bitmap(&self, bytes: &[u8], i: usize) -> Result<RoaringBitmap> {
        let e = &self.entries[i];
        decode(bytes, (e.offset, e.len, e.crc), e.count, self.n_rows)
    }

    /// Decode the bitmap of missing rows.
    pub fn missing(&self, bytes: &[u8]) -> Result<RoaringBitmap> {
        decode(bytes, self.missing, self.n_missing, self.n_rows)
    }
}

/// The bin entries of a header: ordered by bin, with disjoint ascending ranges.
fn parse_entries<K: Key>(bytes: &[u8], n_bins: u32) -> Result<Vec<Entry<K>>> {
    use std::cmp::Ordering;
    let mut entries: Vec<Entry<K>> = Vec::with_capacity(bytes.len() / ENTRY_LEN);
    // Fixed-size chunks: every field at a constant offset, no bounds checks.
    for raw in bytes.chunks_exact(ENTRY_LEN) {
        let field = |at: usize| -> [u8; 8] { raw[at..at + 8].try_into().expect("8 bytes") };
        let half = |at: usize| -> [u8; 4] { raw[at..at + 4].try_into().expect("4 bytes") };
        let bin = u32::from_le_bytes(half(0));
        let len = u32::from_le_bytes(half(4));
        let count = u64::from_le_bytes(field(8));
        let (min, max) = (K::from_le_bytes8(field(16)), K::from_le_bytes8(field(24)));
        let offset = u64::from_le_bytes(field(32));
        let crc = u32::from_le_bytes(half(40));
        let ordered = entries.last().is_none_or(|prev| {
            prev.bin < bin && prev.max.partial_cmp(&min) == Some(Ordering::Less)
        });
        if !ordered || bin >= n_bins {
            return corrupt("bin entries are not in bin order");
        }
        let range_ok = matches!(
            min.partial_cmp(&max),
            Some(Ordering::Less | Ordering::Equal)
        );
        if !range_ok || count == 0 {
            return corrupt(format!("bin {bin} has an empty or inverted range"));
        }
        entries.push(Entry {
            bin,
            count,
            min,
            max,
            offset,
            len,
            crc,
        });
    }
    Ok(entries)
}

fn decode(
    bytes: &[u8],
    (offset, len, crc): Span,
    count: u64,
    n_rows: u32,
) -> Result<RoaringBitmap> {
    let slice = bytes
        .get(offset as usize..offset as usize + len as usize)
        .ok_or_else(|| CoreError::Corrupt("bitmap lies outside the block".into()))?;
    if crc32fast::hash(slice) != crc {
        return corrupt("bitmap checksum mismatch");
    }
    let bitmap = RoaringBitmap::deserialize_from(slice)
        .map_err(|e| CoreError::Corrupt(format!("bitmap does not decode: {e}")))?;
    if bitmap.len() != count || bitmap.max().is_some_and(|m| m >= n_rows) {
        return corrupt("bitmap does not match its recorded count");
    }
    Ok(bitmap)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> BlockIndex<f64> {
        let values: Vec<f64> = (0..1000)
            .map(|i| f64::from(i % 97) * 0.5)
            .chain([f64::NAN; 3])
            .collect();
        BlockIndex::build(&values, &[5.0, 10.0, 20.0]).unwrap()
    }

    #[test]
    fn round_trip() {
        let values: Vec<f64> = (0..1000)
            .map(|i| f64::from(i % 97) * 0.5)
            .chain([f64::NAN; 3])
            .collect();
        let edges = [5.0, 10.0, 20.0];
        let block = BlockIndex::<f64>::build(&values, &edges).unwrap();
        let bytes = block.to_bytes();
        let header = BlockHeader::<f64>::parse(&bytes).unwrap();
        assert_eq!(header.n_rows, 1003);
        assert_eq!(header.n_missing, 3);
        assert_eq!(header.entries.len(), block.entries.len());
        for (i, entry) in header.entries.iter().enumerate() {
            let expect: Vec<u32> = (0..values.len() as u32)
                .filter(|&r| {
                    !values[r as usize].is_nan()
                        && crate::binning::bin_of(&edges, values[r as usize]) == entry.bin as usize
                })
                .collect();
            assert_eq!(entry.count, expect.len() as u64);
            assert_eq!(
                header.bitmap(&bytes, i).unwrap().iter().collect::<Vec<_>>(),
                expect
            );
        }
        assert_eq!(
            header.missing(&bytes).unwrap().iter().collect::<Vec<_>>(),
            vec![1000, 1001, 1002]
        );
    }

    #[test]
    fn every_flipped_byte_is_detected_or_harmless() {
        let bytes = sample().to_bytes();
        for at in 0..bytes.len() {
            let mut bad = bytes.clone();
            bad[at] ^= 0x5a;
            // Either the header fails to parse, or the damaged bitmap fails to
            // decode; never a silently different answer.
            let Ok(header) = BlockHeader::<f64>::parse(&bad) else {
                continue;
            };
            let all_ok = (0..header.entries.len()).all(|i| header.bitmap(&bad, i).is_ok())
                && header.missing(&bad).is_ok();
            assert!(!all_ok, "flip at byte {at} went unnoticed");
        }
    }

    #[test]
    fn wrong_key_kind_and_truncation_are_errors() {
        let bytes = sample().to_bytes();
        assert!(BlockHeader::<i64>::parse(&bytes).is_err());
        for cut in [0, 10, 87, 100, bytes.len() / 2] {
            let header = BlockHeader::<f64>::parse(&bytes[..cut]);
            if let Ok(h) = header {
                assert!((0..h.entries.len()).any(|i| h.bitmap(&bytes[..cut], i).is_err()));
            }
        }
    }
}
