//! placeholder
#![forbid(unsafe_code)]
pub mod backends;
pub mod hex;
pub mod path;
pub mod redact;
pub mod refusal;
