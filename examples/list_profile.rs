//! Profiles a full listing: `cargo run --release --example list_profile -- <workdir> <rounds>`.
#![allow(clippy::disallowed_methods)]
use resource_plane::backends::fs::{Containment, RootPath};
use resource_plane::backends::{OsFilesystem, SystemClock};
use resource_plane::budget::ByteBudget;
use resource_plane::planes::{ExportScope, OperatorPlane, ResourcePlane};
use std::sync::Arc;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let workdir = std::path::PathBuf::from(&args[1]);
    let rounds: usize = args.get(2).and_then(|r| r.parse().ok()).unwrap_or(5);
    for _ in 0..rounds {
        let plane = OperatorPlane::new(
            Arc::new(OsFilesystem::open(&workdir).unwrap()),
            Arc::new(SystemClock),
            ExportScope {
                root: RootPath::parse("out").unwrap(),
                max_bytes: 64 << 20,
                containment: Containment::Sealed,
            },
            ByteBudget::new(1 << 30),
        );
        let start = std::time::Instant::now();
        let n = plane.list().unwrap().len();
        println!("{n} files in {:?}", start.elapsed());
    }
}
