//! placeholder
#![forbid(unsafe_code)]
pub mod backends;
pub mod hex;
pub mod manifest;
pub mod policy;
pub mod units;
pub mod path;
pub mod redact;
pub mod refusal;
