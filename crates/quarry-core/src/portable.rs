//! Writing Roaring's portable serialisation straight from sorted row numbers.
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
