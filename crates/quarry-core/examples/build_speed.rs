//! Where block building spends its time: `cargo run --release --example build_speed`.
use std::time::Instant;

use quarry_core::binning::{bin_of, equal_weight_edges};
use quarry_core::block::BlockIndex;

fn main() {
    let n = 1 << 20;
    // A skewed distribution like particle energies, deterministic without a RNG crate.
    let mut state = 0x9E37_79B9_7F4A_7C15_u64;
    let values: Vec<f64> = (0..n)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let u = (state >> 11) as f64 / (1u64 << 53) as f64;
            -0.1 * (1.0 - u).ln()
        })
        .collect();
    let t = Instant::now();
    let edges = equal_weight_edges(&values[..1 << 16], 1024);
    println!("edges from 64K sample: {:?}", t.elapsed());
    let t = Instant::now();
    let mut acc = 0usize;
    for &v in &values {
        acc += bin_of(&edges, v);
    }
    println!("bin_of x {n}: {:?} ({acc})", t.elapsed());
    let lookup = quarry_core::binning::BinLookup::new(&edges);
    let t = Instant::now();
    let mut acc2 = 0usize;
    for &v in &values {
        acc2 += lookup.bin(v);
    }
    println!("BinLookup x {n}: {:?} ({acc2})", t.elapsed());
    assert_eq!(acc, acc2);
    let t = Instant::now();
    let block = BlockIndex::<f64>::build(&values, &edges).unwrap();
    println!("BlockIndex::build: {:?}", t.elapsed());
    let t = Instant::now();
    let bytes = block.to_bytes();
    println!("to_bytes: {:?} ({} bytes)", t.elapsed(), bytes.len());
}
