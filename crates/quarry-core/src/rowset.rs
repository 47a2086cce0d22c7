//! Sets of rows of a logical table, one Roaring bitmap per block.
//!
//! Keeping the block as the unit means set algebra runs block by block in
//! parallel and no bitmap is ever re-based to global row numbers until the
//! caller asks for ids.

use rayon::prelude::*;
use roaring::RoaringBitmap;

use crate::error::{CoreError, Result};
use crate::{pieces, portable};

/// Rows `0..n_rows` of a table cut into blocks of `block_len` rows.
#[derive(Clone, Debug, PartialEq)]
pub struct RowSet {
    n_rows: u64,
    block_len: u64,
    blocks: Vec<RoaringBitmap>,
}

/// Write `id(row)` of each row of `bitmap` into `out` (exactly as long),
/// ascending: decoded from its portable bytes, container by container
/// ([`portable::fill_rows`] says why).
pub(crate) fn list_rows<T>(bitmap: &RoaringBitmap, out: &mut [T], id: impl Fn(u32) -> T) {
    let mut bytes = Vec::with_capacity(bitmap.serialized_size());
    bitmap
        .serialize_into(&mut bytes)
        .expect("writing to memory does not fail");
    let listed = portable::fill_rows(&bytes, out, id);
    assert_eq!(listed, out.len(), "a slot per row");
}

/// Number of blocks a table of `n_rows` has.
pub fn block_count(n_rows: u64, block_len: u64) -> usize {
    n_rows.div_ceil(block_len) as usize
}

pub(crate) fn check_shape(n_rows: u64, block_len: u64) -> Result<()> {
    if block_len == 0 || block_len > u64::from(u32::MAX) {
        return Err(CoreError::Invalid(format!(
            "block length {block_len} is not in 1..2^32"
        )));
    }
    let _ = n_rows;
    Ok(())
}

impl RowSet {
    /// No rows.
    pub fn empty(n_rows: u64, block_len: u64) -> Result<Self> {
        check_shape(n_rows, block_len)?;
        Ok(Self {
            n_rows,
            block_len,
            blocks: vec![RoaringBitmap::new(); block_count(n_rows, block_len)],
        })
    }

    /// Every row.
    ///
    /// # Examples
    /// ```
    /// use quarry_core::rowset::RowSet;
    /// let all = RowSet::full(10, 4).unwrap();
    /// assert_eq!(all.len(), 10);
    /// assert_eq!(all.block_counts(), vec![4, 4, 2]);
    /// ```
    pub fn full(n_rows: u64, block_len: u64) -> Result<Self> {
        check_shape(n_rows, block_len)?;
        let blocks = (0..block_count(n_rows, block_len))
            .map(|b| {
                let mut bm = RoaringBitmap::new();
                bm.insert_range(0..Self::rows_in(n_rows, block_len, b));
                bm
            })
            .collect();
        Ok(Self {
            n_rows,
            block_len,
            blocks,
        })
    }

    /// Every row of the blocks where `keep` is true.
    pub fn full_blocks(n_rows: u64, block_len: u64, keep: &[bool]) -> Result<Self> {
        let mut set = Self::full(n_rows, block_len)?;
        if keep.len() != set.blocks.len() {
            return Err(CoreError::Invalid(format!(
                "{} flags for {} blocks",
                keep.len(),
                set.blocks.len()
            )));
        }
        for (bm, &k) in set.blocks.iter_mut().zip(keep) {
            if !k {
                bm.clear();
            }
        }
        Ok(set)
    }

    /// Build from per-block bitmaps (row numbers local to each block).
    pub fn from_blocks(n_rows: u64, block_len: u64, blocks: Vec<RoaringBitmap>) -> Result<Self> {
        check_shape(n_rows, block_len)?;
        if blocks.len() != block_count(n_rows, block_len) {
            return Err(CoreError::Invalid(format!(
                "{} block bitmaps for {} blocks",
                blocks.len(),
                block_count(n_rows, block_len)
            )));
        }
        for (b, bm) in blocks.iter().enumerate() {
            if bm
                .max()
                .is_some_and(|m| m >= Self::rows_in(n_rows, block_len, b))
            {
                return Err(CoreError::Invalid(format!(
                    "block {b} bitmap has rows past the block's end"
                )));
            }
        }
        Ok(Self {
            n_rows,
            block_len,
            blocks,
        })
    }

    /// Build from ascending global row ids.
    pub fn from_sorted_ids(n_rows: u64, block_len: u64, ids: &[u64]) -> Result<Self> {
        let mut set = Self::empty(n_rows, block_len)?;
        if ids.windows(2).any(|w| w[0] >= w[1]) {
            return Err(CoreError::Invalid(
                "row ids must be strictly ascending".into(),
            ));
        }
        if ids.last().is_some_and(|&last| last >= n_rows) {
            return Err(CoreError::Invalid(format!(
                "row id past the table's {n_rows} rows"
            )));
        }
        let mut start = 0;
        while start < ids.len() {
            let b = ids[start] / block_len;
            let base = b * block_len;
            let end = start + ids[start..].partition_point(|&id| id < base + block_len);
            set.blocks[b as usize] = RoaringBitmap::from_sorted_iter(
                ids[start..end].iter().map(|&id| (id - base) as u32),
            )
            .expect("ascending");
            start = end;
        }
        Ok(set)
    }

    fn rows_in(n_rows: u64, block_len: u64, b: usize) -> u32 {
        let start = b as u64 * block_len;
        (n_rows - start).min(block_len) as u32
    }

    pub fn n_rows(&self) -> u64 {
        self.n_rows
    }

    pub fn block_len(&self) -> u64 {
        self.block_len
    }

    pub fn blocks(&self) -> &[RoaringBitmap] {
        &self.blocks
    }

    /// Number of rows in the set.
    pub fn len(&self) -> u64 {
        self.blocks.iter().map(RoaringBitmap::len).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.blocks.iter().all(RoaringBitmap::is_empty)
    }

    /// Rows per block.
    pub fn block_counts(&self) -> Vec<u64> {
        self.blocks.iter().map(RoaringBitmap::len).collect()
    }

    /// Write the ascending global row ids into `out` (exactly `len()` long),
    /// each block by its own task.
    pub fn fill_ids(&self, out: &mut [i64]) -> Result<()> {
        if out.len() as u64 != self.len() {
            return Err(CoreError::Invalid(format!(
                "{} slots for {} ids",
                out.len(),
                self.len()
            )));
        }
        let mut parts = Vec::with_capacity(self.blocks.len());
        let mut rest = out;
        for bm in &self.blocks {
            let (head, tail) = rest.split_at_mut(bm.len() as usize);
            parts.push(head);
            rest = tail;
        }
        let fill = |b: usize, part: &mut [i64], bm: &RoaringBitmap| {
            let base = (b as u64 * self.block_len) as i64;
            list_rows(bm, part, |row| base + i64::from(row));
        };
        if pieces::one(parts.len()) {
            for (b, (part, bm)) in parts.into_iter().zip(&self.blocks).enumerate() {
                fill(b, part, bm);
            }
        } else {
            parts
                .into_par_iter()
                .zip(self.blocks.par_iter())
                .enumerate()
                .for_each(|(b, (part, bm))| fill(b, part, bm));
        }
        Ok(())
    }

    /// Ascending global row ids.
    pub fn to_ids(&self) -> Vec<u64> {
        let mut out = vec![0; self.len() as usize];
        let mut rest = &mut out[..];
        for (b, bm) in self.blocks.iter().enumerate() {
            let base = b as u64 * self.block_len;
            let (head, tail) = rest.split_at_mut(bm.len() as usize);
            list_rows(bm, head, |row| base + u64::from(row));
            rest = tail;
        }
        out
    }

    fn zip_with(
        &self,
        other: &Self,
        op: fn(&RoaringBitmap, &RoaringBitmap) -> RoaringBitmap,
    ) -> Result<Self> {
        if self.n_rows != other.n_rows || self.block_len != other.block_len {
            return Err(CoreError::Invalid(format!(
                "row sets of different tables ({} rows in blocks of {} vs {} in blocks of {})",
                self.n_rows, self.block_len, other.n_rows, other.block_len
            )));
        }
        let blocks = pieces::map(self.blocks.len(), |b| op(&self.blocks[b], &other.blocks[b]));
        Ok(Self {
            n_rows: self.n_rows,
            block_len: self.block_len,
            blocks,
        })
    }

    /// Portable bytes: `QSEL`, u16 version, u16 0, u64 rows, u64 block length,
    /// u32 blocks, then per block a u32 length, a u32 CRC-32 and the block's
    /// Roaring bitmap in the portable serialisation.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::new();
        out.extend_from_slice(b"QSEL");
        out.extend_from_slice(&1u16.to_le_bytes());
        out.extend_from_slice(&0u16.to_le_bytes());
        out.extend_from_slice(&self.n_rows.to_le_bytes());
        out.extend_from_slice(&self.block_len.to_le_bytes());
        out.extend_from_slice(&(self.blocks.len() as u32).to_le_bytes());
        for bm in &self.blocks {
            let mut bytes = Vec::new();
            bm.serialize_into(&mut bytes)
                .expect("writing to a Vec cannot fail");
            out.extend_from_slice(&(bytes.len() as u32).to_le_bytes());
            out.extend_from_slice(&crc32fast::hash(&bytes).to_le_bytes());
            out.extend_from_slice(&bytes);
        }
        out
    }

    /// Parse [`RowSet::to_bytes`] output, checking every length and checksum.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self> {
        let bad = |why: &str| CoreError::Corrupt(format!("selection: {why}"));
        let take = |at: usize, n: usize| bytes.get(at..at + n).ok_or_else(|| bad("truncated"));
        if take(0, 4)? != b"QSEL" {
            return Err(bad("not a saved selection"));
        }
        if take(4, 2)? != 1u16.to_le_bytes() {
            return Err(bad("unknown version"));
        }
        let n_rows = u64::from_le_bytes(take(8, 8)?.try_into().expect("8"));
        let block_len = u64::from_le_bytes(take(16, 8)?.try_into().expect("8"));
        let n_blocks = u32::from_le_bytes(take(24, 4)?.try_into().expect("4")) as usize;
        let mut at = 28;
        let mut blocks = Vec::with_capacity(n_blocks.min(1 << 20));
        for _ in 0..n_blocks {
            let len = u32::from_le_bytes(take(at, 4)?.try_into().expect("4")) as usize;
            let crc = u32::from_le_bytes(take(at + 4, 4)?.try_into().expect("4"));
            let payload = take(at + 8, len)?;
            if crc32fast::hash(payload) != crc {
                return Err(bad("checksum mismatch"));
            }
            blocks.push(RoaringBitmap::deserialize_from(payload).map_err(|e| bad(&e.to_string()))?);
            at += 8 + len;
        }
        if at != bytes.len() {
            return Err(bad("trailing bytes"));
        }
        Self::from_blocks(n_rows, block_len, blocks).map_err(|e| bad(&e.to_string()))
    }

    /// Rows in both.
    pub fn and(&self, other: &Self) -> Result<Self> {
        self.zip_with(other, |a, b| a & b)
    }

    /// Rows in either.
    pub fn or(&self, other: &Self) -> Result<Self> {
        self.zip_with(other, |a, b| a | b)
    }

    /// Rows in `self` but not in `other`.
    pub fn minus(&self, other: &Self) -> Result<Self> {
        self.zip_with(other, |a, b| a - b)
    }

    /// The rows of blocks `[first, stop)` as a set over those blocks alone
    /// (row `first * block_len` becomes row 0): a rank's share of a table,
    /// evaluated on just its rows. Blocks move whole; no bitmap is touched.
    pub fn slice_blocks(&self, first: usize, stop: usize) -> Result<Self> {
        let stop = stop.min(self.blocks.len());
        if first > stop {
            return Err(CoreError::Invalid(format!(
                "blocks {first}..{stop} of {}",
                self.blocks.len()
            )));
        }
        let start_row = first as u64 * self.block_len;
        let end_row = (stop as u64 * self.block_len).min(self.n_rows);
        Self::from_blocks(
            end_row.saturating_sub(start_row),
            self.block_len,
            self.blocks[first..stop].to_vec(),
        )
    }

    /// The inverse of [`Self::slice_blocks`]: these rows placed at block
    /// `first` of a table of `n_rows` rows, every other block empty.
    pub fn place_blocks(&self, first: usize, n_rows: u64) -> Result<Self> {
        let mut blocks = vec![RoaringBitmap::new(); block_count(n_rows, self.block_len)];
        let stop = first + self.blocks.len();
        if stop > blocks.len() || (first as u64 * self.block_len + self.n_rows) > n_rows {
            return Err(CoreError::Invalid(format!(
                "{} rows at block {first} do not fit a table of {n_rows} rows",
                self.n_rows
            )));
        }
        blocks[first..stop].clone_from_slice(&self.blocks);
        Self::from_blocks(n_rows, self.block_len, blocks)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_round_trip_across_blocks() {
        let ids = [0, 3, 4, 9, 10, 11];
        let set = RowSet::from_sorted_ids(12, 4, &ids).unwrap();
        assert_eq!(set.block_counts(), vec![2, 1, 3]);
        assert_eq!(set.to_ids(), ids);
    }

    #[test]
    fn fill_ids_matches_to_ids() {
        let set = RowSet::from_sorted_ids(100, 7, &[0, 6, 7, 50, 99]).unwrap();
        let mut out = vec![0i64; 5];
        set.fill_ids(&mut out).unwrap();
        assert_eq!(out, vec![0, 6, 7, 50, 99]);
        assert!(set.fill_ids(&mut [0i64; 4]).is_err());
    }

    #[test]
    fn algebra_requires_the_same_table() {
        let a = RowSet::full(10, 4).unwrap();
        let b = RowSet::full(10, 5).unwrap();
        assert!(a.and(&b).is_err());
        assert_eq!(a.minus(&a).unwrap().len(), 0);
    }

    #[test]
    fn full_blocks_keeps_only_flagged_blocks() {
        let set = RowSet::full_blocks(10, 4, &[true, false, true]).unwrap();
        assert_eq!(set.to_ids(), vec![0, 1, 2, 3, 8, 9]);
        assert!(RowSet::full_blocks(10, 4, &[true]).is_err());
    }

    #[test]
    fn bytes_round_trip_and_damage_is_detected() {
        let set = RowSet::from_sorted_ids(1000, 64, &[0, 5, 64, 999]).unwrap();
        let bytes = set.to_bytes();
        assert_eq!(RowSet::from_bytes(&bytes).unwrap(), set);
        for at in 0..bytes.len() {
            let mut bad = bytes.clone();
            bad[at] ^= 0x20;
            if let Ok(other) = RowSet::from_bytes(&bad) {
                // Only the reserved u16 may change without being noticed.
                assert!((6..8).contains(&at) && other == set, "byte {at}");
            }
        }
        assert!(RowSet::from_bytes(&bytes[..bytes.len() - 1]).is_err());
    }

    #[test]
    fn slices_of_blocks_place_back_where_they_were() {
        let ids = [0, 5, 6, 13, 20, 21, 22];
        let set = RowSet::from_sorted_ids(23, 6, &ids).unwrap();
        let part = set.slice_blocks(1, 4).unwrap();
        assert_eq!(part.n_rows(), 17);
        assert_eq!(part.to_ids(), vec![0, 7, 14, 15, 16]);
        let back = part.place_blocks(1, 23).unwrap();
        assert_eq!(back.to_ids(), vec![6, 13, 20, 21, 22]);
        assert_eq!(set.slice_blocks(2, 2).unwrap().len(), 0);
        assert!(set.slice_blocks(3, 2).is_err());
        assert!(part.place_blocks(2, 23).is_err());
    }

    #[test]
    fn bad_ids_are_rejected() {
        assert!(RowSet::from_sorted_ids(5, 2, &[3, 1]).is_err());
        assert!(RowSet::from_sorted_ids(5, 2, &[5]).is_err());
        assert!(RowSet::empty(5, 0).is_err());
    }
}
