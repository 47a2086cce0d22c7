//! Property tests: the core against brute force.

use std::collections::BTreeSet;
use std::sync::Arc;

use proptest::prelude::*;
use quarry_core::binning::{bin_of, equal_weight_edges, variable_edges, BinLookup};
use quarry_core::block::BlockIndex;
use quarry_core::column::{build_blocks, BlockSpan, Buffer, BuiltBlock, ColumnIndex, Tally};
use quarry_core::eval::Interval;
use quarry_core::key::Key;
use quarry_core::rowset::RowSet;

/// Blocks dealt over two buffers, as two ranks would write their shards.
fn layout(blocks: &[BuiltBlock]) -> (Vec<Vec<u8>>, Vec<BlockSpan>) {
    let mut shards = vec![Vec::new(), Vec::new()];
    let mut spans = Vec::new();
    for (i, b) in blocks.iter().enumerate() {
        let shard = &mut shards[i % 2];
        spans.push(((i % 2) as u32, shard.len() as u64, b.bytes.len() as u64));
        shard.extend_from_slice(&b.bytes);
    }
    (shards, spans)
}

/// Sure rows plus the candidates that pass the check, as the caller computes them.
fn answer<K: Key + quarry_core::key::Widen<K>>(
    values: &[K],
    edges: &[K],
    block_len: usize,
    iv: &Interval<K>,
) -> Vec<u64> {
    let blocks = build_blocks(values, edges, block_len).unwrap();
    let (shards, spans) = layout(&blocks);
    let data: Vec<Buffer> = shards.into_iter().map(|s| Arc::new(s) as Buffer).collect();
    let col = ColumnIndex::<K>::open(data, &spans, values.len() as u64, block_len as u64).unwrap();
    let (sure, cand) = col.leaf(iv, None, &Tally::default()).unwrap();
    let (count, cand2) = col.count(iv, &Tally::default()).unwrap();
    assert_eq!(count, sure.len());
    assert_eq!(cand, cand2);
    assert!(
        sure.and(&cand).unwrap().is_empty(),
        "a row is both sure and a candidate"
    );
    let mut ids: Vec<u64> = sure.to_ids();
    ids.extend(
        cand.to_ids()
            .into_iter()
            .filter(|&i| inside(values[i as usize], iv)),
    );
    ids.sort_unstable();
    ids
}

/// `lo (<|<=) v (<|<=) hi` with the language's own comparisons, not the
/// crate's `Interval::contains`: NaN is inside nothing, -0.0 equals 0.0.
fn inside<K: PartialOrd + Copy>(v: K, iv: &Interval<K>) -> bool {
    let above = if iv.lo_incl { v >= iv.lo } else { v > iv.lo };
    let below = if iv.hi_incl { v <= iv.hi } else { v < iv.hi };
    above && below
}

fn brute<K: Key>(values: &[K], iv: &Interval<K>) -> Vec<u64> {
    (0..values.len() as u64)
        .filter(|&i| inside(values[i as usize], iv))
        .collect()
}

fn float_value() -> impl Strategy<Value = f64> {
    prop_oneof![
        6 => -100.0f64..100.0,
        1 => Just(f64::NAN),
        1 => Just(f64::INFINITY),
        1 => Just(f64::NEG_INFINITY),
        2 => prop::sample::select(vec![0.0, -0.0, 0.1, 1.5, 1e300, -1e-300]),
    ]
}

proptest! {
    #[test]
    fn lookup_equals_binary_search(
        sample in prop::collection::vec(float_value(), 1..3000),
        probes in prop::collection::vec(float_value(), 1..200),
        nbins in 1usize..2000,
        ints in prop::collection::vec(prop_oneof![any::<i64>(), -50i64..50], 1..3000),
    ) {
        let edges = equal_weight_edges(&sample, nbins);
        let lookup = BinLookup::new(&edges);
        for p in probes.iter().copied().chain(sample.iter().copied()).filter(|v| !v.is_nan()) {
            prop_assert_eq!(lookup.bin(p), bin_of(&edges, p));
        }
        let int_edges = equal_weight_edges(&ints, nbins);
        let lookup = BinLookup::new(&int_edges);
        for &p in ints.iter().chain([i64::MIN, i64::MAX].iter()) {
            prop_assert_eq!(lookup.bin(p), bin_of(&int_edges, p));
        }
    }

    #[test]
    fn blocks_built_in_groups_equal_blocks_built_alone(
        values in prop::collection::vec(float_value(), 0..3000),
        nbins in 1usize..2000,
        block_len in 1usize..64,
    ) {
        // Many small blocks over many bins share one scratch per group: each
        // block's bytes must be those it has built on its own.
        let edges = equal_weight_edges(&values, nbins);
        let grouped = build_blocks(&values, &edges, block_len).unwrap();
        prop_assert_eq!(grouped.len(), values.len().div_ceil(block_len));
        for (block, chunk) in grouped.iter().zip(values.chunks(block_len)) {
            let alone = BlockIndex::<f64>::build(chunk, &edges).unwrap().to_bytes();
            prop_assert_eq!(&block.bytes, &alone);
        }
    }

    #[test]
    fn float_ranges_are_exact(
        values in prop::collection::vec(float_value(), 0..600),
        nbins in 1usize..40,
        block_len in 1usize..130,
        digits in prop::option::of(1u32..4),
        a in float_value(), b in float_value(),
        lo_incl: bool, hi_incl: bool,
        pick in prop::option::of(0usize..600),
    ) {
        let edges = variable_edges(&values, nbins, digits.unwrap_or(0));
        // Literals drawn from the data hit bin edges and in-block extremes exactly.
        let lo = pick.and_then(|p| values.get(p).copied()).unwrap_or(a);
        let iv = Interval { lo: lo.min(b), lo_incl, hi: lo.max(b), hi_incl };
        prop_assume!(!iv.lo.is_nan() && !iv.hi.is_nan());
        prop_assert_eq!(answer(&values, &edges, block_len, &iv), brute(&values, &iv));
    }

    #[test]
    fn integer_ranges_are_exact(
        values in prop::collection::vec(prop_oneof![any::<i64>(), -5i64..5, Just(i64::MIN), Just(i64::MAX)], 0..600),
        nbins in 1usize..40,
        block_len in 1usize..130,
        a: i64, b in -6i64..6, lo_incl: bool, hi_incl: bool,
    ) {
        let edges = equal_weight_edges(&values, nbins);
        let iv = Interval { lo: a.min(b), lo_incl, hi: a.max(b), hi_incl };
        prop_assert_eq!(answer(&values, &edges, block_len, &iv), brute(&values, &iv));
    }

    #[test]
    fn unsigned_ranges_are_exact(
        values in prop::collection::vec(prop_oneof![any::<u64>(), 0u64..8, Just(u64::MAX)], 0..400),
        nbins in 1usize..20,
        block_len in 1usize..100,
        a in 0u64..10, b: u64,
    ) {
        let edges = equal_weight_edges(&values, nbins);
        let iv = Interval { lo: a.min(b), lo_incl: true, hi: a.max(b), hi_incl: false };
        prop_assert_eq!(answer(&values, &edges, block_len, &iv), brute(&values, &iv));
    }

    #[test]
    fn ids_are_listed_from_every_kind_of_container(
        block_len in prop::sample::select(vec![1u64, 700, 65_536, 200_000]),
        runs in prop::collection::vec((0u64..300_000, 0u64..9_000), 0..12),
        scattered in prop::collection::btree_set(0u64..300_000, 0..3000),
    ) {
        // Long runs, dense stretches and scattered rows: run, bitmap and
        // array containers, listed a few thousand rows at a time.
        let n_rows = 300_000;
        let mut ids: BTreeSet<u64> = scattered;
        for (start, len) in runs {
            ids.extend((start..(start + len).min(n_rows)).step_by(if len % 3 == 0 { 2 } else { 1 }));
        }
        let ids: Vec<u64> = ids.into_iter().collect();
        let plain = RowSet::from_sorted_ids(n_rows, block_len, &ids).unwrap();
        let mut blocks = plain.blocks().to_vec();
        for block in &mut blocks {
            block.optimize(); // runs where they are smaller
        }
        let set = RowSet::from_blocks(n_rows, block_len, blocks).unwrap();
        // Every row: whole containers of 65,536 (roaring 0.12's next_many
        // listed a block of them last container first).
        let all: Vec<u64> = (0..n_rows).collect();
        prop_assert_eq!(RowSet::full(n_rows, block_len).unwrap().to_ids(), all);
        prop_assert_eq!(set.to_ids(), ids.clone());
        let mut filled = vec![-1i64; ids.len()];
        set.fill_ids(&mut filled).unwrap();
        prop_assert_eq!(filled, ids.iter().map(|&i| i as i64).collect::<Vec<_>>());
    }

    #[test]
    fn row_set_algebra_matches_sets(
        n_rows in 0u64..500,
        block_len in 1u64..70,
        a in prop::collection::btree_set(0u64..500, 0..200),
        b in prop::collection::btree_set(0u64..500, 0..200),
    ) {
        let a: BTreeSet<u64> = a.into_iter().filter(|&i| i < n_rows).collect();
        let b: BTreeSet<u64> = b.into_iter().filter(|&i| i < n_rows).collect();
        let ra = RowSet::from_sorted_ids(n_rows, block_len, &a.iter().copied().collect::<Vec<_>>()).unwrap();
        let rb = RowSet::from_sorted_ids(n_rows, block_len, &b.iter().copied().collect::<Vec<_>>()).unwrap();
        prop_assert_eq!(ra.and(&rb).unwrap().to_ids(), a.intersection(&b).copied().collect::<Vec<_>>());
        prop_assert_eq!(ra.or(&rb).unwrap().to_ids(), a.union(&b).copied().collect::<Vec<_>>());
        prop_assert_eq!(ra.minus(&rb).unwrap().to_ids(), a.difference(&b).copied().collect::<Vec<_>>());
        let all = RowSet::full(n_rows, block_len).unwrap();
        prop_assert_eq!(all.minus(&ra).unwrap().or(&ra).unwrap(), all.clone());
        prop_assert_eq!(all.len(), n_rows);
    }
}
