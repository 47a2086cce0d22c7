//! Roaring's portable serialisation: written straight from sorted row
//! numbers, and read straight into a slice of ids.
//!
//! Why not `RoaringBitmap::from_sorted_iter(..).serialize_into(..)`: block
//! building already has each bin's rows sorted (a counting sort), and pushing
//! them one by one into a bitmap and then serialising it costs about a third
//! of the build. This writes the same bytes directly: the "no run container"
//! layout of the Roaring format spec (cookie 12346, container count, key and
//! cardinality-1 pairs, offsets, then array containers of sorted u16 or
//! 8 KiB bitmap containers above 4096 values). Tests require byte equality
//! with roaring-rs, and reading goes through roaring-rs's checked decoder.

const COOKIE_NO_RUN: u32 = 12346;
const COOKIE_RUNS: u16 = 12347;
/// Where a serialisation with run containers has fewer containers than
/// this, it has no offsets (the format spec's `NO_OFFSET_THRESHOLD`).
const OFFSETS_FROM: usize = 4;
const ARRAY_LIMIT: usize = 4096;

/// Append the portable serialisation of the set `rows` (strictly ascending) to `out`.
///
/// # Examples
/// ```
/// use quarry_core::portable::serialize_sorted;
/// let rows = [1u32, 5, 70_000];
/// let mut bytes = Vec::new();
/// serialize_sorted(&rows, &mut bytes);
/// let bitmap = roaring::RoaringBitmap::deserialize_from(&bytes[..]).unwrap();
/// assert_eq!(bitmap.iter().collect::<Vec<_>>(), rows);
/// ```
pub fn serialize_sorted(rows: &[u32], out: &mut Vec<u8>) {
    debug_assert!(rows.windows(2).all(|w| w[0] < w[1]));
    // Split into containers by the high 16 bits.
    let mut containers: Vec<(u16, &[u32])> = Vec::new();
    let mut start = 0;
    while start < rows.len() {
        let key = rows[start] >> 16;
        let end = start + rows[start..].partition_point(|&r| r >> 16 == key);
        containers.push((key as u16, &rows[start..end]));
        start = end;
    }
    let base = out.len();
    out.extend_from_slice(&COOKIE_NO_RUN.to_le_bytes());
    out.extend_from_slice(&(containers.len() as u32).to_le_bytes());
    for (key, values) in &containers {
        out.extend_from_slice(&key.to_le_bytes());
        out.extend_from_slice(&((values.len() - 1) as u16).to_le_bytes());
    }
    let mut offset = out.len() - base + 4 * containers.len();
    for (_, values) in &containers {
        out.extend_from_slice(&(offset as u32).to_le_bytes());
        offset += if values.len() > ARRAY_LIMIT {
            8192
        } else {
            2 * values.len()
        };
    }
    for (_, values) in &containers {
        if values.len() > ARRAY_LIMIT {
            let mut words = [0u64; 1024];
            for &r in *values {
                let low = (r & 0xFFFF) as usize;
                words[low >> 6] |= 1 << (low & 63);
            }
            for w in words {
                out.extend_from_slice(&w.to_le_bytes());
            }
        } else {
            for &r in *values {
                out.extend_from_slice(&(r as u16).to_le_bytes());
            }
        }
    }
}

/// Write `id(row)` of each row of the bitmap serialised in `bytes` (as
/// roaring-rs's `serialize_into` writes it) into `out`, ascending; returns
/// how many.
///
/// Why not roaring-rs's iterator: it costs about 3.5 ns a row (a match on
/// the container's kind for each row), which made listing the ids of a
/// dense selection slower than `np.flatnonzero` of a mask; and its
/// batched `Iter::next_many` (0.12) loses or misorders whole containers
/// stored as one run of 65,536. Here each container is decoded by a loop of
/// its own kind: the set bits of a bitmap word by word, an array's values,
/// a run's rows.
///
/// # Panics
/// If `bytes` is not a serialised bitmap, or it holds more rows than `out`.
///
/// # Examples
/// ```
/// use quarry_core::portable::fill_rows;
/// let bitmap: roaring::RoaringBitmap = [3u32, 70_000, 70_001].into_iter().collect();
/// let mut bytes = Vec::new();
/// bitmap.serialize_into(&mut bytes).unwrap();
/// let mut ids = [0i64; 3];
/// assert_eq!(fill_rows(&bytes, &mut ids, |row| 10 + i64::from(row)), 3);
/// assert_eq!(ids, [13, 70_010, 70_011]);
/// ```
pub fn fill_rows<T>(bytes: &[u8], out: &mut [T], id: impl Fn(u32) -> T) -> usize {
    let u16_at = |at: usize| u16::from_le_bytes([bytes[at], bytes[at + 1]]);
    let u32_at = |at: usize| u32::from_le_bytes(bytes[at..at + 4].try_into().expect("4 bytes"));
    let cookie = u32_at(0);
    // Each container's kind (whether it is a run), and where the
    // descriptions (key, cardinality - 1) start.
    let (count, runs, descriptions) = if cookie == COOKIE_NO_RUN {
        (u32_at(4) as usize, None, 8)
    } else {
        assert_eq!(cookie as u16, COOKIE_RUNS, "a serialised Roaring bitmap");
        let count = (cookie >> 16) as usize + 1;
        let flags = count.div_ceil(8);
        (count, Some(&bytes[4..4 + flags]), 4 + flags)
    };
    let is_run = |c: usize| runs.is_some_and(|flags| flags[c / 8] & (1 << (c % 8)) != 0);
    let has_offsets = runs.is_none() || count >= OFFSETS_FROM;
    let mut at = descriptions + 4 * count + if has_offsets { 4 * count } else { 0 };
    let mut n = 0;
    for c in 0..count {
        let high = u32::from(u16_at(descriptions + 4 * c)) << 16;
        let cardinality = usize::from(u16_at(descriptions + 4 * c + 2)) + 1;
        if is_run(c) {
            let n_runs = usize::from(u16_at(at));
            for r in 0..n_runs {
                let start = u32::from(u16_at(at + 2 + 4 * r));
                let last = start + u32::from(u16_at(at + 4 + 4 * r));
                for (slot, row) in out[n..=n + (last - start) as usize]
                    .iter_mut()
                    .zip(start..=last)
                {
                    *slot = id(high | row);
                }
                n += (last - start) as usize + 1;
            }
            at += 2 + 4 * n_runs;
        } else if cardinality <= ARRAY_LIMIT {
            let values = &bytes[at..at + 2 * cardinality];
            for (slot, low) in out[n..n + cardinality]
                .iter_mut()
                .zip(values.chunks_exact(2))
            {
                *slot = id(high | u32::from(u16::from_le_bytes([low[0], low[1]])));
            }
            n += cardinality;
            at += 2 * cardinality;
        } else {
            let words = &bytes[at..at + 8192];
            let out = &mut out[n..n + cardinality];
            let mut put = 0;
            // The words first: zip stops on them before asking for a base
            // past the last container's (which overflows u32 at key 0xFFFF).
            for (word, base) in words.chunks_exact(8).zip((high..).step_by(64)) {
                let bits = u64::from_le_bytes(word.try_into().expect("8 bytes"));
                put += list_bits(bits, base, &mut out[put..], &id);
            }
            assert_eq!(put, cardinality, "a bitmap container holds its cardinality");
            n += cardinality;
            at += 8192;
        }
    }
    n
}

/// Write `id(base + bit)` of each set bit of `bits` into `out`, ascending;
/// returns how many. Where `out` has room for 64, they are written eight at
/// a time, unconditionally (the slots past the last are written over by the
/// next word's): the loop ends once per eight bits, not at each, so a word
/// costs one mispredicted branch, not a mispredicted end of loop per word
/// and a branch per bit.
#[inline(always)]
#[allow(clippy::inline_always)] // the body of fill_rows' bitmap loop
fn list_bits<T>(mut bits: u64, base: u32, out: &mut [T], id: &impl Fn(u32) -> T) -> usize {
    let count = bits.count_ones() as usize;
    if let Some(room) = out.get_mut(..64) {
        for eight in room.chunks_exact_mut(8).take(count.div_ceil(8)) {
            for slot in eight {
                // Past the last bit, `bits` is 0: a slot written in vain
                // (with `base + 64`, which wraps past the last word of 2^32).
                *slot = id(base.wrapping_add(bits.trailing_zeros()));
                bits &= bits.wrapping_sub(1);
            }
        }
    } else {
        for slot in &mut out[..count] {
            *slot = id(base + bits.trailing_zeros());
            bits &= bits - 1;
        }
    }
    count
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use roaring::RoaringBitmap;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        #[test]
        fn bytes_equal_roaring_rs(rows in prop::collection::btree_set(
            prop_oneof![0u32..70_000, 0u32..5000, any::<u32>()], 0..9000)) {
            let rows: Vec<u32> = rows.into_iter().collect();
            let mut ours = Vec::new();
            serialize_sorted(&rows, &mut ours);
            let mut theirs = Vec::new();
            RoaringBitmap::from_sorted_iter(rows.iter().copied()).unwrap().serialize_into(&mut theirs).unwrap();
            prop_assert_eq!(ours, theirs);
        }
    }

    #[test]
    fn the_last_container_of_2_32_rows_is_listed() {
        let rows: Vec<u32> = (u32::MAX - 9000..=u32::MAX).step_by(2).collect();
        let mut bytes = Vec::new();
        serialize_sorted(&rows, &mut bytes);
        let mut out = vec![0u32; rows.len()];
        assert_eq!(fill_rows(&bytes, &mut out, |row| row), rows.len());
        assert_eq!(out, rows);
    }

    #[test]
    fn dense_and_empty_containers() {
        let dense: Vec<u32> = (0..65_536).step_by(3).chain(100_000..100_010).collect();
        let mut ours = Vec::new();
        serialize_sorted(&dense, &mut ours);
        let mut theirs = Vec::new();
        RoaringBitmap::from_sorted_iter(dense.iter().copied())
            .unwrap()
            .serialize_into(&mut theirs)
            .unwrap();
        assert_eq!(ours, theirs);
        let mut empty = Vec::new();
        serialize_sorted(&[], &mut empty);
        assert_eq!(
            RoaringBitmap::deserialize_from(&empty[..]).unwrap().len(),
            0
        );
    }
}
