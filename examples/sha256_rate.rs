//! Prints the single-core sha256 time of one MiB, in microseconds (the median of many runs),
//! with the same `sha2` build the planes use. `bench/load.sh` measures it in the same run as the
//! servers, for the 1 MiB target: CPU per request ≤ 1.15 × (nginx's + this).
//!
//! ```sh
//! cargo run --release --example sha256_rate
//! ```

use sha2::{Digest, Sha256};
use std::time::Instant;

fn main() {
    let data: Vec<u8> = (0..1 << 20)
        .map(|i: u32| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    let mut samples: Vec<f64> = (0..200)
        .map(|_| {
            let start = Instant::now();
            std::hint::black_box(Sha256::digest(std::hint::black_box(&data)));
            start.elapsed().as_secs_f64() * 1e6
        })
        .collect();
    samples.sort_by(f64::total_cmp);
    println!("{:.1}", samples[samples.len() / 2]);
}
