//! The binary's subcommands.

pub(crate) mod check;
pub(crate) mod console;
pub(crate) mod demo;
pub(crate) mod serve;
