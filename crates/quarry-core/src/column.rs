//! All blocks of one indexed variable, evaluated together in parallel.

use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use roaring::{MultiOps, RoaringBitmap};

use crate::binning::BinLookup;
use crate::block::{check_edges, BinScratch, BlockHeader, BlockIndex, Stats};
use crate::error::{corrupt, CoreError, Result};
use crate::eval::Interval;
use crate::key::{Key, Widen};
use crate::pieces;
use crate::rowset::{block_count, check_shape, RowSet};

/// Bytes a column reads its blocks from: a memory-mapped index file, or a
/// vector. Shared, so a column keeps the buffers it was opened on alive.
pub type Buffer = Arc<dyn AsRef<[u8]> + Send + Sync>;

/// The parsed headers of a variable's blocks, and the buffers their bytes lie
/// in (typically memory-mapped index files: one, or one per shard when ranks
/// wrote their blocks to their own files). The column owns its buffers, so
/// every span it parsed at `open` stays valid: no later call can hand it
/// bytes that do not match.
#[derive(Clone)]
pub struct ColumnIndex<K> {
    buffers: Vec<Buffer>,
    n_rows: u64,
    block_len: u64,
    spans: Vec<(usize, Range<usize>)>,
    headers: Vec<BlockHeader<K>>,
}

/// Where one block lies: (buffer number, byte offset, byte length).
pub type BlockSpan = (u32, u64, u64);

/// What evaluations did, counted where the work happens: a caller makes one
/// per query, passes it to every call and reads it afterwards (`EXPLAIN
/// ANALYZE`'s numbers). One relaxed add per block, off the per-row paths.
#[derive(Debug, Default)]
pub struct Tally {
    bitmaps_decoded: AtomicU64,
}

impl Tally {
    /// Roaring bitmaps (bins' and missing rows') decoded from index bytes.
    pub fn bitmaps_decoded(&self) -> u64 {
        self.bitmaps_decoded.load(Ordering::Relaxed)
    }

    fn decoded(&self, n: usize) {
        if n > 0 {
            self.bitmaps_decoded.fetch_add(n as u64, Ordering::Relaxed);
        }
    }
}

/// Which entries of one block an interval takes whole, and which straddle it.
struct BlockPlan {
    inside: Range<usize>,
    boundary: Vec<usize>,
}

impl<K: Key> ColumnIndex<K> {
    /// Parse every block header found at `spans` of `buffers`, keeping the buffers.
    pub fn open(
        buffers: Vec<Buffer>,
        spans: &[BlockSpan],
        n_rows: u64,
        block_len: u64,
    ) -> Result<Self> {
        let data: Vec<&[u8]> = buffers.iter().map(|b| (**b).as_ref()).collect();
        check_shape(n_rows, block_len)?;
        if spans.len() != block_count(n_rows, block_len) {
            return corrupt(format!(
                "{} blocks recorded for {n_rows} rows in blocks of {block_len}",
                spans.len()
            ));
        }
        let spans: Vec<(usize, Range<usize>)> = spans
            .iter()
            .map(|&(shard, offset, len)| {
                let shard = shard as usize;
                let buffer = data.get(shard).ok_or_else(|| {
                    CoreError::Corrupt(format!(
                        "block in index file {shard} of {} files",
                        data.len()
                    ))
                })?;
                let end = offset
                    .checked_add(len)
                    .filter(|&end| end <= buffer.len() as u64);
                end.map(|end| (shard, offset as usize..end as usize))
                    .ok_or_else(|| {
                        CoreError::Corrupt(format!(
                            "block at byte {offset} runs past the end of index file {shard}"
                        ))
                    })
            })
            .collect::<Result<_>>()?;
        let headers = pieces::map(spans.len(), |b| {
            let (shard, range) = &spans[b];
            let header = BlockHeader::<K>::parse(&data[*shard][range.clone()])
                .map_err(|e| CoreError::Corrupt(format!("block {b}: {e}")))?;
            let rows = (n_rows - b as u64 * block_len).min(block_len);
            if u64::from(header.n_rows) != rows {
                return corrupt(format!(
                    "block {b} holds {} rows, expected {rows}",
                    header.n_rows
                ));
            }
            Ok(header)
        })
        .into_iter()
        .collect::<Result<Vec<_>>>()?;
        drop(data);
        Ok(Self {
            buffers,
            n_rows,
            block_len,
            spans,
            headers,
        })
    }

    pub fn n_rows(&self) -> u64 {
        self.n_rows
    }

    /// The bytes of block `b` (its span was checked against the buffer at `open`).
    fn bytes(&self, b: usize) -> &[u8] {
        let (shard, range) = &self.spans[b];
        &(*self.buffers[*shard]).as_ref()[range.clone()]
    }

    /// Number of blocks.
    pub fn n_blocks(&self) -> usize {
        self.headers.len()
    }

    pub fn block_len(&self) -> u64 {
        self.block_len
    }

    /// Per-block statistics (zone maps, counts, sums).
    pub fn stats(&self) -> Vec<Stats<K>> {
        self.headers.iter().map(|h| h.stats).collect()
    }

    fn plan(header: &BlockHeader<K>, iv: &Interval<K>) -> BlockPlan {
        let entries = &header.entries;
        let first = entries.partition_point(|e| iv.is_above(e.max));
        let end = first + entries[first..].partition_point(|e| !iv.is_below(e.min));
        if first == end {
            return BlockPlan {
                inside: 0..0,
                boundary: Vec::new(),
            };
        }
        let mut boundary = Vec::new();
        let (mut lo, mut hi) = (first, end);
        if !iv.covers(entries[first].min, entries[first].max) {
            boundary.push(first);
            lo += 1;
        }
        if hi > lo && !iv.covers(entries[end - 1].min, entries[end - 1].max) {
            boundary.push(end - 1);
            hi -= 1;
        }
        BlockPlan {
            inside: lo..hi,
            boundary,
        }
    }

    fn union(
        &self,
        b: usize,
        entries: impl Iterator<Item = usize>,
        tally: &Tally,
    ) -> Result<RoaringBitmap> {
        let bytes = self.bytes(b);
        let bitmaps = entries
            .map(|i| self.headers[b].bitmap(bytes, i))
            .collect::<Result<Vec<_>>>()?;
        tally.decoded(bitmaps.len());
        Ok(bitmaps.union())
    }

    /// Rows of block `b` that surely satisfy the plan.
    fn sure(&self, b: usize, plan: &BlockPlan, tally: &Tally) -> Result<RoaringBitmap> {
        let header = &self.headers[b];
        let n_entries = header.entries.len();
        if plan.inside.len() * 2 <= n_entries {
            return self.union(b, plan.inside.clone(), tally);
        }
        // Most bins are inside: take everything and remove the few that are not.
        let mut all = RoaringBitmap::new();
        all.insert_range(0..header.n_rows);
        let outside = (0..plan.inside.start).chain(plan.inside.end..n_entries);
        let removed = self.union(b, outside, tally)?;
        let missing = header.missing(self.bytes(b))?;
        tally.decoded(1);
        Ok(all - removed - missing)
    }

    /// Per block, the most rows for which `x in iv` can be true or unknown
    /// (sure + candidate + missing counts), from the headers alone. A zero
    /// means the predicate is false on every row of the block.
    pub fn block_bounds(&self, iv: &Interval<K>) -> Vec<u64> {
        self.headers
            .iter()
            .map(|h| {
                let plan = Self::plan(h, iv);
                let inside: u64 = h.entries[plan.inside].iter().map(|e| e.count).sum();
                let boundary: u64 = plan.boundary.iter().map(|&i| h.entries[i].count).sum();
                inside + boundary + h.n_missing
            })
            .collect()
    }

    /// Rows in the bins wholly inside `iv` (what making its row set decodes)
    /// and in the bins that straddle an end of it (the candidates the index
    /// path would check against the values), from the headers alone: what a
    /// planner weighs against scanning the column.
    pub fn range_rows(&self, iv: &Interval<K>) -> (u64, u64) {
        self.headers.iter().fold((0, 0), |(inside, boundary), h| {
            let plan = Self::plan(h, iv);
            let sure: u64 = h.entries[plan.inside].iter().map(|e| e.count).sum();
            let edge: u64 = plan.boundary.iter().map(|&i| h.entries[i].count).sum();
            (inside + sure, boundary + edge)
        })
    }

    /// Count of rows that surely satisfy `iv`, and the candidate rows the
    /// caller must check against the values. No sure bitmap is decoded.
    pub fn count(&self, iv: &Interval<K>, tally: &Tally) -> Result<(u64, RowSet)> {
        self.count_blocks(iv, 0..self.headers.len(), tally)
    }

    /// [`Self::count`] on the blocks `blocks` only (a rank's share); rows of
    /// other blocks are neither counted nor candidates. A range reaching past
    /// the last block (a share cut from a larger table) takes the blocks that exist.
    pub fn count_blocks(
        &self,
        iv: &Interval<K>,
        blocks: Range<usize>,
        tally: &Tally,
    ) -> Result<(u64, RowSet)> {
        let per_block = pieces::map(self.headers.len(), |b| {
            if !blocks.contains(&b) {
                return Ok((0, RoaringBitmap::new()));
            }
            let plan = Self::plan(&self.headers[b], iv);
            let sure: u64 = self.headers[b].entries[plan.inside.clone()]
                .iter()
                .map(|e| e.count)
                .sum();
            let candidates = self.union(b, plan.boundary.iter().copied(), tally)?;
            Ok((sure, candidates))
        })
        .into_iter()
        .collect::<Result<Vec<_>>>()?;
        let sure = per_block.iter().map(|(s, _)| s).sum();
        let candidates = per_block.into_iter().map(|(_, c)| c).collect();
        Ok((
            sure,
            RowSet::from_blocks(self.n_rows, self.block_len, candidates)?,
        ))
    }

    /// Rows that surely satisfy `iv` and candidate rows to check, restricted to
    /// `domain` when given (blocks with no domain rows decode nothing).
    pub fn leaf(
        &self,
        iv: &Interval<K>,
        domain: Option<&RowSet>,
        tally: &Tally,
    ) -> Result<(RowSet, RowSet)> {
        if let Some(d) = domain {
            self.check_table(d)?;
        }
        let per_block = pieces::map(self.headers.len(), |b| {
            let dom = domain.map(|d| &d.blocks()[b]);
            if dom.is_some_and(RoaringBitmap::is_empty) {
                return Ok((RoaringBitmap::new(), RoaringBitmap::new()));
            }
            let plan = Self::plan(&self.headers[b], iv);
            let mut sure = self.sure(b, &plan, tally)?;
            let mut cand = self.union(b, plan.boundary.iter().copied(), tally)?;
            if let Some(dom) = dom {
                sure &= dom;
                cand &= dom;
            }
            Ok((sure, cand))
        })
        .into_iter()
        .collect::<Result<Vec<_>>>()?;
        let (sure, cand): (Vec<_>, Vec<_>) = per_block.into_iter().unzip();
        Ok((
            RowSet::from_blocks(self.n_rows, self.block_len, sure)?,
            RowSet::from_blocks(self.n_rows, self.block_len, cand)?,
        ))
    }

    /// Counts of `domain`'s rows (all rows if `None`) in the histogram bins
    /// `[edges[i], edges[i+1])`, the last bin closed (`NumPy`'s rule), from
    /// each block's bins: a bin whose in-block range falls in one histogram
    /// bin adds its count (without decoding when there is no domain); a bin
    /// that straddles an edge gives its rows back as candidates, which the
    /// caller counts from their values. Missing values are never counted.
    pub fn histogram(
        &self,
        edges: &[f64],
        domain: Option<&RowSet>,
        tally: &Tally,
    ) -> Result<(Vec<u64>, RowSet)> {
        if edges.len() < 2 || !edges.windows(2).all(|w| w[0] < w[1]) {
            return Err(CoreError::Invalid(
                "histogram edges must be at least two, increasing".into(),
            ));
        }
        if let Some(d) = domain {
            self.check_table(d)?;
        }
        let n_bins = edges.len() - 1;
        // The histogram bin of value v, or None outside [edges[0], edges[n]].
        let slot = |v: f64| -> Option<usize> {
            if !(v >= edges[0] && v <= edges[n_bins]) {
                return None;
            }
            Some(
                edges
                    .partition_point(|e| *e <= v)
                    .saturating_sub(1)
                    .min(n_bins - 1),
            )
        };
        let per_block = pieces::map(self.headers.len(), |b| {
            let header = &self.headers[b];
            let bytes = self.bytes(b);
            let dom = domain.map(|d| &d.blocks()[b]);
            let mut counts = vec![0u64; n_bins];
            let mut straddling = Vec::new();
            if dom.is_some_and(RoaringBitmap::is_empty) {
                return Ok((counts, RoaringBitmap::new()));
            }
            for (i, e) in header.entries.iter().enumerate() {
                let (lo, hi) = (e.min.to_f64(), e.max.to_f64());
                if hi < edges[0] || lo > edges[n_bins] {
                    continue;
                }
                match (slot(lo), slot(hi)) {
                    (Some(a), Some(z)) if a == z => {
                        counts[a] += match dom {
                            None => e.count,
                            Some(d) => {
                                tally.decoded(1);
                                header.bitmap(bytes, i)?.intersection_len(d)
                            }
                        };
                    }
                    _ => straddling.push(i),
                }
            }
            let mut candidates = self.union(b, straddling.into_iter(), tally)?;
            if let Some(d) = dom {
                candidates &= d;
            }
            Ok((counts, candidates))
        })
        .into_iter()
        .collect::<Result<Vec<_>>>()?;
        let mut counts = vec![0u64; n_bins];
        let mut candidates = Vec::with_capacity(per_block.len());
        for (block_counts, cand) in per_block {
            for (total, c) in counts.iter_mut().zip(block_counts) {
                *total += c;
            }
            candidates.push(cand);
        }
        Ok((
            counts,
            RowSet::from_blocks(self.n_rows, self.block_len, candidates)?,
        ))
    }

    /// Rows whose value is missing (NaN).
    pub fn missing(&self, tally: &Tally) -> Result<RowSet> {
        let blocks = pieces::map(self.headers.len(), |b| {
            self.headers[b].missing(self.bytes(b))
        })
        .into_iter()
        .collect::<Result<Vec<_>>>()?;
        tally.decoded(blocks.len());
        RowSet::from_blocks(self.n_rows, self.block_len, blocks)
    }

    /// Decode and check every bitmap of every block (each against its
    /// CRC-32 and recorded count): what a query would find damaged, found
    /// at once. Returns the first block found damaged and why; `None`
    /// when all are whole.
    #[must_use]
    pub fn check_bitmaps(&self) -> Option<(usize, String)> {
        pieces::map(self.headers.len(), |b| {
            let (header, bytes) = (&self.headers[b], self.bytes(b));
            let whole = header.missing(bytes).and_then(|_| {
                (0..header.entries.len()).try_for_each(|i| header.bitmap(bytes, i).map(|_| ()))
            });
            whole.err().map(|e| (b, e.to_string()))
        })
        .into_iter()
        .flatten()
        .next()
    }

    fn check_table(&self, set: &RowSet) -> Result<()> {
        if set.n_rows() != self.n_rows || set.block_len() != self.block_len {
            return Err(CoreError::Invalid(format!(
                "row set of {} rows in blocks of {} used with a variable of {} rows in blocks of {}",
                set.n_rows(),
                set.block_len(),
                self.n_rows,
                self.block_len
            )));
        }
        Ok(())
    }
}

/// One built block: its index bytes and the CRC-32 of the source values it
/// indexed (their native bytes), so the source can later be verified.
pub struct BuiltBlock {
    pub bytes: Vec<u8>,
    pub source_crc32: u32,
}

/// Index `values` block by block in parallel. Each block is widened to the
/// key type and checksummed inside its own task, so no pass over the whole
/// array happens on the caller's thread.
pub fn build_blocks<K: Key, T: Widen<K>>(
    values: &[T],
    edges: &[K],
    block_len: usize,
) -> Result<Vec<BuiltBlock>> {
    if block_len == 0 {
        return Err(CoreError::Invalid("block length must be positive".into()));
    }
    check_edges(edges)?;
    let lookup = BinLookup::new(edges);
    let n_bins = edges.len() + 1;
    // Blocks are built in groups of at least as many rows as there are bins:
    // each group makes its scratch (a few words per bin) once, so its cost
    // stays below the rows' even for many small blocks over a fine binning.
    let n_blocks = values.len().div_ceil(block_len);
    let per_group = n_bins.div_ceil(block_len).max(1);
    let groups = pieces::map(n_blocks.div_ceil(per_group), |g| {
        let mut scratch = BinScratch::new(n_bins);
        (g * per_group..n_blocks.min((g + 1) * per_group))
            .map(|b| {
                let chunk = &values[b * block_len..values.len().min((b + 1) * block_len)];
                let bytes = BlockIndex::build_with(chunk, &lookup, &mut scratch)?.to_bytes();
                Ok(BuiltBlock {
                    bytes,
                    source_crc32: crc32_of(chunk),
                })
            })
            .collect::<Result<Vec<_>>>()
    });
    let mut blocks = Vec::with_capacity(n_blocks);
    for group in groups {
        blocks.extend(group?);
    }
    Ok(blocks)
}

fn crc32_of<T: Copy>(values: &[T]) -> u32 {
    // SAFETY: `Widen` is implemented only for primitive integers and floats,
    // which have no padding and no invalid bit patterns, so their memory is
    // `size_of_val(values)` initialised bytes.
    let bytes = unsafe {
        std::slice::from_raw_parts(values.as_ptr().cast::<u8>(), std::mem::size_of_val(values))
    };
    crc32fast::hash(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::binning::equal_weight_edges;

    /// Blocks dealt over three buffers (as ranks write shards), each
    /// starting after some unrelated bytes.
    fn layout(blocks: &[BuiltBlock]) -> (Vec<Vec<u8>>, Vec<BlockSpan>) {
        let mut shards = vec![vec![0xEE; 7], vec![0xDD; 3], Vec::new()];
        let mut spans = Vec::new();
        for (i, b) in blocks.iter().enumerate() {
            let shard = &mut shards[i % 3];
            spans.push(((i % 3) as u32, shard.len() as u64, b.bytes.len() as u64));
            shard.extend_from_slice(&b.bytes);
        }
        (shards, spans)
    }

    fn buffers(shards: &[Vec<u8>]) -> Vec<Buffer> {
        shards
            .iter()
            .map(|s| Arc::new(s.clone()) as Buffer)
            .collect()
    }

    #[test]
    fn source_checksums_cover_each_block_raw_bytes() {
        let values: Vec<f32> = (0..10).map(|i| i as f32).collect();
        let blocks = build_blocks::<f64, f32>(&values, &[3.0], 4).unwrap();
        let expect: Vec<u32> = values
            .chunks(4)
            .map(|c| crc32fast::hash(&c.iter().flat_map(|v| v.to_ne_bytes()).collect::<Vec<u8>>()))
            .collect();
        assert_eq!(
            blocks.iter().map(|b| b.source_crc32).collect::<Vec<_>>(),
            expect
        );
    }

    #[test]
    fn check_bitmaps_finds_the_first_block_with_a_damaged_bitmap() {
        let values: Vec<f64> = (0..40).map(f64::from).collect();
        let blocks = build_blocks::<f64, f64>(&values, &[10.0, 20.0, 30.0], 8).unwrap();
        let (shards, spans) = layout(&blocks);
        let whole = ColumnIndex::<f64>::open(buffers(&shards), &spans, 40, 8).unwrap();
        assert_eq!(whole.check_bitmaps(), None);
        // The last byte of block 3's bytes is a bitmap's (the payload ends them).
        let mut damaged = shards.clone();
        let (shard, at, len) = spans[3];
        damaged[shard as usize][(at + len - 1) as usize] ^= 0x01;
        let column = ColumnIndex::<f64>::open(buffers(&damaged), &spans, 40, 8).unwrap();
        let (block, why) = column.check_bitmaps().expect("the damage is found");
        assert_eq!(block, 3);
        assert!(why.contains("bitmap"), "{why}");
    }

    fn oracle(values: &[f64], iv: &Interval<f64>) -> Vec<u64> {
        (0..values.len() as u64)
            .filter(|&i| iv.contains(values[i as usize]))
            .collect()
    }

    #[test]
    fn tally_counts_the_bitmaps_each_call_decodes() {
        // Bins [0, 10), [10, 20), ... ; 4 blocks of 25 rows.
        let values: Vec<f64> = (0..100).map(|i| f64::from(i % 50)).collect();
        let edges: Vec<f64> = (1..5).map(|k| f64::from(k * 10)).collect();
        let blocks = build_blocks(&values, &edges, 25).unwrap();
        let (shards, spans) = layout(&blocks);
        let data = buffers(&shards);
        let col = ColumnIndex::<f64>::open(data, &spans, 100, 25).unwrap();
        let on_edges = Interval {
            lo: 10.0,
            lo_incl: true,
            hi: 30.0,
            hi_incl: false,
        };
        let tally = Tally::default();
        col.count(&on_edges, &tally).unwrap();
        assert_eq!(
            tally.bitmaps_decoded(),
            0,
            "a count on edges decodes nothing"
        );
        let between = Interval {
            lo: 15.0,
            ..on_edges
        };
        let (sure, cand) = col.count(&between, &tally).unwrap();
        // One straddling bin, [10, 20), in each block that holds rows of it.
        assert_eq!(tally.bitmaps_decoded(), 2);
        assert_eq!((sure, cand.len()), (20, 20));
        col.missing(&tally).unwrap();
        assert_eq!(tally.bitmaps_decoded(), 2 + 4);
    }

    #[test]
    fn sure_plus_checked_candidates_is_exact() {
        let values: Vec<f64> = (0..10_007)
            .map(|i| {
                if i % 101 == 0 {
                    f64::NAN
                } else {
                    f64::from((i * 7919) % 1000) / 10.0
                }
            })
            .collect();
        let edges = equal_weight_edges(&values, 16);
        let blocks = build_blocks(&values, &edges, 1000).unwrap();
        let (shards, spans) = layout(&blocks);
        let data = buffers(&shards);
        let col = ColumnIndex::<f64>::open(data, &spans, values.len() as u64, 1000).unwrap();
        for (i, iv) in [
            Interval {
                lo: 10.0,
                lo_incl: false,
                hi: 55.5,
                hi_incl: true,
            },
            Interval {
                lo: edges[3],
                lo_incl: true,
                hi: f64::INFINITY,
                hi_incl: true,
            },
            Interval {
                lo: 99.95,
                lo_incl: true,
                hi: 1e9,
                hi_incl: false,
            },
            Interval {
                lo: 5.0,
                lo_incl: true,
                hi: 5.0,
                hi_incl: true,
            },
        ]
        .into_iter()
        .enumerate()
        {
            let expect = oracle(&values, &iv);
            let (sure, cand) = col.leaf(&iv, None, &Tally::default()).unwrap();
            let checked: Vec<u64> = cand
                .to_ids()
                .into_iter()
                .filter(|&i| iv.contains(values[i as usize]))
                .collect();
            let mut got = sure.to_ids();
            got.extend(checked);
            got.sort_unstable();
            assert_eq!(got, expect, "{iv:?}");
            let (count, cand2) = col.count(&iv, &Tally::default()).unwrap();
            assert_eq!(cand2, cand);
            assert_eq!(count, sure.len());
            // What a planner weighs, from the headers: the rows decoded and checked.
            assert_eq!(col.range_rows(&iv), (sure.len(), cand.len()), "{iv:?}");
            // Two ranks' shares add up to the whole; candidates stay in their share.
            let n_blocks = cand.blocks().len();
            let cut = (i * 3) % (n_blocks + 1);
            let (low, low_cand) = col.count_blocks(&iv, 0..cut, &Tally::default()).unwrap();
            let (high, high_cand) = col
                .count_blocks(&iv, cut..n_blocks, &Tally::default())
                .unwrap();
            assert_eq!(low + high, count);
            assert_eq!(low_cand.or(&high_cand).unwrap(), cand);
            assert!(low_cand.block_counts()[cut..].iter().all(|&n| n == 0));
            let bounds = col.block_bounds(&iv);
            let missing = col.missing(&Tally::default()).unwrap().block_counts();
            let counts = sure
                .block_counts()
                .into_iter()
                .zip(cand.block_counts())
                .zip(missing);
            for (b, (bound, ((s, c), m))) in bounds.iter().zip(counts).enumerate() {
                assert_eq!(*bound, s + c + m, "block {b}");
            }
        }
        assert_eq!(col.missing(&Tally::default()).unwrap().len(), 100);
    }

    #[test]
    fn histogram_counts_plus_candidates_equal_brute_force() {
        let values: Vec<f64> = (0..5003)
            .map(|i| {
                if i % 97 == 0 {
                    f64::NAN
                } else {
                    f64::from((i * 7919) % 1000) / 10.0
                }
            })
            .collect();
        let edges = crate::binning::variable_edges(&values, 16, 2);
        let blocks = build_blocks(&values, &edges, 700).unwrap();
        let (shards, spans) = layout(&blocks);
        let data = buffers(&shards);
        let col = ColumnIndex::<f64>::open(data, &spans, values.len() as u64, 700).unwrap();
        let domain = RowSet::from_sorted_ids(
            values.len() as u64,
            700,
            &(0..5003).step_by(3).collect::<Vec<_>>(),
        )
        .unwrap();
        for hist_edges in [
            vec![0.0, 10.0, 20.0, 99.9],
            vec![5.05, 33.3, 33.35, 70.0],
            vec![-1.0, 1000.0],
        ] {
            for dom in [None, Some(&domain)] {
                let (mut counts, cand) =
                    col.histogram(&hist_edges, dom, &Tally::default()).unwrap();
                for id in cand.to_ids() {
                    let v = values[id as usize];
                    let n = hist_edges.len() - 1;
                    if v >= hist_edges[0] && v <= hist_edges[n] {
                        counts[hist_edges
                            .partition_point(|e| *e <= v)
                            .saturating_sub(1)
                            .min(n - 1)] += 1;
                    }
                }
                let mut expect = vec![0u64; hist_edges.len() - 1];
                let rows: Vec<u64> = match dom {
                    None => (0..values.len() as u64).collect(),
                    Some(d) => d.to_ids(),
                };
                for r in rows {
                    let v = values[r as usize];
                    let n = hist_edges.len() - 1;
                    if v >= hist_edges[0] && v <= hist_edges[n] {
                        expect[hist_edges
                            .partition_point(|e| *e <= v)
                            .saturating_sub(1)
                            .min(n - 1)] += 1;
                    }
                }
                assert_eq!(counts, expect, "{hist_edges:?} domain {}", dom.is_some());
            }
        }
    }

    #[test]
    fn open_rejects_inconsistent_layouts() {
        let values: Vec<i64> = (0..100).collect();
        let blocks = build_blocks(&values, &[50], 30).unwrap();
        let (shards, spans) = layout(&blocks);
        let data = buffers(&shards);
        assert!(ColumnIndex::<i64>::open(data.clone(), &spans, 100, 30).is_ok());
        assert!(ColumnIndex::<i64>::open(data.clone(), &spans, 100, 25).is_err());
        assert!(ColumnIndex::<i64>::open(data.clone(), &spans, 100, 0).is_err());
        // Rows the spans cannot hold are refused before anything is allocated for them.
        assert!(ColumnIndex::<i64>::open(data.clone(), &spans, 1 << 62, 1).is_err());
        assert!(ColumnIndex::<i64>::open(data.clone(), &spans[..3], 100, 30).is_err());
        assert!(ColumnIndex::<u64>::open(data.clone(), &spans, 100, 30).is_err());
        let mut cut = data.clone();
        cut[0] = Arc::new(shards[0][..shards[0].len() - 1].to_vec());
        assert!(ColumnIndex::<i64>::open(cut, &spans, 100, 30).is_err());
        let mut elsewhere = spans.clone();
        elsewhere[1].0 = 3; // a fourth file that is not there
        assert!(ColumnIndex::<i64>::open(data, &elsewhere, 100, 30).is_err());
    }

    #[test]
    fn the_column_keeps_its_buffers_and_counts_the_blocks_it_has() {
        let values: Vec<i64> = (0..100).collect();
        let blocks = build_blocks(&values, &[50], 30).unwrap();
        let (shards, spans) = layout(&blocks);
        let col = ColumnIndex::<i64>::open(buffers(&shards), &spans, 100, 30).unwrap();
        drop(shards); // the column holds its own references
        let all = Interval {
            lo: i64::LOWEST,
            lo_incl: true,
            hi: i64::HIGHEST,
            hi_incl: true,
        };
        let tally = Tally::default();
        assert_eq!(col.n_blocks(), 4);
        assert_eq!(col.count(&all, &tally).unwrap().0, 100);
        for ((first, stop), rows) in [((1, 3), 60), ((3, 9), 10), ((0, 99), 100), ((4, 4), 0)] {
            let (n, cand) = col.count_blocks(&all, first..stop, &tally).unwrap();
            assert_eq!((n, cand.n_rows()), (rows, 100), "{first}..{stop}");
        }
    }
}
