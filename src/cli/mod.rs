//! The binary's subcommands.

pub(crate) mod check;
pub(crate) mod console;
pub(crate) mod demo;
pub(crate) mod log;
pub(crate) mod pull;
pub(crate) mod serve;
