//! A bounded loopback soak of `resource-plane serve`: one serve process over a
//! temporary workdir exporting ~50 files, hammered by N client threads (reads, listings,
//! attacks, redeems, forgeries; each request on a fresh connection) while a thread rewrites
//! files by write-temp + rename. Prints a one-line JSON summary; exits 1 on any problem.
//!
//! ```text
//! cargo build --release
//! cargo run --release --example soak -- --seconds 60 --clients 300
//! ```
//!
//! Flags: `--seconds N` (default 20), `--clients N` (default 100), `--files N` (default 50),
//! `--rss-bound-mib N` (default 300), `--bin PATH` (default target/release/resource-plane).
//! Only 127.0.0.1 is contacted.
#![allow(clippy::disallowed_methods)] // a driver is a composition root

#[path = "../tests/support/soak_driver.rs"]
mod soak_driver;

use soak_driver::{SoakConfig, run_soak};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

fn usage(why: &str) -> ExitCode {
    eprintln!(
        "soak: {why}\nusage: soak [--seconds N] [--clients N] [--files N] [--rss-bound-mib N] [--bin PATH]"
    );
    ExitCode::from(2)
}

fn main() -> ExitCode {
    let mut config = SoakConfig::new(
        PathBuf::from("target/release/resource-plane"),
        Duration::from_secs(20),
        100,
    );
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let Some(value) = args.next() else {
            return usage(&format!("{flag} needs a value"));
        };
        let number = || value.parse::<u64>().ok().filter(|n| *n > 0);
        match (flag.as_str(), number()) {
            ("--seconds", Some(n)) if n <= 3600 => config.duration = Duration::from_secs(n),
            ("--clients", Some(n)) if n <= 2000 => config.clients = n as usize,
            ("--files", Some(n)) if (8..=1000).contains(&n) => config.files = n as usize,
            ("--rss-bound-mib", Some(n)) => config.rss_bound_mib = n,
            ("--bin", _) => config.bin = PathBuf::from(&value),
            _ => return usage(&format!("bad {flag} {value}")),
        }
    }
    let report = match run_soak(&config) {
        Ok(report) => report,
        Err(e) => {
            eprintln!("soak: cannot set up: {e}");
            return ExitCode::from(2);
        }
    };
    for problem in &report.problems {
        eprintln!("problem: {problem}");
    }
    println!("{}", report.summary_json());
    if report.passed() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
