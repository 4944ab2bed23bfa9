//! The binary's subcommands.

pub(crate) mod check;
pub(crate) mod console;
pub(crate) mod demo;
pub(crate) mod log;
pub(crate) mod pull;
pub(crate) mod serve;

use resource_plane::backends::{OsRandom, Random};

/// `N` bytes of the OS random source as lowercase hex: the binary's temporary names. The
/// binary is the composition root, so it draws from the OS directly.
pub(crate) fn random_hex<const N: usize>() -> String {
    let os: &dyn Random = &OsRandom;
    os.hex::<N>()
}
